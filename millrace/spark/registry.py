"""Registry-encoded keys and values in Spark: the reader schema, decoding and encoding.

The ``format("millrace")`` source with ``valueFormat`` (or ``keyFormat``) ``avro``,
``json-schema`` or ``protobuf`` decodes each record with the schema registry at
``schema.registry.url`` (``registry_client``: millrace's ``SchemaRegistryClient``, one
per process and URL, with its caches):

- The *reader schema* (``ReaderSchema``) is fixed when the query starts: a version of the
  subject (``schema.version``, default the latest; the subject defaults to
  ``<topic>-value`` / ``<topic>-key``).  Its Spark type (``schemas.py``) is the column's
  type; it travels to the executors with the reader.
- Each record's schema id comes from its 5-byte header (``wire_format.split``); the
  *writer schema* is fetched by id once per process (cached) and the record is resolved to
  the reader schema -- Avro: fastavro's ``schemaless_reader(writer, reader)``, so records
  of older and newer versions both decode; JSON: the document is validated against the
  writer schema and its properties are read by the reader schema's names; Protobuf: the
  message at the record's message indexes, read field by field.
- A record written with a version of the subject *newer* than the reader's (unless
  ``schema.version`` pins the reader) is not decoded to the older shape, which would
  drop its new fields without a word: the task fails with ``NewerSchemaError`` (its text
  starts ``newer schema:`` and names subject, version, id and record), so the query
  stops and can be restarted with the new version (``millrace pipeline run`` does it
  when the new version only adds columns).
- A record whose bytes do not decode (too short, magic byte not 0, a schema id the
  registry does not know, a payload that is not a datum of its schema) fails the task as
  ``bad record <topic>-<partition>@<offset>: <reason>`` -- the pipeline's bad-record
  wording -- or, with the source option ``mode=PERMISSIVE``, becomes a row whose key
  and value are null and whose ``decodeError`` holds the reason and the original bytes.

The sink side (``RegistryEncoder``): ``valueFormat=avro`` on ``df.write.format("millrace")``
writes the ``value`` column (any type: a struct is a record) as Avro with the wire header,
under a schema derived from the column's type (``schemas.spark_to_avro``) and registered
under ``<topic>-value`` (or ``subject``) -- or, with ``schema.version``, the registered
version given.
"""

from __future__ import annotations

import base64
import io
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from millrace.client.errors import SerializationError
from millrace.common.errors import ConfigError, MillraceError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import DataType

    from millrace.client.schema_registry.client import SchemaRegistryClient
    from millrace.client.schema_registry.schemas import ParsedSchema, Schema

FORMATS = {"avro": "AVRO", "json-schema": "JSON", "protobuf": "PROTOBUF"}
NEWER_SCHEMA = "newer schema"
# what the pipeline reads back from a failed query's message (NewerSchemaError's text)
NEWER_SCHEMA_TEXT = re.compile(r"newer schema: version (\d+) of subject (\S+) "
                               r"\(schema id (\d+)\) wrote record (\S+); the query reads "
                               r"version (\d+)")

_clients: dict[tuple[str, str | None], SchemaRegistryClient] = {}
_clients_lock = threading.Lock()


class DecodeError(MillraceError):
    """A key or value does not decode (the message says why, not where)."""


class NewerSchemaError(MillraceError):
    """A record was written with a newer version of the subject than the reader's."""

    def __init__(self, subject: str, version: int, schema_id: int, reader_version: int,
                 where: str) -> None:
        self.subject, self.version, self.schema_id = subject, version, schema_id
        super().__init__(
            f"{NEWER_SCHEMA}: version {version} of subject {subject} (schema id {schema_id}) "
            f"wrote record {where}; the query reads version {reader_version}: restart the "
            "query to read the new version's fields (millrace pipeline run does it when the "
            "new version only adds fields)")


def registry_client(url: str, user_info: str | None = None) -> SchemaRegistryClient:
    """The process's client for ``url`` (one per URL and credentials: its caches are
    shared by every task the Python worker runs)."""
    key = (url, user_info)
    client = _clients.get(key)
    if client is None:
        from millrace.client.schema_registry.client import SchemaRegistryClient

        conf = {"url": url}
        if user_info:
            conf["basic.auth.user.info"] = user_info
        with _clients_lock:
            client = _clients.setdefault(key, SchemaRegistryClient(conf))
    return client


