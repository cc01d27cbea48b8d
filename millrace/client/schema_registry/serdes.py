"""What the schema-registry serializers share: configuration, the registry round trips
of a first record, and the errors.

A serializer (Java ``AbstractKafkaSchemaSerDe``) is configured the Confluent way, either
from the producer's or consumer's configs (``configure(configs, is_key)``, called when the
client resolves ``value.serializer="avro"``) or directly
(``AvroSerializer(client, schema_str, conf={...})``); what the constructor was given wins
over the client's configs.  The names:

- the registry: ``schema.registry.url`` and the other ``schema.registry.<name>`` keys
  (``schema.registry.ssl.ca.location``...), plus ``basic.auth.user.info`` and
  ``basic.auth.credentials.source`` -- passed to ``SchemaRegistryClient`` without the
  prefix; or a ready ``SchemaRegistryClient``;
- ``auto.register.schemas`` (default true: register the schema under the subject on the
  first record; false: look it up, and fail if it is not registered),
  ``use.latest.version`` (default false: write with the subject's latest version, and
  read into it), ``normalize.schemas`` (default false);
- ``subject.name.strategy`` (or ``key.subject.name.strategy`` /
  ``value.subject.name.strategy``): ``TopicNameStrategy`` (default),
  ``RecordNameStrategy``, ``TopicRecordNameStrategy`` or a callable, see ``subject_name``;
- the schema itself: ``key.serializer.schema`` / ``value.serializer.schema`` (the schema
  text), and for a deserializer's reader schema ``key.deserializer.schema`` /
  ``value.deserializer.schema`` (millrace names, next to ``value.serializer.encoding``).

The per-record path is a dict lookup (topic -> the 5-byte header and the encoder, or
schema id -> the decoder) plus the encoding: the registry is asked only for a topic or a
schema id not seen before, and a schema is parsed once.  Every failure is a
``SerializationError`` naming the problem (the topic, the subject, the schema id); the
consumer adds the partition and offset (``RecordDeserializationError``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from millrace.client.errors import SerializationError
from millrace.client.schema_registry.client import SchemaRegistryClient, SchemaRegistryError
from millrace.client.schema_registry.config import (
    DESERIALIZER_CONFIGS,
    SERIALIZER_CONFIGS,
    registry_client_config,
)
from millrace.client.schema_registry.schemas import (
    InvalidSchemaError,
    ParsedSchema,
    Schema,
    parse_schema,
)
from millrace.client.schema_registry.subject_name import SubjectNameStrategy, resolve_strategy
from millrace.client.schema_registry.wire_format import header
from millrace.client.serialization import Deserializer, Serializer
from millrace.common.errors import ConfigError


def _as_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ConfigError(f"Invalid value {value!r} for configuration {name}: expected a boolean")


def as_schema(value: Schema | str | None, schema_type: str) -> Schema | None:
    if value is None or isinstance(value, Schema):
        if value is not None and value.schema_type != schema_type:
            raise ConfigError(f"a {value.schema_type} schema given to a {schema_type} serde")
        return value
    if isinstance(value, str):
        return Schema(value, schema_type)
    raise ConfigError(f"expected a schema (text or Schema), got a {type(value).__name__}")


class _SchemaSerde:
    """Configuration shared by the serializers and deserializers of one schema type."""

    schema_type: ClassVar[str]
    _defaults: ClassVar[dict[str, Any]]
    _own_keys: ClassVar[frozenset[str]] = frozenset()  # a subclass's extra conf keys
    _schema_config: ClassVar[str]  # "serializer" / "deserializer"
    _caches: ClassVar[tuple[str, ...]] = ()  # a subclass's cache dicts, by attribute name

    def __init__(self, client: SchemaRegistryClient | None, schema: Schema | str | None,
                 conf: Mapping[str, Any] | None) -> None:
        self._client = client
        self._schema = as_schema(schema, self.schema_type)
        self._given = dict(conf or {})
        unknown = sorted(k for k in self._given
                         if k not in self._defaults and k not in self._own_keys)
        if unknown:
            raise ConfigError(f"Unknown {type(self).__name__} configuration key(s): "
                              f"{', '.join(unknown)}")
        self._conf: dict[str, Any] = {**self._defaults, **self._given}
        self._is_key = False
        self._lock = threading.Lock()  # serializes first-record registry round trips
        self._apply()
        if self._schema is not None and not self._schema.references:
            try:  # an invalid schema fails here, not at the first record
                parse_schema(self._schema)
            except InvalidSchemaError as e:
                raise ConfigError(f"{type(self).__name__}: {e}") from None

    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:
        """The Kafka client's configs fill in what the constructor was not given."""
        self._is_key = is_key
        side = "key" if is_key else "value"
        for name in (*self._defaults, *self._own_keys):
            if name not in self._given and configs.get(name) is not None:
                self._conf[name] = configs[name]
        strategy = configs.get(f"{side}.subject.name.strategy")
        if "subject.name.strategy" not in self._given and strategy is not None:
            self._conf["subject.name.strategy"] = strategy
        schema = configs.get(f"{side}.{self._schema_config}.schema")
        if self._schema is None and schema is not None:
            self._schema = as_schema(schema, self.schema_type)
        if self._client is None:
            client_conf = registry_client_config(configs)
            if client_conf.get("url"):
                self._client = SchemaRegistryClient(client_conf)
            elif self._needs_registry():
                raise ConfigError(f"{type(self).__name__} needs schema.registry.url")
        self._apply()
        self._forget()

    def _forget(self) -> None:
        """Drop the per-topic and per-id caches (``configure`` may change what they hold)."""
        for name in self._caches:
            getattr(self, name).clear()

    def _needs_registry(self) -> bool:
        return True

    def _apply(self) -> None:
        conf = self._conf
        self._use_latest = _as_bool("use.latest.version", conf["use.latest.version"])
        self._strategy: SubjectNameStrategy = resolve_strategy(conf["subject.name.strategy"])

    @property
    def client(self) -> SchemaRegistryClient:
        if self._client is None:
            raise SerializationError(f"{type(self).__name__} has no schema registry: give it a "
                                     "SchemaRegistryClient or configure schema.registry.url")
        return self._client

    def _subject(self, topic: str, record_name: str | None) -> str:
        return self._strategy(topic, self._is_key, record_name)

    def _registry_error(self, what: str, e: Exception) -> SerializationError:
        where = f" at {','.join(self._client.urls)}" if self._client is not None else ""
        return SerializationError(f"{type(self).__name__}: {what}: schema registry{where}: {e}")

    def _latest(self, topic: str, record_name: str | None) -> tuple[int, ParsedSchema]:
        subject = self._subject(topic, record_name)
        try:
            registered = self.client.get_latest_version(subject)
            parsed = self.client.parse(registered.schema)
        except (SchemaRegistryError, InvalidSchemaError) as e:
            raise self._registry_error(f"latest version of subject {subject!r}", e) from e
        self._check_type(parsed, f"subject {subject!r}")
        return registered.id, parsed

    def _check_type(self, parsed: ParsedSchema, what: str) -> None:
        if parsed.schema_type != self.schema_type:
            raise SerializationError(f"{type(self).__name__}: {what} is a {parsed.schema_type} "
                                     f"schema, not {self.schema_type}")

    def close(self) -> None:
        pass


