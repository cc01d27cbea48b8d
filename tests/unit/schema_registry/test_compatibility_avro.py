"""Avro compatibility from the specification's schema-resolution rules: a table of (writer,
reader) pairs, each checked in both directions, then every level over 3-version histories."""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from typing import Any

import fastavro
import pytest

from millrace.client.schema_registry.schemas import AvroSchema, Schema, parse_schema
from millrace.schema_registry.compatibility import (
    DEFAULT_LEVEL,
    CompatibilityLevel,
    check,
    incompatibilities,
)
from tests.unit.schema_registry.compat_helpers import assert_levels, assert_verdict

L = CompatibilityLevel


def avro(schema: Any) -> AvroSchema:
    parsed = parse_schema(Schema(json.dumps(schema)))
    assert isinstance(parsed, AvroSchema)
    return parsed


def record(*fields: dict[str, Any], name: str = "Order", **extra: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "namespace": "shop", **extra, "fields": list(fields)}


def f(name: str, type_: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, **extra}


def field_type(type_: Any) -> dict[str, Any]:
    """A one-field record holding ``type_``: how most pairs are compared in context."""
    return record(f("v", type_))


ID = f("id", "long")
COLOR = {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}
COLOR_3 = {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]}
COLOR_1 = {"type": "enum", "name": "Color", "symbols": ["RED"]}
COLOR_1_DEFAULT = {**COLOR_1, "default": "RED"}
MD5 = {"type": "fixed", "name": "MD5", "size": 16}
ADDRESS = record(f("street", "string"), name="Address")
ADDRESS_ZIP = record(f("street", "string"), f("zip", "string"), name="Address")
ADDRESS_ZIP_DEFAULT = record(f("street", "string"), f("zip", "string", default=""),
                             name="Address")


def linked_list(value: Any, *extra: dict[str, Any]) -> dict[str, Any]:
    return {"type": "record", "name": "Node",
            "fields": [f("value", value), *extra, f("next", ["null", "Node"], default=None)]}