@dataclass(frozen=True)
class RegistryFormat:
    """How one column (``key`` or ``value``) is encoded: parsed from the source options."""

    format: str  # avro | json-schema | protobuf
    url: str
    subject: str
    version: int | None = None  # None: the latest when the query starts
    user_info: str | None = field(default=None, repr=False)
    message_name: str | None = None  # Protobuf: the message read or written; None: the first

    @property
    def schema_type(self) -> str:
        return FORMATS[self.format]

    def client(self) -> SchemaRegistryClient:
        return registry_client(self.url, self.user_info)


@dataclass(frozen=True)
class ReaderSchema:
    """The schema a query reads a column with: a registered version and its Spark type."""

    subject: str
    version: int
    schema_id: int
    schema: Schema
    pinned: bool  # schema.version given: records of any version are read with this one


def spark_type(spec: RegistryFormat, schema: Schema) -> tuple[DataType, bool]:
    """The Spark type (and nullability) a registered schema's data becomes."""
    parsed = spec.client().parse(schema)
    return parsed_spark_type(parsed, spec.message_name)


def protobuf_message(parsed: ParsedSchema, name: str | None) -> Any:
    """The message of a Protobuf schema a column holds: ``name`` (a full name, or a
    simple one that only one message of the file has), else the file's first message."""
    from millrace.client.schema_registry.schemas import InvalidSchemaError, ProtobufSchema

    assert isinstance(parsed, ProtobufSchema)
    if name is None:
        return parsed.message([0])
    everything: list[Any] = []
    todo = list(parsed.file.message_types_by_name.values())
    while todo:
        descriptor = todo.pop(0)
        everything.append(descriptor)
        todo.extend(descriptor.nested_types)
    found = [d for d in everything if d.full_name == name] or \
        [d for d in everything if d.name == name]
    if len(found) != 1:
        why = "names several messages" if found else "names no message"
        raise ConfigError(f"messageName {name!r} {why} of {parsed.file.name} (it has "
                          f"{', '.join(d.full_name for d in everything) or 'none'})")
    try:
        return parsed.message(parsed.indexes_of(found[0].full_name))
    except InvalidSchemaError as e:
        raise ConfigError(f"messageName {name!r}: {e}") from None


def parsed_spark_type(parsed: ParsedSchema, message_name: str | None = None
                      ) -> tuple[DataType, bool]:
    from millrace.client.schema_registry.schemas import AvroSchema, JsonSchema, ProtobufSchema
    from millrace.spark.schemas import avro_spark_type, json_schema_spark_type, protobuf_spark_type

    if isinstance(parsed, AvroSchema):
        return avro_spark_type(parsed.parsed, parsed.named)
    if isinstance(parsed, JsonSchema):
        return json_schema_spark_type(parsed.document)
    if isinstance(parsed, ProtobufSchema):
        return protobuf_spark_type(protobuf_message(parsed, message_name)), True
    raise ConfigError(f"schema type {parsed.schema_type} cannot be read into Spark columns")


def resolve_reader(spec: RegistryFormat, wanted: DataType | None = None) -> ReaderSchema:
    """The version to read with: ``spec.version``, else the latest -- or, given the Spark
    type a query was planned with (``wanted``), the newest version of that type (the latest
    may have moved on between planning and reading)."""
    from millrace.client.schema_registry.client import SchemaRegistryError

    client = spec.client()
    try:
        if spec.version is not None:
            found = client.get_version(spec.subject, spec.version)
        else:
            found = client.get_latest_version(spec.subject)
            if wanted is not None and spark_type(spec, found.schema)[0] != wanted:
                for version in sorted(client.get_versions(spec.subject), reverse=True):
                    candidate = client.get_version(spec.subject, version)
                    if spark_type(spec, candidate.schema)[0] == wanted:
                        found = candidate
                        break
    except SchemaRegistryError as e:
        raise ConfigError(f"schema registry {spec.url}, subject {spec.subject}: {e}") from None
    if found.schema.schema_type != spec.schema_type:
        raise ConfigError(f"subject {spec.subject} version {found.version} is a "
                          f"{found.schema.schema_type} schema, not {spec.schema_type} "
                          f"(format {spec.format})")
    return ReaderSchema(spec.subject, found.version, found.id, found.schema,
                        pinned=spec.version is not None)