class SchemaRegistrySerializer(_SchemaSerde, Serializer[Any]):
    """The part of every schema-registry serializer that finds the schema id."""

    _defaults = SERIALIZER_CONFIGS
    _schema_config = "serializer"

    def _apply(self) -> None:
        super()._apply()
        conf = self._conf
        self._auto_register = _as_bool("auto.register.schemas", conf["auto.register.schemas"])
        self._normalize = _as_bool("normalize.schemas", conf["normalize.schemas"])

    def _writer_schema(self, topic: str, schema: Schema | None = None,
                       record_name: str | None = None) -> tuple[int, ParsedSchema]:
        """(schema id, parsed schema) a topic's records are written with: the subject's
        latest version (``use.latest.version``), or ``schema`` (default: the configured
        one) registered or looked up under the subject."""
        schema = schema if schema is not None else self._schema
        if self._use_latest:
            if record_name is None and schema is not None:
                try:
                    record_name = self.client.parse(schema).name()
                except InvalidSchemaError as e:
                    raise self._registry_error("the schema", e) from e
            return self._latest(topic, record_name)
        if schema is None:
            raise SerializationError(
                f"{type(self).__name__} has no schema to write topic {topic!r} with: give "
                f"it one, set {'key' if self._is_key else 'value'}.serializer.schema, or "
                "use.latest.version=true")
        client = self.client
        try:
            parsed = client.parse(schema)
            subject = self._subject(topic, record_name or parsed.name())
        except InvalidSchemaError as e:
            raise self._registry_error("the schema", e) from e
        try:
            if self._auto_register:
                schema_id = client.register_schema(subject, schema, self._normalize)
            else:
                schema_id = client.lookup_schema(subject, schema, self._normalize).id
        except SchemaRegistryError as e:
            verb = "registering" if self._auto_register else "looking up"
            raise self._registry_error(f"{verb} the schema under subject {subject!r}",
                                       e) from e
        return schema_id, parsed

    @staticmethod
    def _header(schema_id: int) -> bytes:
        return header(schema_id)


class SchemaRegistryDeserializer(_SchemaSerde, Deserializer[Any]):
    """The part of every schema-registry deserializer that finds the writer's schema."""

    _defaults = DESERIALIZER_CONFIGS
    _schema_config = "deserializer"

    def _writer(self, topic: str, schema_id: int) -> ParsedSchema:
        try:
            parsed = self.client.parse(self.client.get_schema(schema_id))
        except SchemaRegistryError as e:
            if e.error_code == SchemaRegistryError.SCHEMA_NOT_FOUND:
                raise SerializationError(
                    f"{type(self).__name__}: topic {topic!r}: schema id {schema_id} is not "
                    f"known to the schema registry at {','.join(self.client.urls)}") from e
            raise self._registry_error(f"topic {topic!r}: fetching schema id {schema_id}",
                                       e) from e
        except InvalidSchemaError as e:
            raise self._registry_error(f"topic {topic!r}: schema id {schema_id}", e) from e
        self._check_type(parsed, f"topic {topic!r}: schema id {schema_id}")
        return parsed


Converter = Callable[[Any], Any]