# (id, writer, reader, reader reads writer's data, writer reads reader's data, reason of the
# first incompatible direction)
CASES: list[tuple[str, Any, Any, bool, bool, str | None]] = [
    ("identical", record(ID), record(ID), True, True, None),
    # --- fields
    ("field added with default", record(ID), record(ID, f("coupon", "string", default="")),
     True, True, None),
    ("field added without default", record(ID), record(ID, f("coupon", "string")),
     False, True, "/fields/1 (coupon): reader field has no default and is missing from the writer"),
    ("field added with null default in a union", record(ID),
     record(ID, f("note", ["null", "string"], default=None)), True, True, None),
    ("field removed (had no default)", record(ID, f("coupon", "string")), record(ID),
     True, False, None),
    ("field removed (had a default)", record(ID, f("coupon", "string", default="")),
     record(ID), True, True, None),
    ("field order changed", record(ID, f("n", "int")), record(f("n", "int"), ID),
     True, True, None),
    # --- promotions (every one) and non-promotions
    ("int -> long", field_type("int"), field_type("long"), True, False, None),
    ("int -> float", field_type("int"), field_type("float"), True, False, None),
    ("int -> double", field_type("int"), field_type("double"), True, False, None),
    ("long -> float", field_type("long"), field_type("float"), True, False, None),
    ("long -> double", field_type("long"), field_type("double"), True, False, None),
    ("float -> double", field_type("float"), field_type("double"), True, False, None),
    ("string -> bytes", field_type("string"), field_type("bytes"), True, True, None),
    ("long -> int is not a promotion", field_type("long"), field_type("int"), False, True,
     "reader type int cannot read writer type long"),
    ("double -> float is not a promotion", field_type("double"), field_type("float"),
     False, True, None),
    ("int -> string", field_type("int"), field_type("string"), False, False, None),
    ("boolean -> int", field_type("boolean"), field_type("int"), False, False, None),
    ("null -> string", field_type("null"), field_type("string"), False, False, None),
    ("record -> map", field_type(ADDRESS), field_type({"type": "map", "values": "string"}),
     False, False, "reader type map cannot read writer type record shop.Address"),
    ("top-level primitive int -> long", "int", "long", True, False, None),
    # --- logical types follow their underlying type
    ("date -> int", field_type({"type": "int", "logicalType": "date"}), field_type("int"),
     True, True, None),
    ("date -> timestamp-millis (int -> long)", field_type({"type": "int", "logicalType": "date"}),
     field_type({"type": "long", "logicalType": "timestamp-millis"}), True, False, None),
    # --- enums
    ("enum symbol added by the reader", field_type(COLOR), field_type(COLOR_3), True, False,
     "the writer's symbols BLUE are missing from the reader"),
    ("enum symbol removed by the reader", field_type(COLOR), field_type(COLOR_1), False, True,
     "GREEN"),
    ("enum symbol removed, reader has a default", field_type(COLOR), field_type(COLOR_1_DEFAULT),
     True, True, None),
    ("enum renamed", field_type(COLOR), field_type({**COLOR, "name": "Colour"}), False, False,
     "names differ"),
    # --- fixed
    ("fixed unchanged", field_type(MD5), field_type(MD5), True, True, None),
    ("fixed size changed", field_type(MD5), field_type({**MD5, "size": 20}), False, False,
     "has size 20 in the reader and 16 in the writer"),
    ("fixed renamed", field_type(MD5), field_type({**MD5, "name": "Hash"}), False, False, None),
    # --- unions
    ("union widened", field_type(["null", "string"]), field_type(["null", "string", "int"]),
     True, False, "matches no branch of the reader's union"),
    ("union narrowed", field_type(["null", "string", "int"]), field_type(["null", "string"]),
     False, True, None),
    ("non-union -> union containing it", field_type("string"), field_type(["null", "string"]),
     True, False, None),
    ("non-union -> union via a promotion", field_type("int"), field_type(["null", "long"]),
     True, False, None),
    ("union -> non-union every branch reads", field_type(["int", "long"]), field_type("long"),
     True, True, None),
    ("union -> non-union one branch does not read", field_type(["null", "int"]),
     field_type("int"), False, True, "reader type int cannot read writer type null"),
    ("union of records, field added with default", field_type(["null", ADDRESS]),
     field_type(["null", ADDRESS_ZIP_DEFAULT]), True, True, None),
    ("union of records, field added without default", field_type(["null", ADDRESS]),
     field_type(["null", ADDRESS_ZIP]), False, True,
     "/fields/0 (v)/1/fields/1 (zip): reader field has no default"),
    # --- records: names and aliases
    ("record renamed", record(ID), record(ID, name="Purchase"), False, False, "names differ"),
    ("record renamed, reader alias names the writer", record(ID),
     record(ID, name="Purchase", aliases=["Order"]), True, False, None),
    ("record renamed, fully qualified alias", record(ID),
     {**record(ID, name="Purchase"), "namespace": "billing", "aliases": ["shop.Order"]},
     True, False, None),
    ("record namespace changed (names match unqualified)", record(ID),
     {**record(ID), "namespace": "billing"}, True, True, None),
    ("field renamed, reader field alias names the writer's", record(ID, f("amount", "int")),
     record(ID, f("total", "int", aliases=["amount"])), True, False,
     None),
    ("field renamed without an alias", record(ID, f("amount", "int")),
     record(ID, f("total", "int")), False, False, "(total): reader field has no default"),
    # --- nested records, arrays, maps
    ("nested record field added with default", record(ID, f("address", ADDRESS)),
     record(ID, f("address", ADDRESS_ZIP_DEFAULT)), True, True, None),
    ("nested record field added without default", record(ID, f("address", ADDRESS)),
     record(ID, f("address", ADDRESS_ZIP)), False, True,
     "/fields/1 (address)/fields/1 (zip): reader field has no default"),
    ("named type used twice", record(f("home", ADDRESS), f("work", "Address")),
     record(f("home", ADDRESS_ZIP), f("work", "Address")), False, True, "(zip)"),
    ("array items promoted", field_type({"type": "array", "items": "int"}),
     field_type({"type": "array", "items": "long"}), True, False, None),
    ("array of records, field added without default",
     field_type({"type": "array", "items": ADDRESS}),
     field_type({"type": "array", "items": ADDRESS_ZIP}), False, True, "/items/fields/1 (zip)"),
    ("map values changed", field_type({"type": "map", "values": "string"}),
     field_type({"type": "map", "values": "int"}), False, False, "/values"),
    ("map of enums, symbol added", field_type({"type": "map", "values": COLOR}),
     field_type({"type": "map", "values": COLOR_3}), True, False, None),
    ("array -> map", field_type({"type": "array", "items": "string"}),
     field_type({"type": "map", "values": "string"}), False, False, None),
    # --- recursive types
    ("recursive list unchanged", linked_list("int"), linked_list("int"), True, True, None),
    ("recursive list, value promoted", linked_list("int"), linked_list("long"), True, False,
     None),
    ("recursive list, field added with default", linked_list("int"),
     linked_list("int", f("label", "string", default="")), True, True, None),
    ("recursive list, field added without default", linked_list("int"),
     linked_list("int", f("label", "string")), False, True, "(label)"),
]


