"""Schemas as a schema registry holds them: the value types of its REST API and their parsing.

``Schema`` is what travels: the schema text, its type (``AVRO`` -- the default, omitted on
the wire --, ``JSON`` or ``PROTOBUF``) and its references (``SchemaReference``: the name the
text uses for another subject's version).  ``parse_schema`` turns one into a
``ParsedSchema`` with the references resolved, or raises ``InvalidSchemaError`` naming the
problem (the registry answers 42201 with that message).

- ``AvroSchema``: parsed by ``fastavro``; ``parsed`` is fastavro's form, with the named
  types of the references loaded first, so a record may use a type another subject defines.
- ``JsonSchema``: a JSON Schema document, checked against its own metaschema by
  ``jsonschema``; references are resources of a ``referencing`` registry under their names,
  so ``{"$ref": "address.json"}`` resolves to the referenced subject's version.
- ``ProtobufSchema``: a FileDescriptorProto, given either as base64 of its serialized bytes
  (what Confluent's serializers send) or as ``.proto`` text when ``grpcio-tools`` (protoc)
  is installed; references are the files it imports, by import path.

``canonical()`` is the text used for identity: two registrations with the same canonical
text get the same id.  For Avro and JSON it is the JSON with keys sorted and no spaces (key
order and white space do not make a new schema; a changed default or doc does); for
Protobuf, base64 of the descriptor serialized deterministically.

No I/O: resolving a reference is the caller's ``resolve`` callable.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

AVRO = "AVRO"
JSON = "JSON"
PROTOBUF = "PROTOBUF"
SCHEMA_TYPES = (AVRO, JSON, PROTOBUF)
MAX_REFERENCE_DEPTH = 32


class InvalidSchemaError(ValueError):
    """The schema text does not parse, or a reference does not resolve."""


@dataclass(frozen=True)
class SchemaReference:
    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}

    @classmethod
    def from_json(cls, body: Any) -> SchemaReference:
        if not isinstance(body, Mapping):
            raise InvalidSchemaError(f"a reference must be an object, got {body!r}")
        name, subject, version = body.get("name"), body.get("subject"), body.get("version")
        if not isinstance(name, str) or not name or not isinstance(subject, str) or not subject:
            raise InvalidSchemaError(f"a reference needs a name and a subject: {dict(body)}")
        if isinstance(version, bool) or not isinstance(version, int):
            raise InvalidSchemaError(f"reference {name!r}: version must be an integer")
        return cls(name, subject, version)


@dataclass(frozen=True)
class Schema:
    schema_str: str
    schema_type: str = AVRO
    references: tuple[SchemaReference, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"schema": self.schema_str}
        if self.schema_type != AVRO:
            body["schemaType"] = self.schema_type
        if self.references:
            body["references"] = [r.to_json() for r in self.references]
        return body

    @classmethod
    def from_json(cls, body: Any) -> Schema:
        """A request body or a stored record: ``{"schema", "schemaType"?, "references"?}``."""
        if not isinstance(body, Mapping):
            raise InvalidSchemaError("expected a JSON object with a \"schema\" field")
        text = body.get("schema")
        if not isinstance(text, str) or not text.strip():
            raise InvalidSchemaError("\"schema\" must be a non-empty string")
        schema_type = body.get("schemaType") or AVRO
        if schema_type not in SCHEMA_TYPES:
            raise InvalidSchemaError(f"unknown schemaType {schema_type!r}: expected one of "
                                     f"{', '.join(SCHEMA_TYPES)}")
        refs = body.get("references") or ()
        if not isinstance(refs, Sequence) or isinstance(refs, str):
            raise InvalidSchemaError("\"references\" must be a list")
        return cls(text, schema_type, tuple(SchemaReference.from_json(r) for r in refs))


Resolve = Callable[[SchemaReference], Schema]


class ParsedSchema:
    schema_type: str = ""

    def __init__(self, schema: Schema, dependencies: Mapping[str, ParsedSchema]) -> None:
        self.schema = schema
        self.dependencies = dict(dependencies)  # reference name -> its parsed schema

    @property
    def references(self) -> tuple[SchemaReference, ...]:
        return self.schema.references

    def canonical(self) -> str:
        raise NotImplementedError

    def name(self) -> str | None:
        """The record's full name (RecordNameStrategy), None when the schema has none."""
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, ParsedSchema) and other.schema_type == self.schema_type
                and other.canonical() == self.canonical()
                and other.references == self.references)

    def __hash__(self) -> int:
        return hash((self.schema_type, self.canonical(), self.references))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.canonical()[:80]!r})"


