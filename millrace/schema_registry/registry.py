"""``SchemaRegistry``: the registry's operations over the ``SchemaStore`` (reads, from any
instance) and the ``KafkaStoreWriter`` (writes, on the leader only; ``rest`` forwards the
others' writes to it).

Rules, as Confluent's registry has them:

- Registering a schema that a live version of the subject already holds returns that
  version; otherwise the schema is checked against the subject's live versions at the
  subject's compatibility level (its own, else the global one, else BACKWARD), and becomes
  version max+1 (soft-deleted versions count: a number is never reused).  Its id is the one
  the same schema (type, canonical text, references) has under any subject, else max id + 1.
- Deletes are soft first (the version stays readable with ``?deleted=true`` and by id),
  then permanent (``?permanent=true``, only for what was soft-deleted: 40405 / 40407
  otherwise).  A version another schema references cannot be deleted (42206).
- Modes: READWRITE (default), READONLY (no registrations: 42205), READONLY_OVERRIDE,
  IMPORT (registrations carry their id and version; allowed only on an empty registry
  unless forced).

Every write runs under the writer's lock after the store has read the topic to its end, so
the checks see every earlier write, and it returns once the store has applied it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace

from millrace.client.schema_registry.schemas import (
    InvalidSchemaError,
    ParsedSchema,
    Schema,
    SchemaReference,
    parse_schema,
)
from millrace.schema_registry import errors
from millrace.schema_registry import store as records
from millrace.schema_registry.kafka_store import KafkaStoreWriter
from millrace.schema_registry.store import SchemaStore, SchemaVersion, identity

log = logging.getLogger(__name__)

LEVELS = ("BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL",
          "FULL_TRANSITIVE", "NONE")
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
DEFAULT_LEVEL = "BACKWARD"
DEFAULT_MODE = "READWRITE"
MAX_VERSION = 2**31 - 1


class SchemaRegistry:
    def __init__(self, store: SchemaStore, writer: KafkaStoreWriter | None,
                 default_level: str = DEFAULT_LEVEL,
                 catch_up: Callable[[], None] | None = None) -> None:
        self.store = store
        self.writer = writer
        self.default_level = default_level
        self._catch_up = catch_up or (lambda: None)
        self._parsed: dict[records.SchemaKey, ParsedSchema] = {}

    # ------------------------------------------------------------------ parsing
    def _resolve(self, ref: SchemaReference) -> Schema:
        for v in self.store.versions(ref.subject, deleted=True):
            if v.version == ref.version:
                return v.schema
        raise InvalidSchemaError(f"reference {ref.name!r}: subject {ref.subject!r} has no "
                                 f"version {ref.version}")

    def parse(self, schema: Schema) -> ParsedSchema:
        key = identity(schema)
        parsed = self._parsed.get(key)
        if parsed is None:
            try:
                parsed = parse_schema(schema, self._resolve)
            except InvalidSchemaError as e:
                raise errors.InvalidSchema(str(e)) from None
            if len(self._parsed) > 10_000:
                self._parsed.clear()
            self._parsed[key] = parsed
        return parsed

    def canonical(self, schema: Schema) -> tuple[Schema, ParsedSchema]:
        """The schema as it is stored (canonical text) and its parsed form."""
        parsed = self.parse(schema)
        stored = replace(schema, schema_str=parsed.canonical())
        self._parsed.setdefault(identity(stored), parsed)
        return stored, parsed

    # ------------------------------------------------------------------ reads
    def subjects(self, *, deleted: bool = False, prefix: str = "") -> list[str]:
        return [s for s in self.store.subject_names(deleted=deleted) if s.startswith(prefix)]

    def versions(self, subject: str, *, deleted: bool = False) -> list[int]:
        found = self.store.versions(subject, deleted=deleted)
        if not found:
            raise self._subject_missing(subject)
        return [v.version for v in found]

    def _subject_missing(self, subject: str) -> errors.RegistryError:
        if self.store.versions(subject, deleted=True):
            return errors.SubjectNotFound(f"Subject '{subject}' was soft deleted. Set "
                                          "permanent=true to delete permanently")
        return errors.SubjectNotFound(f"Subject '{subject}' not found.")

    def get_version(self, subject: str, version: str | int, *,
                    deleted: bool = False) -> SchemaVersion:
        number = parse_version(version)
        found = self.store.versions(subject, deleted=True)
        if not found:
            raise errors.SubjectNotFound(f"Subject '{subject}' not found.")
        live = [v for v in found if not v.deleted]
        if number == -1:
            pool = found if deleted else live
            if not pool:
                raise self._subject_missing(subject)
            return pool[-1]
        for v in found:
            if v.version == number and (deleted or not v.deleted):
                return v
        raise errors.VersionNotFound(f"Version {number} not found.")

    def schema_by_id(self, schema_id: int) -> Schema:
        schema = self.store.schema_by_id(schema_id)
        if schema is None:
            raise errors.SchemaNotFound(f"Schema {schema_id} not found")
        return schema

    def usages(self, schema_id: int, *, deleted: bool = False) -> list[SchemaVersion]:
        self.schema_by_id(schema_id)
        return self.store.usages(schema_id, deleted=deleted)

    def lookup(self, subject: str, schema: Schema, *, deleted: bool = False) -> SchemaVersion:
        found = self.store.versions(subject, deleted=deleted)
        if not found:
            raise errors.SubjectNotFound(f"Subject '{subject}' not found.")
        stored, _ = self.canonical(schema)
        key = identity(stored)
        for v in reversed(found):
            if v.key() == key:
                return v
        raise errors.SchemaNotFound("Schema not found")

    def referenced_by(self, subject: str, version: str | int) -> list[int]:
        v = self.get_version(subject, version)
        return self.store.referenced_by(subject, v.version)

    def level(self, subject: str | None, *, default_to_global: bool = True) -> str:
        level = self.store.compatibility(subject)
        if level is None and subject is not None:
            if not default_to_global:
                raise errors.SubjectLevelConfigNotFound(
                    f"Subject '{subject}' does not have subject-level compatibility configured")
            level = self.store.compatibility(None)
        return level or self.default_level

    def mode(self, subject: str | None, *, default_to_global: bool = True) -> str:
        mode = self.store.mode(subject)
        if mode is None and subject is not None:
            if not default_to_global:
                raise errors.SubjectLevelModeNotFound(
                    f"Subject '{subject}' does not have subject-level mode configured")
            mode = self.store.mode(None)
        return mode or DEFAULT_MODE

    def incompatibilities(self, subject: str, schema: Schema,
                          version: str | int | None) -> list[str]:
        """Why ``schema`` may not be registered under ``subject`` (against ``version``, or
        against what the subject's level compares with when None)."""
        from millrace.schema_registry.compatibility import CompatibilityLevel, check

        _, parsed = self.canonical(schema)
        level = CompatibilityLevel(self.level(subject))
        found = self.store.versions(subject) if version is None else \
            [self.get_version(subject, version)]
        return check(level, parsed, [self.parse(v.schema) for v in found],
                     versions=[v.version for v in found])

    # ------------------------------------------------------------------ writes
    @contextmanager
    def _writing(self) -> Iterator[KafkaStoreWriter]:
        """Every write's preamble: this instance is the writer, it holds the writer's lock,
        and its store has read the topic to its end (the checks see every earlier write)."""
        writer = self.writer
        if writer is None:
            raise errors.UnknownLeader("this instance is not the leader")
        with writer.lock:
            self._catch_up()
            yield writer

    def register(self, subject: str, schema: Schema, *, schema_id: int | None = None,
                 version: int | None = None) -> SchemaVersion:
        check_subject(subject)
        with self._writing() as writer:
            mode = self.mode(subject)
            if mode in ("READONLY", "READONLY_OVERRIDE"):
                raise errors.OperationNotPermitted(f"Subject {subject} is in read-only mode")
            importing = mode == "IMPORT"
            if (schema_id is not None or version is not None) and not importing:
                raise errors.OperationNotPermitted(
                    "a schema id or version may be given only in IMPORT mode")
            stored, parsed = self.canonical(schema)
            key = identity(stored)
            every = self.store.versions(subject, deleted=True)
            live = [v for v in every if not v.deleted]
            for v in live:
                if v.key() == key and (schema_id is None or v.id == schema_id):
                    return v
            if not importing:
                from millrace.schema_registry.compatibility import CompatibilityLevel, check

                level = CompatibilityLevel(self.level(subject))
                reasons = check(level, parsed, [self.parse(v.schema) for v in live],
                                versions=[v.version for v in live])
                if reasons:
                    raise errors.IncompatibleSchema(
                        f"Schema being registered is incompatible with an earlier schema for "
                        f"subject \"{subject}\" ({level.value}): " + "; ".join(reasons))
            new_id = self._choose_id(stored, schema_id)
            new_version = version if version is not None else \
                max((v.version for v in every), default=0) + 1
            if new_version < 1 or new_version > MAX_VERSION or \
                    any(v.version == new_version for v in every):
                raise errors.InvalidVersion(f"version {new_version} is taken or out of range")
            created = SchemaVersion(subject, new_version, new_id, stored)
            writer.write([(records.schema_key(subject, new_version),
                          records.schema_value(created))])
            log.info("registered %s version %d as id %d", subject, new_version, new_id)
            return created

    def _choose_id(self, stored: Schema, requested: int | None) -> int:
        existing = self.store.id_of(stored)
        if requested is None:
            return existing if existing is not None else self.store.max_id + 1
        if requested < 1:
            raise errors.InvalidSchema(f"schema id {requested} must be positive")
        other = self.store.schemas_by_id.get(requested)
        if other is not None and identity(other) != identity(stored):
            raise errors.OperationNotPermitted(
                f"Overwrite new schema with id {requested} is not permitted: it holds another "
                "schema")
        return requested

    def delete_version(self, subject: str, version: str | int, *, permanent: bool) -> int:
        with self._writing() as writer:
            self._refuse_if_read_only(subject)
            number = parse_version(version)
            every = self.store.versions(subject, deleted=True)
            if not every:
                raise errors.SubjectNotFound(f"Subject '{subject}' not found.")
            if number == -1:
                pool = every if permanent else [v for v in every if not v.deleted]
                if not pool:
                    raise errors.VersionNotFound("Version latest not found.")
                number = pool[-1].version
            target = next((v for v in every if v.version == number), None)
            if target is None:
                raise errors.VersionNotFound(f"Version {number} not found.")
            if self.store.referenced_by(subject, number):
                raise errors.ReferenceExists(
                    f"One or more references exist to the schema {{subject={subject}, "
                    f"version={number}}}")
            if permanent:
                if not target.deleted:
                    raise errors.VersionNotSoftDeleted(
                        f"Subject '{subject}' Version {number} was not deleted first before "
                        "being permanently deleted")
                writer.write([(records.schema_key(subject, number), None),
                             (records.id_watermark_key(),
                              records.id_watermark_value(self.store.max_id))])
            else:
                if target.deleted:
                    raise errors.VersionSoftDeleted(
                        f"Subject '{subject}' Version {number} was soft deleted. Set "
                        "permanent=true to delete permanently")
                writer.write([(records.schema_key(subject, number),
                              records.schema_value(replace(target, deleted=True)))])
            return number

    def delete_subject(self, subject: str, *, permanent: bool) -> list[int]:
        with self._writing() as writer:
            self._refuse_if_read_only(subject)
            every = self.store.versions(subject, deleted=True)
            if not every:
                raise errors.SubjectNotFound(f"Subject '{subject}' not found.")
            live = [v for v in every if not v.deleted]
            for v in live if not permanent else every:
                if self.store.referenced_by(subject, v.version):
                    raise errors.ReferenceExists(
                        f"One or more references exist to the schema {{subject={subject}, "
                        f"version={v.version}}}")
            if permanent:
                if live:
                    raise errors.SubjectNotSoftDeleted(
                        f"Subject '{subject}' was not deleted first before being permanently "
                        "deleted")
                batch: list[tuple[bytes, bytes | None]] = [
                    (records.schema_key(subject, v.version), None) for v in every]
                batch += [(records.config_key(subject), None), (records.mode_key(subject), None),
                          (records.id_watermark_key(),
                           records.id_watermark_value(self.store.max_id))]
                writer.write(batch)
                return [v.version for v in every]
            if not live:
                raise errors.SubjectSoftDeleted(
                    f"Subject '{subject}' was soft deleted. Set permanent=true to delete "
                    "permanently")
            batch = [(records.schema_key(subject, v.version),
                      records.schema_value(replace(v, deleted=True))) for v in live]
            batch.append((records.delete_subject_key(subject),
                          records.delete_subject_value(subject, every[-1].version)))
            writer.write(batch)
            return [v.version for v in live]

    def _refuse_if_read_only(self, subject: str) -> None:
        if self.mode(subject) == "READONLY":
            raise errors.OperationNotPermitted(f"Subject {subject} is in read-only mode")

    def set_level(self, subject: str | None, level: str) -> str:
        if level not in LEVELS:
            raise errors.InvalidCompatibilityLevel(
                f"Invalid compatibility level. Valid values are {', '.join(LEVELS)}")
        if subject is not None:
            check_subject(subject)
        with self._writing() as writer:
            writer.write([(records.config_key(subject), records.config_value(level))])
        return level

    def delete_level(self, subject: str | None) -> str:
        with self._writing() as writer:
            previous = self.level(subject, default_to_global=subject is None)
            writer.write([(records.config_key(subject), None)])
        return previous

    def set_mode(self, subject: str | None, mode: str, *, force: bool = False) -> str:
        if mode not in MODES:
            raise errors.InvalidMode(f"Invalid mode. Valid values are {', '.join(MODES)}")
        with self._writing() as writer:
            if mode == "IMPORT" and not force:
                has = self.store.versions(subject) if subject else self.store.subject_names()
                if has:
                    raise errors.OperationNotPermitted(
                        "Cannot import since found existing subjects")
            writer.write([(records.mode_key(subject), records.mode_value(mode))])
        return mode

    def delete_mode(self, subject: str) -> str:
        with self._writing() as writer:
            previous = self.mode(subject, default_to_global=False)
            writer.write([(records.mode_key(subject), None)])
        return previous


def parse_version(version: str | int) -> int:
    """``latest``, -1 or a version from 1 to 2^31-1; 42202 otherwise."""
    if isinstance(version, int) and not isinstance(version, bool):
        number = version
    elif isinstance(version, str) and version == "latest":
        return -1
    else:
        try:
            number = int(str(version))
        except ValueError:
            number = 0
    if number == -1:
        return -1
    if not 1 <= number <= MAX_VERSION:
        raise errors.InvalidVersion(
            f"The specified version '{version}' is not a valid version id. Allowed values are "
            "between [1, 2^31-1] and the string \"latest\"")
    return number


def check_subject(subject: str) -> None:
    if not subject or len(subject) > 255 or any(ord(c) < 0x20 for c in subject):
        raise errors.BadRequest(f"invalid subject name {subject[:64]!r}: 1 to 255 printable "
                                "characters")