def test_the_table_covers_a_few_dozen_pairs() -> None:
    assert len(CASES) >= 40
    assert len({case[0] for case in CASES}) == len(CASES)


@pytest.mark.parametrize(("writer", "reader", "backward", "forward", "reason"),
                         [pytest.param(*case[1:], id=case[0]) for case in CASES])
def test_pair_both_ways(writer: Any, reader: Any, backward: bool, forward: bool,
                        reason: str | None) -> None:
    w, r = avro(writer), avro(reader)
    assert_verdict(r, w, backward, reason if not backward else None)
    assert_verdict(w, r, forward, reason if backward and not forward else None)
    # every schema reads its own data
    assert_verdict(r, r, True)
    assert_verdict(w, w, True)


def samples(schema: Any, named: Mapping[str, Any], depth: int = 0) -> list[Any]:
    """Datums of ``schema`` that between them take every union branch, every enum symbol
    and (one field at a time) every field's samples; recursion stops at the first branch."""
    if isinstance(schema, str):
        primitive = {"null": None, "boolean": True, "int": 7, "long": 2**40, "float": 1.5,
                     "double": 2.5, "bytes": b"ab", "string": "s"}
        if schema in primitive:
            return [primitive[schema]]
        return samples(named[schema], named, depth)
    if isinstance(schema, list):
        branches = schema[:1] if depth > 4 else schema
        return [s for b in branches for s in samples(b, named, depth + 1)]
    kind = schema["type"]
    if kind == "record":
        per_field = [(fl["name"], samples(fl["type"], named, depth + 1))
                     for fl in schema["fields"]]
        base = {name: values[0] for name, values in per_field}
        return [base, *({**base, name: v} for name, values in per_field for v in values[1:])]
    if kind == "enum":
        return list(schema["symbols"])
    if kind == "fixed":
        return [bytes(schema["size"])]
    if kind == "array":
        return [[], *([s] for s in samples(schema["items"], named, depth + 1))]
    if kind == "map":
        return [{}, *({"k": s} for s in samples(schema["values"], named, depth + 1))]
    return samples(kind, named, depth)  # a logical type


def fastavro_reads(reader: AvroSchema, writer: AvroSchema) -> list[str]:
    """fastavro's own schema resolution on every sample datum of the writer: the errors."""
    errors = []
    for datum in samples(writer.parsed, writer.named):
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, writer.parsed, datum)
        buffer.seek(0)
        try:
            fastavro.schemaless_reader(buffer, writer.parsed, reader.parsed)
        except fastavro.read.SchemaResolutionError as e:
            errors.append(f"{datum!r}: {e}")
    return errors