def _compact_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _load_json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as e:
        raise InvalidSchemaError(f"{what} schema is not valid JSON: {e}") from None


class AvroSchema(ParsedSchema):
    schema_type = AVRO

    def __init__(self, schema: Schema, dependencies: Mapping[str, ParsedSchema]) -> None:
        super().__init__(schema, dependencies)
        import fastavro

        self.raw = _load_json(schema.schema_str, "Avro")
        _check_avro_shape(self.raw, "")
        # the references' named types first: this schema may use them by name
        self.named: dict[str, Any] = {}
        for dep in self.dependencies.values():
            if not isinstance(dep, AvroSchema):
                raise InvalidSchemaError("an Avro schema can reference Avro schemas only")
            self.named.update(dep.named)
        try:
            self.parsed = fastavro.parse_schema(self.raw, named_schemas=self.named,
                                                _write_hint=False)
        except Exception as e:  # SchemaParseException, UnknownType, KeyError, TypeError...
            raise InvalidSchemaError(f"invalid Avro schema: {type(e).__name__}: {e}") from None
        self._canonical = _compact_json(self.raw)

    def canonical(self) -> str:
        return self._canonical

    def name(self) -> str | None:
        raw = self.raw
        if isinstance(raw, Mapping) and raw.get("type") in ("record", "error", "enum", "fixed"):
            name = str(raw.get("name", ""))
            namespace = raw.get("namespace")
            return name if "." in name or not namespace else f"{namespace}.{name}"
        return None


_AVRO_REQUIRED = {"record": ("fields", list), "error": ("fields", list),
                  "enum": ("symbols", list), "fixed": ("size", int)}


def _check_avro_shape(node: Any, path: str) -> None:
    """What the Avro specification requires and fastavro lets pass: a record's fields, an
    enum's symbols, a fixed's size."""
    if isinstance(node, list):
        for i, branch in enumerate(node):
            _check_avro_shape(branch, f"{path}/{i}")
    elif isinstance(node, Mapping):
        kind = node.get("type")
        required = _AVRO_REQUIRED.get(kind) if isinstance(kind, str) else None
        if required is not None:
            key, kind_of = required
            if not isinstance(node.get(key), kind_of) or isinstance(node.get(key), bool):
                raise InvalidSchemaError(f"invalid Avro schema: {path or '/'}: a {kind} needs "
                                         f"\"{key}\" ({kind_of.__name__})")
        for i, f in enumerate(node.get("fields") or ()):
            if isinstance(f, Mapping):
                _check_avro_shape(f.get("type"), f"{path}/fields/{i}")
        for key in ("items", "values"):
            if key in node:
                _check_avro_shape(node[key], f"{path}/{key}")
        if isinstance(kind, (Mapping, list)):
            _check_avro_shape(kind, f"{path}/type")