# ---------------------------------------------------------------------------- decoding
class RegistryDecoder:
    """Bytes of one column -> the Python value Arrow takes for the reader's Spark type.

    Built on the driver (picklable: the spec and the reader schema), used in the
    executors; parses and caches per writer schema id on first use."""

    def __init__(self, spec: RegistryFormat, reader: ReaderSchema) -> None:
        self.spec = spec
        self.reader = reader
        self._state: _DecoderState | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_state": None}

    def _get(self) -> _DecoderState:
        if self._state is None:
            self._state = _DecoderState(self.spec, self.reader)
        return self._state

    def decode(self, data: bytes | None, where: Callable[[], str]) -> Any:
        """The decoded value (None for None) -- an Avro record's top-level dates and
        timestamps as numbers (``arrow_type``/``finish`` make them Arrow's); ``DecodeError``
        for bytes that do not decode, ``NewerSchemaError`` for a newer writer version
        (``where``: the record's coordinates, computed only then)."""
        if data is None:
            return None
        return self._get().decode(data, where)

    def arrow_type(self, target: pa.DataType) -> pa.DataType:
        """The Arrow type ``decode``'s values are collected in for a column of ``target``
        (dates and timestamps of an Avro record as numbers: ``finish`` casts them)."""
        times = self._get().times
        if not times:
            return target
        from millrace.spark.schemas import arrow_time_types

        return arrow_time_types(target, times)

    def finish(self, array: pa.Array, target: pa.DataType) -> pa.Array:
        """An array of ``arrow_type(target)`` as ``target``."""
        times = self._get().times
        if not times:
            return array
        from millrace.spark.schemas import arrow_times

        return arrow_times(array, target, times)