@pytest.mark.parametrize(("writer", "reader", "backward", "forward"),
                         [pytest.param(*case[1:5], id=case[0]) for case in CASES])
def test_fastavro_agrees(writer: Any, reader: Any, backward: bool, forward: bool) -> None:
    """An independent oracle: fastavro resolving real data.  A compatible verdict reads
    every sample; an incompatible one has a sample fastavro refuses to resolve."""
    w, r = avro(writer), avro(reader)
    for reading, written, compatible in ((r, w, backward), (w, r, forward)):
        errors = fastavro_reads(reading, written)
        if compatible:
            assert errors == []
        else:
            assert errors, "no sample shows the incompatibility"


def test_negative_control_the_harness_catches_a_wrong_verdict() -> None:
    """A copied table entry with its verdict flipped must fail the same assertion."""
    (_, writer, reader, backward, _, _), = [c for c in CASES
                                                 if c[0] == "field added without default"]
    assert backward is False
    with pytest.raises(AssertionError, match="expected compatible"):
        assert_verdict(avro(reader), avro(writer), True)
    (_, writer, reader, backward, _, _), = [c for c in CASES if c[0] == "int -> long"]
    with pytest.raises(AssertionError, match="expected incompatible"):
        assert_verdict(avro(reader), avro(writer), not backward)
    # and a right verdict with the wrong reason
    (_, writer, reader, _, _, _), = [c for c in CASES if c[0] == "field added without default"]
    with pytest.raises(AssertionError, match="no 'size'"):
        assert_verdict(avro(reader), avro(writer), False, "size")


def test_message_names_the_path_and_the_problem() -> None:
    problems = incompatibilities(avro(record(ID, f("n", "int"), f("coupon", "string"))),
                                 avro(record(ID, f("n", "int"))))
    assert problems == ["/fields/2 (coupon): reader field has no default and is missing "
                        "from the writer"]


def test_references_named_types_of_other_schemas() -> None:
    def resolve(ref: Any) -> Schema:
        return Schema(json.dumps(ADDRESS_ZIP if ref.version == 2 else ADDRESS))

    from millrace.client.schema_registry.schemas import SchemaReference

    def with_address(version: int) -> AvroSchema:
        parsed = parse_schema(Schema(json.dumps(record(ID, f("address", "Address"))),
                                     references=(SchemaReference("Address", "address",
                                                                 version),)), resolve)
        assert isinstance(parsed, AvroSchema)
        return parsed

    assert_verdict(with_address(2), with_address(1), False, "(address)/fields/1 (zip)")
    assert_verdict(with_address(1), with_address(2), True)


# --- levels over 3-version histories: (id, [v1, v2], new, the levels that reject new)
V_COUPON_STRING = record(ID, f("coupon", "string"))
V_NO_COUPON = record(ID)
V_COUPON_INT = record(ID, f("coupon", "int", default=0))
HISTORIES: list[tuple[str, list[Any], Any, set[CompatibilityLevel]]] = [
    ("optional fields added each time",
     [record(ID), record(ID, f("a", "string", default=""))],
     record(ID, f("a", "string", default=""), f("b", "int", default=0)), set()),
    # v3 reads v2 (coupon missing, has a default) but not v1 (coupon was a string): only the
    # transitive levels look at v1
    ("field removed then re-added with another type",
     [V_COUPON_STRING, V_NO_COUPON], V_COUPON_INT,
     {L.BACKWARD_TRANSITIVE, L.FORWARD_TRANSITIVE, L.FULL_TRANSITIVE}),
    ("field added without default", [record(ID), record(ID, f("a", "string", default=""))],
     record(ID, f("a", "string", default=""), f("b", "int")),
     {L.BACKWARD, L.BACKWARD_TRANSITIVE, L.FULL, L.FULL_TRANSITIVE}),
    ("field without default removed",
     [record(ID, f("name", "string")), record(ID, f("name", "string"), f("x", "int", default=0))],
     record(ID, f("x", "int", default=0)),
     {L.FORWARD, L.FORWARD_TRANSITIVE, L.FULL, L.FULL_TRANSITIVE}),
    # v2 widened int to long; new narrows back to int: breaks against v2 only one way, and
    # the transitive forward check also sees v1 (int) read new's int fine
    ("type narrowed back", [field_type("int"), field_type("long")], field_type("int"),
     {L.BACKWARD, L.BACKWARD_TRANSITIVE, L.FULL, L.FULL_TRANSITIVE}),
    # an enum symbol added in v2 and removed again: new reads v1 fine but not v2
    ("enum symbol added then removed", [field_type(COLOR), field_type(COLOR_3)],
     field_type(COLOR),
     {L.BACKWARD, L.BACKWARD_TRANSITIVE, L.FULL, L.FULL_TRANSITIVE}),
    # the change against v1 only: v1 had a required field that v2 gave a default and new
    # drops -- forward transitive (v1 reads new) breaks, plain forward (v2 reads new) does not
    ("default added then field dropped",
     [record(ID, f("name", "string")), record(ID, f("name", "string", default=""))],
     record(ID), {L.FORWARD_TRANSITIVE, L.FULL_TRANSITIVE}),
]