class JsonSchema(ParsedSchema):
    schema_type = JSON

    def __init__(self, schema: Schema, dependencies: Mapping[str, ParsedSchema]) -> None:
        super().__init__(schema, dependencies)
        import jsonschema
        import jsonschema.exceptions
        import referencing
        import referencing.jsonschema

        self.document = _load_json(schema.schema_str, "JSON")
        if not isinstance(self.document, (Mapping, bool)):
            raise InvalidSchemaError("a JSON Schema must be an object or a boolean")
        cls = jsonschema.validators.validator_for(self.document, default=jsonschema.Draft7Validator)
        try:
            cls.check_schema(self.document)
        except jsonschema.exceptions.SchemaError as e:
            raise InvalidSchemaError(f"invalid JSON Schema: {e.message}") from None
        resources: list[tuple[str, Any]] = []
        for ref_name, dep in self.dependencies.items():
            if not isinstance(dep, JsonSchema):
                raise InvalidSchemaError("a JSON Schema can reference JSON Schemas only")
            spec = referencing.jsonschema.specification_with(
                dep.document.get("$schema", "") if isinstance(dep.document, Mapping) else "",
                default=referencing.jsonschema.DRAFT7)
            resources.append((ref_name, spec.create_resource(dep.document)))
            resources.extend(dep.resources)
        self.resources: list[tuple[str, Any]] = resources
        registry: referencing.Registry[Any] = referencing.Registry().with_resources(resources)
        self.validator = cls(self.document, registry=registry)
        self._canonical = _compact_json(self.document)

    def canonical(self) -> str:
        return self._canonical

    def name(self) -> str | None:
        title = self.document.get("title") if isinstance(self.document, Mapping) else None
        return title if isinstance(title, str) and title else None


class ProtobufSchema(ParsedSchema):
    schema_type = PROTOBUF

    def __init__(self, schema: Schema, dependencies: Mapping[str, ParsedSchema]) -> None:
        super().__init__(schema, dependencies)
        from google.protobuf import descriptor_pool

        self.descriptor_proto = _file_descriptor_proto(schema.schema_str)
        self.pool = descriptor_pool.DescriptorPool()
        added: set[str] = set()
        for dep in self.dependencies.values():
            if not isinstance(dep, ProtobufSchema):
                raise InvalidSchemaError("a Protobuf schema can reference Protobuf schemas only")
            for fdp in dep.files():
                if fdp.name not in added:
                    self.pool.Add(fdp)
                    added.add(fdp.name)
        for dependency in self.descriptor_proto.dependency:
            if dependency not in added and dependency.startswith("google/protobuf/"):
                wkt = _well_known(dependency)
                if wkt is None:
                    raise InvalidSchemaError(f"unknown import {dependency!r}")
                self.pool.Add(wkt)
                added.add(dependency)
        missing = [d for d in self.descriptor_proto.dependency if d not in added]
        if missing:
            raise InvalidSchemaError(f"imports without a reference: {', '.join(missing)}")
        try:
            self.pool.Add(self.descriptor_proto)
            self.file = self.pool.FindFileByName(self.descriptor_proto.name)
        except Exception as e:  # TypeError / KeyError from the pool: bad or conflicting types
            raise InvalidSchemaError(f"invalid Protobuf schema: {e}") from None
        self._dependency_files = [fdp for dep in self.dependencies.values()
                                  if isinstance(dep, ProtobufSchema) for fdp in dep.files()]
        self._canonical = base64.b64encode(
            self.descriptor_proto.SerializeToString(deterministic=True)).decode("ascii")

    def files(self) -> list[Any]:
        """This file and every file it imports through references, imports first."""
        return [*self._dependency_files, self.descriptor_proto]

    def canonical(self) -> str:
        return self._canonical

    def name(self) -> str | None:
        messages = self.file.message_types_by_name
        if not messages:
            return None
        return str(next(iter(messages.values())).full_name)

    def message(self, indexes: Sequence[int]) -> Any:
        """The message descriptor at a message-index path ([0]: the first top-level one)."""
        if not indexes:
            indexes = [0]
        try:
            descriptor = self.file.message_types_by_name[
                self.descriptor_proto.message_type[indexes[0]].name]
            for i in indexes[1:]:
                descriptor = descriptor.nested_types[i]
        except (IndexError, KeyError):
            raise InvalidSchemaError(f"no message at index path {list(indexes)}") from None
        return descriptor

    def indexes_of(self, full_name: str) -> list[int]:
        """The message-index path of a message by its full name."""
        def walk(descriptors: Sequence[Any], path: list[int]) -> list[int] | None:
            for i, d in enumerate(descriptors):
                if d.full_name == full_name:
                    return [*path, i]
                found = walk(d.nested_types, [*path, i])
                if found is not None:
                    return found
            return None

        found = walk(list(self.file.message_types_by_name.values()), [])
        if found is None:
            raise InvalidSchemaError(f"no message {full_name!r} in {self.file.name}")
        return found