class _DecoderState:
    def __init__(self, spec: RegistryFormat, reader: ReaderSchema) -> None:
        from millrace.client.schema_registry import wire_format
        from millrace.spark.schemas import avro_converter, json_converter

        self._split = wire_format.split  # per record: no import on the way
        self.spec = spec
        self.reader = reader
        self.client = spec.client()
        self.reader_parsed = self.client.parse(reader.schema)
        self.data_type, _ = parsed_spark_type(self.reader_parsed, spec.message_name)
        # writer id -> bytes -> value (after the checks that need the registry)
        self._by_id: dict[int, Callable[[memoryview], Any]] = {}
        # Avro: the record's top-level dates and timestamps, read as numbers (schemas.py)
        self.times: dict[str, str] = {}
        if spec.format == "avro":
            from millrace.client.schema_registry.schemas import AvroSchema
            from millrace.spark.schemas import avro_time_fields

            assert isinstance(self.reader_parsed, AvroSchema)
            self._convert = avro_converter(self.reader_parsed.parsed, self.reader_parsed.named)
            self.times = avro_time_fields(self.reader_parsed.raw)
        elif spec.format == "json-schema":
            self._convert = json_converter(self.data_type)
        else:
            self._convert = None

    def decode(self, data: bytes, where: Callable[[], str]) -> Any:
        try:
            schema_id, payload = self._split(data)
        except SerializationError as e:
            raise DecodeError(str(e)) from None
        read = self._by_id.get(schema_id)
        if read is None:
            read = self._reader_for(schema_id, where)
            self._by_id[schema_id] = read
        try:
            return read(payload)
        except DecodeError:
            raise
        except Exception as e:  # the payload is not a datum of its schema
            raise DecodeError(f"the payload does not decode with schema id {schema_id} "
                              f"(subject {self.reader.subject}): {type(e).__name__}: "
                              f"{str(e)[:200]}") from None

    def _reader_for(self, schema_id: int, where: Callable[[], str]
                    ) -> Callable[[memoryview], Any]:
        from millrace.client.schema_registry.client import SchemaRegistryError

        reader = self.reader
        if schema_id == reader.schema_id:
            return self._read_with(self.reader_parsed, same=True)
        try:
            writer_schema = self.client.get_schema(schema_id)
        except SchemaRegistryError as e:
            if e.error_code == 40403:
                raise DecodeError(f"schema id {schema_id} is not in the schema registry "
                                  f"{self.spec.url}") from None
            raise
        if writer_schema.schema_type != reader.schema.schema_type:
            raise DecodeError(f"schema id {schema_id} is a {writer_schema.schema_type} "
                              f"schema, not {reader.schema.schema_type}")
        if not reader.pinned:
            version = self._version_of(writer_schema)
            if version is not None and version > reader.version:
                raise NewerSchemaError(reader.subject, version, schema_id, reader.version,
                                       where())
        return self._read_with(self.client.parse(writer_schema), same=False)

    def _version_of(self, schema: Schema) -> int | None:
        """The subject's version of ``schema``, or None when the subject does not hold it."""
        from millrace.client.schema_registry.client import SchemaRegistryError

        try:
            return self.client.lookup_schema(self.reader.subject, schema).version
        except SchemaRegistryError as e:
            if e.error_code in (40401, 40403):
                return None
            raise

    def _read_with(self, writer: ParsedSchema, same: bool) -> Callable[[memoryview], Any]:
        fmt = self.spec.format
        if fmt == "avro":
            return self._avro(writer, same)
        if fmt == "json-schema":
            return self._json(writer)
        return self._protobuf(writer)

    def _avro(self, writer: ParsedSchema, same: bool) -> Callable[[memoryview], Any]:
        import fastavro

        from millrace.client.schema_registry.schemas import AvroSchema

        assert isinstance(writer, AvroSchema) and isinstance(self.reader_parsed, AvroSchema)
        if _raw_bytes(writer.raw) and _raw_bytes(self.reader_parsed.raw):
            # Confluent's one exception: a top-level "bytes" value is the bytes as they
            # are, without Avro's length prefix
            return bytes
        # fastavro's form with its write hint: taken as it is, not parsed again per record
        from millrace.client.schema_registry.avro import fastavro_schema
        from millrace.spark.schemas import avro_time_fields, strip_time_fields, time_number

        times = self.times
        writer_times = avro_time_fields(writer.raw)
        numbers: dict[str, str] = {}  # fields read as datetimes and made numbers here
        if times and all(writer_times.get(n, k) == k for n, k in times.items()):
            # the writer stores the same kinds: both read as the numbers they are
            stripped = [n for n in times if n in writer_times]
            writer_schema = _fastavro(strip_time_fields(writer.raw, stripped), writer)
            reader_schema = None if same else _fastavro(
                strip_time_fields(self.reader_parsed.raw, times), self.reader_parsed)
        else:
            writer_schema = fastavro_schema(writer)
            reader_schema = None if same else fastavro_schema(self.reader_parsed)
            numbers = times
        convert = self._convert
        schemaless_reader = fastavro.schemaless_reader

        def read(payload: memoryview) -> Any:
            stream = io.BytesIO(payload)
            datum: Any = schemaless_reader(stream, writer_schema, reader_schema)
            left = len(payload) - stream.tell()
            if left:
                raise DecodeError(f"{left} byte(s) left after the Avro datum: not a datum "
                                  "of its schema")
            for name, kind in numbers.items():
                datum[name] = time_number(datum.get(name), kind)
            return datum if convert is None else convert(datum)

        return read

    def _json(self, writer: ParsedSchema) -> Callable[[memoryview], Any]:
        from millrace.client.schema_registry.schemas import JsonSchema

        assert isinstance(writer, JsonSchema)
        validator = writer.validator
        convert = self._convert
        assert convert is not None

        def read(payload: memoryview) -> Any:
            try:
                doc = json.loads(bytes(payload))
            except ValueError as e:
                raise DecodeError(f"not JSON: {e}") from None
            error = next(iter(validator.iter_errors(doc)), None)
            if error is not None:
                path = "/".join(map(str, error.absolute_path)) or "(the document)"
                raise DecodeError(f"does not validate against its JSON Schema at {path}: "
                                  f"{error.message[:200]}")
            try:
                return convert(doc)
            except ValueError as e:
                raise DecodeError(str(e)) from None

        return read

    def _protobuf(self, writer: ParsedSchema) -> Callable[[memoryview], Any]:
        from google.protobuf import message_factory

        from millrace.client.schema_registry import wire_format
        from millrace.client.schema_registry.schemas import ProtobufSchema
        from millrace.spark.schemas import protobuf_to_python

        assert isinstance(writer, ProtobufSchema) and isinstance(self.reader_parsed,
                                                                 ProtobufSchema)
        reader_message = protobuf_message(self.reader_parsed, self.spec.message_name)
        classes: dict[tuple[int, ...], Any] = {}

        def read(payload: memoryview) -> Any:
            indexes, body = wire_format.decode_message_indexes(payload)
            key = tuple(indexes)
            cls = classes.get(key)
            if cls is None:
                descriptor = writer.message(indexes)
                if descriptor.full_name != reader_message.full_name:
                    raise DecodeError(f"message {descriptor.full_name} is not the reader's "
                                      f"{reader_message.full_name}")
                cls = classes[key] = message_factory.GetMessageClass(descriptor)
            message = cls()
            message.ParseFromString(bytes(body))
            return protobuf_to_python(message, reader_message)

        return read


