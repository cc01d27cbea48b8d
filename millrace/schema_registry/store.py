"""``SchemaStore``: the registry's state, a fold of the ``_schemas`` topic's records.

The records are Confluent's, so a topic written by either registry reads in the other.
Keys and values are JSON; a key's bytes are always written the same way (compaction keeps
the last value per key)::

    {"keytype":"SCHEMA","subject":"orders-value","version":1,"magic":1}
        -> {"subject":..,"version":1,"id":7,"schema":"..","schemaType":"JSON"?,
            "references":[..]?,"deleted":false}      (null: the version permanently deleted)
    {"keytype":"CONFIG","subject":null|"s","magic":0} -> {"compatibilityLevel":"BACKWARD"}|null
    {"keytype":"MODE","subject":null|"s","magic":0}   -> {"mode":"READWRITE"}|null
    {"keytype":"DELETE_SUBJECT","subject":"s","magic":0} -> {"subject":"s","version":N}
    {"keytype":"NOOP","magic":0}                     -> null

and one of millrace's own, which a Confluent reader skips as an unknown key type:
``{"keytype":"ID_WATERMARK","magic":0} -> {"id": N}``, written when a permanent delete
tombstones the highest id, so that after compaction drops the tombstone the next id is
still above every id ever handed out (ids never repeat).

A stored schema's text is its canonical form (``ParsedSchema.canonical``), so identity is
text equality: ``(schemaType, text, references)`` names one id across all subjects.

Thread ownership: ``apply`` runs on the reader thread, lookups on the HTTP handlers'
threads; ``lock`` guards everything and ``changed`` is notified after each record.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass
from typing import Any

from millrace.client.schema_registry.schemas import AVRO, Schema, SchemaReference

log = logging.getLogger(__name__)

SCHEMA, CONFIG, MODE, DELETE_SUBJECT, NOOP, ID_WATERMARK = (
    "SCHEMA", "CONFIG", "MODE", "DELETE_SUBJECT", "NOOP", "ID_WATERMARK")

SchemaKey = tuple[str, str, tuple[SchemaReference, ...]]  # (type, canonical text, references)


@dataclass
class SchemaVersion:
    subject: str
    version: int
    id: int
    schema: Schema
    deleted: bool = False

    def key(self) -> SchemaKey:
        return identity(self.schema)

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"subject": self.subject, "version": self.version,
                                "id": self.id, **self.schema.to_json()}
        return body


def identity(schema: Schema) -> SchemaKey:
    return (schema.schema_type, schema.schema_str, schema.references)


# ---------------------------------------------------------------------- record codec
def _dump(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def schema_key(subject: str, version: int) -> bytes:
    return _dump({"keytype": SCHEMA, "subject": subject, "version": version, "magic": 1})


def schema_value(v: SchemaVersion) -> bytes:
    body: dict[str, Any] = {"subject": v.subject, "version": v.version, "id": v.id,
                            "schema": v.schema.schema_str}
    if v.schema.schema_type != AVRO:
        body["schemaType"] = v.schema.schema_type
    if v.schema.references:
        body["references"] = [r.to_json() for r in v.schema.references]
    body["deleted"] = v.deleted
    return _dump(body)


def config_key(subject: str | None) -> bytes:
    return _dump({"keytype": CONFIG, "subject": subject, "magic": 0})


def config_value(level: str) -> bytes:
    return _dump({"compatibilityLevel": level})


def mode_key(subject: str | None) -> bytes:
    return _dump({"keytype": MODE, "subject": subject, "magic": 0})


def mode_value(mode: str) -> bytes:
    return _dump({"mode": mode})


def delete_subject_key(subject: str) -> bytes:
    return _dump({"keytype": DELETE_SUBJECT, "subject": subject, "magic": 0})


def delete_subject_value(subject: str, version: int) -> bytes:
    return _dump({"subject": subject, "version": version})


def id_watermark_key() -> bytes:
    return _dump({"keytype": ID_WATERMARK, "magic": 0})


def id_watermark_value(schema_id: int) -> bytes:
    return _dump({"id": schema_id})


NOOP_KEY = _dump({"keytype": NOOP, "magic": 0})


class SchemaStore:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.subjects: dict[str, dict[int, SchemaVersion]] = {}
        self.schemas_by_id: dict[int, Schema] = {}
        self.ids: dict[SchemaKey, int] = {}
        self.max_id = 0
        self.configs: dict[str | None, str] = {}
        self.modes: dict[str | None, str] = {}
        self.applied_offset = -1  # the last record applied
        # the reader's position: every offset below it has been read (records applied,
        # transaction markers and aborted records passed over)
        self.position = 0
        self.skipped = 0  # records that did not parse (logged, never fatal)

    # ------------------------------------------------------------------ applying records
    def apply(self, offset: int, key: bytes | None, value: bytes | None) -> None:
        with self.changed:
            try:
                self._apply(key, value)
            except (ValueError, TypeError, KeyError, AttributeError) as e:
                self.skipped += 1
                log.warning("_schemas offset %d: skipped a record that does not parse: %s: %s",
                            offset, type(e).__name__, e)
            self.applied_offset = max(self.applied_offset, offset)
            self.position = max(self.position, offset + 1)
            self.changed.notify_all()

    def _apply(self, key: bytes | None, value: bytes | None) -> None:
        if key is None:
            raise ValueError("a record without a key")
        k = json.loads(key)
        keytype = k["keytype"]
        body = json.loads(value) if value is not None else None
        if keytype == SCHEMA:
            subject, version = str(k["subject"]), int(k["version"])
            versions = self.subjects.setdefault(subject, {})
            if body is None:
                versions.pop(version, None)
                if not versions:
                    del self.subjects[subject]
                return
            schema = Schema.from_json(body)
            sv = SchemaVersion(subject, version, int(body["id"]), schema,
                               bool(body.get("deleted", False)))
            versions[version] = sv
            self.schemas_by_id.setdefault(sv.id, schema)
            self.ids.setdefault(sv.key(), sv.id)
            self.max_id = max(self.max_id, sv.id)
        elif keytype == CONFIG:
            subject = k.get("subject")
            if body is None:
                self.configs.pop(subject, None)
            else:
                self.configs[subject] = str(body["compatibilityLevel"])
        elif keytype == MODE:
            subject = k.get("subject")
            if body is None:
                self.modes.pop(subject, None)
            else:
                self.modes[subject] = str(body["mode"])
        elif keytype == DELETE_SUBJECT and body is not None:
            upto = int(body["version"])
            for sv in self.subjects.get(str(k["subject"]), {}).values():
                if sv.version <= upto:
                    sv.deleted = True
        elif keytype == ID_WATERMARK and body is not None:
            self.max_id = max(self.max_id, int(body["id"]))
        # NOOP and key types this registry does not know (a newer Confluent's): nothing

    def advance(self, position: int) -> None:
        """The reader has read everything before ``position``."""
        with self.changed:
            if position > self.position:
                self.position = position
                self.changed.notify_all()

    def wait_for(self, position: int, timeout_s: float) -> bool:
        """Until everything before ``position`` has been read (True) or the timeout."""
        with self.changed:
            return self.changed.wait_for(lambda: self.position >= position, timeout_s)

    # ------------------------------------------------------------------ reading
    def versions(self, subject: str, *, deleted: bool = False) -> list[SchemaVersion]:
        with self.lock:
            return sorted((v for v in self.subjects.get(subject, {}).values()
                           if deleted or not v.deleted), key=lambda v: v.version)

    def subject_names(self, *, deleted: bool = False) -> list[str]:
        with self.lock:
            return sorted(s for s, versions in self.subjects.items()
                          if any(deleted or not v.deleted for v in versions.values()))

    def schema_by_id(self, schema_id: int) -> Schema | None:
        with self.lock:
            if not any(v.id == schema_id for vs in self.subjects.values() for v in vs.values()):
                return None  # every version holding it was permanently deleted
            return self.schemas_by_id.get(schema_id)

    def usages(self, schema_id: int, *, deleted: bool = False) -> list[SchemaVersion]:
        with self.lock:
            return sorted((v for vs in self.subjects.values() for v in vs.values()
                           if v.id == schema_id and (deleted or not v.deleted)),
                          key=lambda v: (v.subject, v.version))

    def referenced_by(self, subject: str, version: int) -> list[int]:
        with self.lock:
            return sorted({v.id for vs in self.subjects.values() for v in vs.values()
                           if not v.deleted and any(r.subject == subject and r.version == version
                                                    for r in v.schema.references)})

    def id_of(self, schema: Schema) -> int | None:
        with self.lock:
            return self.ids.get(identity(schema))

    def compatibility(self, subject: str | None) -> str | None:
        with self.lock:
            return self.configs.get(subject)

    def mode(self, subject: str | None) -> str | None:
        with self.lock:
            return self.modes.get(subject)