def _file_descriptor_proto(text: str) -> Any:
    from google.protobuf import descriptor_pb2
    from google.protobuf.message import DecodeError

    fdp = descriptor_pb2.FileDescriptorProto()
    stripped = text.strip()
    try:
        raw = base64.b64decode(stripped, validate=True)
        fdp.ParseFromString(raw)
        if fdp.name or fdp.message_type or fdp.enum_type:
            return fdp
    except (binascii.Error, DecodeError):
        pass
    return _compile_proto_text(text)


def _compile_proto_text(text: str) -> Any:
    """``.proto`` text to a FileDescriptorProto with protoc from grpcio-tools, run as a child
    process so that its error message (on stderr) can be quoted."""
    import importlib.util
    import os
    import subprocess
    import sys
    import tempfile

    from google.protobuf import descriptor_pb2

    if importlib.util.find_spec("grpc_tools") is None:
        raise InvalidSchemaError(
            "PROTOBUF schemas are accepted as base64 of a serialized FileDescriptorProto "
            "(what Confluent's serializers send); .proto text needs grpcio-tools installed "
            "(pip install 'millrace[proto-text]')")
    with tempfile.TemporaryDirectory(prefix="millrace-proto-") as tmp:
        source = os.path.join(tmp, "schema.proto")
        out = os.path.join(tmp, "out.pb")
        with open(source, "w", encoding="utf-8") as f:
            f.write(text)
        result = subprocess.run(
            [sys.executable, "-m", "grpc_tools.protoc", f"-I{tmp}",
             f"--descriptor_set_out={out}", "schema.proto"],
            capture_output=True, text=True, timeout=60, check=False)
        if result.returncode != 0 or not os.path.exists(out):
            why = result.stderr.strip().replace(tmp + os.sep, "").splitlines()
            raise InvalidSchemaError("invalid Protobuf schema: " + ("; ".join(why[:3]) or
                                                                     "protoc failed"))
        with open(out, "rb") as f:
            files = descriptor_pb2.FileDescriptorSet.FromString(f.read())
    return files.file[0]


def _well_known(path: str) -> Any:
    from google.protobuf import (
        any_pb2,
        api_pb2,
        descriptor_pb2,
        duration_pb2,
        empty_pb2,
        field_mask_pb2,
        source_context_pb2,
        struct_pb2,
        timestamp_pb2,
        type_pb2,
        wrappers_pb2,
    )

    for module in (any_pb2, api_pb2, descriptor_pb2, duration_pb2, empty_pb2, field_mask_pb2,
                   source_context_pb2, struct_pb2, timestamp_pb2, type_pb2, wrappers_pb2):
        if module.DESCRIPTOR.name == path:
            fdp = descriptor_pb2.FileDescriptorProto()
            module.DESCRIPTOR.CopyToProto(fdp)
            return fdp
    return None


_TYPES: dict[str, type[ParsedSchema]] = {AVRO: AvroSchema, JSON: JsonSchema,
                                         PROTOBUF: ProtobufSchema}


def parse_schema(schema: Schema, resolve: Resolve | None = None,
                 _depth: int = 0) -> ParsedSchema:
    """Parse ``schema`` with its references resolved through ``resolve`` (recursively)."""
    if _depth > MAX_REFERENCE_DEPTH:
        raise InvalidSchemaError(f"references nested deeper than {MAX_REFERENCE_DEPTH}")
    cls = _TYPES.get(schema.schema_type)
    if cls is None:
        raise InvalidSchemaError(f"unknown schemaType {schema.schema_type!r}")
    dependencies: dict[str, ParsedSchema] = {}
    for ref in schema.references:
        if resolve is None:
            raise InvalidSchemaError(f"reference {ref.name!r} cannot be resolved here")
        dependencies[ref.name] = parse_schema(resolve(ref), resolve, _depth + 1)
    return cls(schema, dependencies)