def _fastavro(raw: Any, parsed: ParsedSchema) -> Any:
    """fastavro's parsed form of ``raw`` (a variant of ``parsed``'s schema) with the named
    types of ``parsed``'s references."""
    import fastavro

    from millrace.client.schema_registry.schemas import AvroSchema

    named: dict[str, Any] = {}
    for dependency in parsed.dependencies.values():
        if isinstance(dependency, AvroSchema):
            named.update(dependency.named)
    return fastavro.parse_schema(raw, named_schemas=named)


def _raw_bytes(schema: Any) -> bool:
    return schema == "bytes" or (isinstance(schema, dict) and schema.get("type") == "bytes"
                                 and "logicalType" not in schema)


# ---------------------------------------------------------------------------- encoding
class RegistryEncoder:
    """Values of one Spark type -> Avro, JSON or Protobuf with the wire header (the sink's
    ``valueFormat``).

    ``prepare()`` runs on the driver: it registers the schema (or looks up the version
    given) and keeps the id; ``encode`` runs in the tasks."""

    def __init__(self, spec: RegistryFormat, data_type: DataType, record_name: str) -> None:
        self.spec = spec
        self.data_type = data_type
        self.record_name = record_name
        self.schema_id: int | None = None
        self.schema_str: str | None = None
        self.schema: Schema | None = None  # as registered: its type and references
        self._write: Callable[[Any], bytes] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_write": None}

    def prepare(self) -> None:
        from millrace.client.schema_registry.client import SchemaRegistryError
        from millrace.client.schema_registry.schemas import Schema
        from millrace.spark.schemas import spark_to_avro, spark_to_json_schema, spark_to_protobuf

        client = self.spec.client()
        try:
            if self.spec.version is not None:
                found = client.get_version(self.spec.subject, self.spec.version)
                if found.schema.schema_type != self.spec.schema_type:
                    raise ConfigError(
                        f"schema registry {self.spec.url}, subject {self.spec.subject} "
                        f"version {self.spec.version} is {found.schema.schema_type}, not "
                        f"{self.spec.schema_type} (valueFormat {self.spec.format})")
                self.schema_id, self.schema_str = found.id, found.schema.schema_str
                self.schema = found.schema
            else:
                if self.spec.format == "avro":
                    schema_str = json.dumps(spark_to_avro(self.data_type, self.record_name))
                elif self.spec.format == "json-schema":
                    schema_str = json.dumps(spark_to_json_schema(self.data_type,
                                                                 self.record_name))
                else:
                    file = spark_to_protobuf(self.data_type, self.record_name)
                    schema_str = base64.standard_b64encode(file.SerializeToString()).decode()
                self.schema = Schema(schema_str, self.spec.schema_type)
                self.schema_id = client.register_schema(self.spec.subject, self.schema)
                self.schema_str = schema_str
        except SchemaRegistryError as e:
            raise ConfigError(f"schema registry {self.spec.url}, subject {self.spec.subject}: "
                              f"{e}") from None

    def encode(self, value: Any) -> bytes | None:
        if value is None:
            return None
        if self._write is None:
            self._write = self._writer()
        return self._write(value)

    def _writer(self) -> Callable[[Any], bytes]:
        from millrace.client.schema_registry import wire_format

        assert self.schema_id is not None and self.schema_str is not None
        if self.spec.format == "json-schema":
            from millrace.spark.schemas import spark_to_json_converter

            prefix = wire_format.header(self.schema_id)
            to_json = spark_to_json_converter(self.data_type)
            dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"),
                                     allow_nan=False).encode
            # a pinned version is someone's schema: each value is checked against it (a
            # derived one describes the column's type, which Spark has checked already)
            check = self._json_check() if self.spec.version is not None else None

            def write_json(value: Any) -> bytes:
                doc = to_json(value) if to_json is not None else value
                if check is not None:
                    check(doc)
                return prefix + dumps(doc).encode()

            return write_json
        if self.spec.format == "protobuf":
            return self._protobuf_writer(wire_format.header(self.schema_id))
        import fastavro

        from millrace.spark.schemas import spark_to_avro_converter

        parsed = fastavro.parse_schema(json.loads(self.schema_str))
        header = wire_format.header(self.schema_id)
        convert = spark_to_avro_converter(self.data_type)
        writer = fastavro.schemaless_writer

        def write(value: Any) -> bytes:
            out = io.BytesIO()
            out.write(header)
            writer(out, parsed, convert(value) if convert is not None else value)
            return out.getvalue()

        return write

    def _json_check(self) -> Callable[[Any], None]:
        """Raises ``ValueError`` naming where a document breaks the registered schema."""
        from millrace.client.schema_registry.schemas import JsonSchema

        assert self.schema is not None
        parsed = self.spec.client().parse(self.schema)
        assert isinstance(parsed, JsonSchema)
        validator = parsed.validator

        def check(doc: Any) -> None:
            error = next(iter(validator.iter_errors(doc)), None)
            if error is not None:
                where = "/".join(map(str, error.absolute_path)) or "the value"
                raise ValueError(f"{where} does not fit subject {self.spec.subject} version "
                                 f"{self.spec.version}: {error.message}")

        return check

    def _protobuf_writer(self, header: bytes) -> Callable[[Any], bytes]:
        """The registered file's message (``messageName``, else the first), filled from
        each value: the header, the message's index path, the message's bytes."""
        from google.protobuf import message_factory

        from millrace.client.schema_registry.schemas import ProtobufSchema
        from millrace.client.schema_registry.wire_format import encode_message_indexes
        from millrace.spark.schemas import protobuf_filler

        assert self.schema is not None
        parsed = self.spec.client().parse(self.schema)  # references fetched, if any
        assert isinstance(parsed, ProtobufSchema)
        descriptor = protobuf_message(parsed, self.spec.message_name)
        make = message_factory.GetMessageClass(descriptor)
        fill = protobuf_filler(descriptor)
        prefix = header + encode_message_indexes(parsed.indexes_of(descriptor.full_name))

        def write_protobuf(value: Any) -> bytes:
            message = make()
            fill(message, value)
            return prefix + message.SerializeToString()

        return write_protobuf


