"""Protobuf compatibility: can a message written with one schema be parsed with another?

On the wire a field is its number and wire type; names are not sent.  So the rules follow
the Protocol Buffers language guide ("Updating a message type") and the subset of
Confluent's Protobuf rules that follows from it:

- the package must not change, and every message of the writer's file (nested ones
  included, by name relative to the package) must still exist in the reader's: a message
  removed or renamed is incompatible;
- fields are matched by number; a field added or removed is compatible (unknown fields are
  skipped, missing ones read as defaults), renaming a field is compatible;
- a field number both have must keep a compatible type: the same kind (scalar, enum,
  message, group), the same message or enum type by name, and for scalars a compatible
  encoding: {int32, uint32, int64, uint64, bool}, {sint32, sint64}, {fixed32, sfixed32},
  {fixed64, sfixed64}, {string, bytes}, float, double;
- singular <-> repeated is compatible for string, bytes and message fields only (numeric
  repeated fields are packed);
- a proto2 ``required`` field the reader requires must be one the writer always writes;
- oneofs (not proto3's synthetic ones for ``optional``): a field of a writer's oneof must
  stay in one reader oneof together with the rest of that oneof's fields (a oneof field
  removed, moved out, or split off is incompatible), and several existing fields moved
  into one oneof is incompatible (data with both set loses one); a new field added to a
  oneof is compatible.

Not covered: enum value changes (proto3 enums are open; proto2 readers keep unknown values
as unknown fields), ``syntax`` changes, extensions, services, field options.

Paths in the messages: ``/Order.amount (3)`` -- message name relative to the package,
field name in the reader (the writer's when the reader has none) and field number.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from google.protobuf import descriptor_pb2

from millrace.client.schema_registry.schemas import ProtobufSchema

F = descriptor_pb2.FieldDescriptorProto
SCALAR_GROUPS = [
    {F.TYPE_INT32, F.TYPE_UINT32, F.TYPE_INT64, F.TYPE_UINT64, F.TYPE_BOOL},
    {F.TYPE_SINT32, F.TYPE_SINT64},
    {F.TYPE_FIXED32, F.TYPE_SFIXED32},
    {F.TYPE_FIXED64, F.TYPE_SFIXED64},
    {F.TYPE_STRING, F.TYPE_BYTES},
    {F.TYPE_FLOAT},
    {F.TYPE_DOUBLE},
]
LABEL_CHANGE_OK = {F.TYPE_STRING, F.TYPE_BYTES, F.TYPE_MESSAGE}


def protobuf_incompatibilities(reader: ProtobufSchema, writer: ProtobufSchema) -> list[str]:
    r_file, w_file = _resolved(reader), _resolved(writer)
    problems: list[str] = []
    if r_file.package != w_file.package:
        problems.append(f"/: package changed from {w_file.package!r} to {r_file.package!r}")
    r_messages = dict(_messages(r_file))
    for name, w_message in _messages(w_file):
        r_message = r_messages.get(name)
        if r_message is None:
            problems.append(f"/{name}: message removed or renamed (the reader has no message "
                            f"of that name)")
            continue
        problems += _message(name, r_message, w_message, r_file.package, w_file.package)
    return problems


def _resolved(schema: ProtobufSchema) -> Any:
    """The file with every type name resolved to its full name (``.pkg.Msg``)."""
    fdp = descriptor_pb2.FileDescriptorProto()
    schema.file.CopyToProto(fdp)
    return fdp


def _messages(fdp: Any) -> Iterator[tuple[str, Any]]:
    def walk(messages: Any, prefix: str) -> Iterator[tuple[str, Any]]:
        for message in messages:
            name = f"{prefix}{message.name}"
            yield name, message
            yield from walk(message.nested_type, f"{name}.")

    return walk(fdp.message_type, "")


def _type_name(field: Any, package: str) -> str:
    """A message or enum type's name, relative to the file's package when it is in it."""
    name = str(field.type_name).lstrip(".")
    return name[len(package) + 1:] if package and name.startswith(f"{package}.") else name


def _kind(field: Any) -> str:
    if field.type == F.TYPE_MESSAGE:
        return "message"
    if field.type == F.TYPE_GROUP:
        return "group"
    if field.type == F.TYPE_ENUM:
        return "enum"
    return "scalar"


def _describe(field: Any, package: str) -> str:
    if field.type in (F.TYPE_MESSAGE, F.TYPE_GROUP, F.TYPE_ENUM):
        return f"{_kind(field)} {_type_name(field, package)}"
    return str(F.Type.Name(field.type)).removeprefix("TYPE_").lower()


def _oneofs(message: Any) -> dict[int, str]:
    """Field number -> the name of its (real, not synthetic) oneof."""
    return {f.number: message.oneof_decl[f.oneof_index].name for f in message.field
            if f.HasField("oneof_index") and not f.proto3_optional}


def _message(name: str, r: Any, w: Any, r_package: str, w_package: str) -> list[str]:
    problems: list[str] = []
    r_fields = {f.number: f for f in r.field}
    w_fields = {f.number: f for f in w.field}
    for number, rf in r_fields.items():
        where = f"/{name}.{rf.name} ({number})"
        wf = w_fields.get(number)
        if wf is None:
            if rf.label == F.LABEL_REQUIRED:
                problems.append(f"{where}: required field added (the writer never writes it)")
            continue
        r_type, w_type = _describe(rf, r_package), _describe(wf, w_package)
        if _kind(rf) != _kind(wf):
            problems.append(f"{where}: kind changed from {w_type} to {r_type}")
        elif _kind(rf) != "scalar":
            if r_type != w_type:
                problems.append(f"{where}: type changed from {w_type} to {r_type}")
        elif not any(rf.type in g and wf.type in g for g in SCALAR_GROUPS):
            problems.append(f"{where}: type changed from {w_type} to {r_type} (incompatible "
                            f"wire encodings)")
        repeated = (rf.label == F.LABEL_REPEATED, wf.label == F.LABEL_REPEATED)
        if repeated[0] != repeated[1] and not (rf.type in LABEL_CHANGE_OK
                                               and wf.type in LABEL_CHANGE_OK):
            problems.append(f"{where}: changed from {'repeated' if repeated[1] else 'singular'}"
                            f" to {'repeated' if repeated[0] else 'singular'} (a packed "
                            f"repeated numeric field does not read as a single value)")
        if rf.label == F.LABEL_REQUIRED and wf.label != F.LABEL_REQUIRED:
            problems.append(f"{where}: made required by the reader (the writer may omit it)")
    problems += _oneof_changes(name, r, w)
    return problems


def _oneof_changes(name: str, r: Any, w: Any) -> list[str]:
    problems: list[str] = []
    r_oneofs, w_oneofs = _oneofs(r), _oneofs(w)
    r_names = {f.number: f.name for f in r.field}
    w_names = {f.number: f.name for f in w.field}
    by_writer_oneof: dict[str, list[int]] = {}
    for number, oneof in w_oneofs.items():
        by_writer_oneof.setdefault(oneof, []).append(number)
    for oneof, numbers in by_writer_oneof.items():
        where = f"/{name}.{oneof}"
        removed = [n for n in numbers if n not in r_names]
        moved_out = [n for n in numbers if n in r_names and n not in r_oneofs]
        targets = {r_oneofs[n] for n in numbers if n in r_oneofs}
        if removed:
            problems.append(f"{where}: oneof fields removed: "
                            f"{', '.join(f'{w_names[n]} ({n})' for n in removed)}")
        if moved_out:
            problems.append(f"{where}: fields moved out of the oneof: "
                            f"{', '.join(f'{r_names[n]} ({n})' for n in moved_out)}")
        if len(targets) > 1:
            problems.append(f"{where}: the oneof's fields split between oneofs "
                            f"{', '.join(sorted(targets))}")
    by_reader_oneof: dict[str, list[int]] = {}
    for number, oneof in r_oneofs.items():
        if number in w_names:
            by_reader_oneof.setdefault(oneof, []).append(number)
    for oneof, numbers in by_reader_oneof.items():
        outside = [n for n in numbers if n not in w_oneofs]
        sources = {w_oneofs[n] for n in numbers if n in w_oneofs}
        if len(numbers) > 1 and (outside or len(sources) > 1):
            moved = [n for n in numbers if n in outside or len(sources) > 1]
            problems.append(f"/{name}.{oneof}: fields the writer may set together moved into "
                            f"one oneof: {', '.join(f'{r_names[n]} ({n})' for n in moved)} "
                            f"(data with several set keeps only one)")
    return problems