@pytest.mark.parametrize(("previous", "new", "rejected_by"),
                         [pytest.param(*h[1:], id=h[0]) for h in HISTORIES])
@pytest.mark.parametrize("level", list(CompatibilityLevel))
def test_levels_over_a_history(level: CompatibilityLevel, previous: list[Any], new: Any,
                               rejected_by: set[CompatibilityLevel]) -> None:
    problems = check(level, avro(new), [avro(v) for v in previous])
    if level in rejected_by:
        assert problems, f"{level} should reject"
    else:
        assert problems == [], f"{level} should accept: {problems}"


@pytest.mark.parametrize(("writer", "reader", "backward", "forward"),
                         [pytest.param(*case[1:5], id=case[0]) for case in CASES])
def test_every_pair_at_every_level(writer: Any, reader: Any, backward: bool,
                                   forward: bool) -> None:
    assert_levels(avro(reader), avro(writer), backward, forward)


def test_only_transitive_levels_name_version_1() -> None:
    problems = check(L.BACKWARD_TRANSITIVE, avro(V_COUPON_INT),
                     [avro(V_COUPON_STRING), avro(V_NO_COUPON)], versions=[1, 2])
    assert problems == ["version 1 (the new schema reading its data): /fields/1 (coupon): "
                        "reader type int cannot read writer type string"]
    assert check(L.BACKWARD, avro(V_COUPON_INT),
                 [avro(V_COUPON_STRING), avro(V_NO_COUPON)], versions=[1, 2]) == []


def test_level_basics() -> None:
    assert DEFAULT_LEVEL is L.BACKWARD
    assert [level.value for level in L] == [
        "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL",
        "FULL_TRANSITIVE", "NONE"]
    assert L("FULL_TRANSITIVE").transitive and L.FULL.backward and L.FULL.forward
    assert not L.NONE.backward and not L.NONE.forward
    assert check("BACKWARD", avro(record(ID, f("x", "int"))), [avro(record(ID))])
    with pytest.raises(ValueError):
        check("SIDEWAYS", avro(record(ID)), [avro(record(ID))])
    # nothing to check against: the first version always registers
    for level in L:
        assert check(level, avro(record(ID)), []) == []


def test_a_schema_of_another_type_is_incompatible() -> None:
    json_schema = parse_schema(Schema('{"type": "object"}', "JSON"))
    problems = check(L.BACKWARD, avro(record(ID)), [json_schema])
    assert problems == ["the latest version: it is a JSON schema and the new one is AVRO; "
                        "a subject's schemas share one type"]
    assert check(L.NONE, avro(record(ID)), [json_schema]) == []
    assert incompatibilities(avro(record(ID)), json_schema) == [
        "/: a AVRO schema cannot read data written with a JSON schema"]