# ---------------------------------------------------------------------------- evolution
def check_widening(spec: RegistryFormat, old: ReaderSchema, new_version: int
                   ) -> tuple[ReaderSchema, list[Any]]:
    """Whether version ``new_version`` of the subject only adds fields to ``old``: the new
    reader schema and the added Spark fields, or ``ConfigError`` naming subject and
    version and what else changed.  Avro also needs a default for every added field
    (old records are read with it)."""
    from millrace.spark.schemas import SchemaMappingError, added_columns

    client = spec.client()
    found = client.get_version(spec.subject, new_version)
    new = ReaderSchema(spec.subject, found.version, found.id, found.schema, pinned=False)
    old_type, _ = spark_type(spec, old.schema)
    new_type, _ = spark_type(spec, new.schema)
    what = (f"subject {spec.subject} version {new_version} is incompatible with version "
            f"{old.version} the query reads")
    from pyspark.sql.types import StructType

    if not isinstance(old_type, StructType) or not isinstance(new_type, StructType):
        if old_type != new_type:
            raise ConfigError(f"{what}: {old_type.simpleString()} became "
                              f"{new_type.simpleString()}")
        return new, []
    try:
        added = added_columns(old_type, new_type)
    except SchemaMappingError as e:
        raise ConfigError(f"{what}: {e}") from None
    if spec.format == "avro":
        raw = json.loads(new.schema.schema_str)
        fields = {f["name"]: f for f in raw.get("fields", [])} if isinstance(raw, dict) else {}
        without = [f.name for f in added if "default" not in fields.get(f.name, {})]
        if without:
            raise ConfigError(f"{what}: added field(s) {', '.join(without)} have no default, "
                              "so the records already written cannot be read with it")
    return new, added
