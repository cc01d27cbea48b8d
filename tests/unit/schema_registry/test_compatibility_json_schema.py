"""JSON Schema compatibility: the reader must accept every document the writer accepts.

Each pair is checked both ways by the same helper as the Avro table, and a sample of
documents valid for the writer (and for the reader) is run through ``jsonschema`` as an
oracle: a compatible verdict must never meet a document the writer accepts and the reader
rejects."""

from __future__ import annotations

import json
from typing import Any

import pytest

from millrace.client.schema_registry.schemas import (
    JsonSchema,
    Schema,
    SchemaReference,
    parse_schema,
)
from millrace.schema_registry.compatibility import CompatibilityLevel, check
from tests.unit.schema_registry.compat_helpers import assert_levels, assert_verdict


def js(document: Any) -> JsonSchema:
    parsed = parse_schema(Schema(json.dumps(document), "JSON"))
    assert isinstance(parsed, JsonSchema)
    return parsed


def obj(properties: dict[str, Any], closed: bool = False, **extra: Any) -> dict[str, Any]:
    schema = {"type": "object", "properties": properties, **extra}
    if closed:
        schema["additionalProperties"] = False
    return schema


STR, INT, NUM = {"type": "string"}, {"type": "integer"}, {"type": "number"}

# (id, writer, reader, reader accepts writer's documents, writer accepts reader's, reason)
CASES: list[tuple[str, Any, Any, bool, bool, str | None]] = [
    ("identical", obj({"a": STR}), obj({"a": STR}), True, True, None),
    ("integer widened to number", obj({"a": INT}), obj({"a": NUM}), True, False,
     "/properties/a: type narrowed: the reader does not accept number"),
    ("type changed", obj({"a": STR}), obj({"a": INT}), False, False, "type narrowed"),
    ("type union widened", {"type": "string"}, {"type": ["string", "null"]}, True, False, None),
    ("type added where there was none", {}, {"type": "string"}, False, True, None),
    # open vs closed content models
    ("property added to a closed model", obj({"a": STR}, closed=True),
     obj({"a": STR, "b": STR}, closed=True), True, False, "property 'b' removed from a closed"),
    ("property added to an open model", obj({"a": STR}), obj({"a": STR, "b": STR}), False, True,
     "/properties/b: property 'b' added to an open content model"),
    ("property with an empty schema added to an open model", obj({"a": STR}),
     obj({"a": STR, "b": {}}), True, True, None),
    ("property removed from an open model", obj({"a": STR, "b": STR}), obj({"a": STR}), True, False,
     None),
    ("property removed from a closed model", obj({"a": STR, "b": STR}, closed=True),
     obj({"a": STR}, closed=True), False, True, "removed from a closed content model"),
    ("model closed by the reader", obj({"a": STR}), obj({"a": STR}, closed=True), False, True,
     "the reader closes the content model"),
    ("additionalProperties schema widened", obj({}, additionalProperties=INT),
     obj({}, additionalProperties=NUM), True, False, "/additionalProperties"),
    # required
    ("required property added by the reader", obj({"a": STR, "b": STR}, required=["a"]),
     obj({"a": STR, "b": STR}, required=["a", "b"]), False, True,
     "property 'b' is required by the reader"),
    # enums and const
    ("enum value added", {"enum": ["a", "b"]}, {"enum": ["a", "b", "c"]}, True, False, None),
    ("enum value removed", {"enum": ["a", "b"]}, {"enum": ["a"]}, False, True,
     "enum narrowed: the reader does not accept 'b'"),
    ("enum added by the reader", STR, {"type": "string", "enum": ["a"]}, False, True,
     "enum added"),
    ("const changed", {"const": 1}, {"const": 2}, False, False, None),
    # bounds
    ("maxLength tightened", {"type": "string", "maxLength": 10},
     {"type": "string", "maxLength": 5}, False, True, "maxLength tightened by the reader (10 -> 5)"),
    ("maxLength added", STR, {"type": "string", "maxLength": 5}, False, True, "maxLength added"),
    ("minLength raised", {"type": "string", "minLength": 1}, {"type": "string", "minLength": 2},
     False, True, "minLength"),
    ("maximum lowered", {"type": "number", "maximum": 100}, {"type": "number", "maximum": 10},
     False, True, "maximum tightened"),
    ("minimum raised", {"type": "integer", "minimum": 0}, {"type": "integer", "minimum": 1},
     False, True, "minimum tightened"),
    ("minimum dropped", {"type": "integer", "minimum": 0}, INT, True, False, None),
    ("pattern added", STR, {"type": "string", "pattern": "^a"}, False, True, "pattern added"),
    ("maxItems tightened", {"type": "array", "items": STR, "maxItems": 3},
     {"type": "array", "items": STR, "maxItems": 2}, False, True, "maxItems"),
    # nesting, arrays, combinators, references
    ("nested property type widened", obj({"o": obj({"n": INT})}), obj({"o": obj({"n": NUM})}),
     True, False, "/properties/o/properties/n"),
    ("array items widened", {"type": "array", "items": INT}, {"type": "array", "items": NUM},
     True, False, "/items"),
    ("anyOf widened", {"anyOf": [STR, INT]}, {"anyOf": [STR, INT, {"type": "null"}]}, True, False,
     None),
    ("oneOf narrowed", {"oneOf": [STR, INT]}, {"oneOf": [STR]}, False, True, None),
    ("non-union to a union containing it", STR, {"anyOf": [STR, {"type": "null"}]}, True, False,
     None),
    ("local $ref target widened",
     {"definitions": {"n": INT}, "type": "object", "properties": {"a": {"$ref": "#/definitions/n"}}},
     {"definitions": {"n": NUM}, "type": "object", "properties": {"a": {"$ref": "#/definitions/n"}}},
     True, False, "/properties/a"),
    ("recursive tree, node field widened",
     {"definitions": {"t": obj({"v": INT, "kids": {"type": "array",
                                                 "items": {"$ref": "#/definitions/t"}}})},
      "$ref": "#/definitions/t"},
     {"definitions": {"t": obj({"v": NUM, "kids": {"type": "array",
                                                 "items": {"$ref": "#/definitions/t"}}})},
      "$ref": "#/definitions/t"}, True, False, None),
    ("true and false", True, False, False, True, "the reader accepts nothing"),
]


def test_table_size() -> None:
    assert len(CASES) >= 30
    assert len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize(("writer", "reader", "backward", "forward", "reason"),
                         [pytest.param(*c[1:], id=c[0]) for c in CASES])
def test_pair_both_ways(writer: Any, reader: Any, backward: bool, forward: bool,
                        reason: str | None) -> None:
    w, r = js(writer), js(reader)
    assert_verdict(r, w, backward, reason if not backward else None)
    assert_verdict(w, r, forward, reason if backward and not forward else None)
    assert_verdict(r, r, True)
    assert_verdict(w, w, True)


SAMPLES: list[Any] = [None, True, False, 0, 1, 2, 7, -3, 1.5, 50, 150, "", "a", "b", "c", "abc",
                      "abcdefgh", "zzzzzzzzzzzz", ["a", "b", "c"], {"a": 1.5},
                      [], ["a"], ["a", "b", "c", "d"], [1, 2.5], {}, {"a": "x"}, {"a": 1},
                      {"a": "x", "b": "y"}, {"a": "x", "b": 3}, {"b": "y"}, {"n": 1},
                      {"n": 1.5}, {"o": {"n": 1}}, {"o": {"n": 1.5}}, {"c": None},
                      {"v": 1, "kids": [{"v": 2.5, "kids": []}]}, {"a": "x", "z": 1}]


@pytest.mark.parametrize(("writer", "reader", "backward", "forward"),
                         [pytest.param(*c[1:5], id=c[0]) for c in CASES])
def test_oracle_no_document_breaks_a_compatible_verdict(writer: Any, reader: Any,
                                                        backward: bool, forward: bool) -> None:
    """Where the verdict is compatible, no sample the writer accepts is rejected by the
    reader (jsonschema's own validators decide)."""
    w, r = js(writer), js(reader)
    for reading, written, compatible in ((r, w, backward), (w, r, forward)):
        if compatible:
            for doc in SAMPLES:
                if written.validator.is_valid(doc):
                    assert reading.validator.is_valid(doc), (doc, reading, written)


def test_oracle_finds_a_witness_for_every_incompatible_verdict() -> None:
    """The samples are not vacuous: for every incompatible verdict some sample is accepted
    by the writer and rejected by the reader."""
    witnessed = total = 0
    for _, writer, reader, backward, forward, _ in CASES:
        w, r = js(writer), js(reader)
        for reading, written, compatible in ((r, w, backward), (w, r, forward)):
            if not compatible:
                total += 1
                witnessed += any(written.validator.is_valid(d) and
                                 not reading.validator.is_valid(d) for d in SAMPLES)
    assert witnessed == total, (witnessed, total)



@pytest.mark.parametrize(("writer", "reader", "backward", "forward"),
                         [pytest.param(*c[1:5], id=c[0]) for c in CASES])
def test_every_pair_at_every_level(writer: Any, reader: Any, backward: bool,
                                   forward: bool) -> None:
    assert_levels(js(reader), js(writer), backward, forward)

def test_negative_control() -> None:
    (_, writer, reader, backward, _, _), = [c for c in CASES
                                           if c[0] == "property added to an open model"]
    assert backward is False
    with pytest.raises(AssertionError, match="expected compatible"):
        assert_verdict(js(reader), js(writer), True)


def test_reference_to_another_subject() -> None:
    def resolve(ref: SchemaReference) -> Schema:
        return Schema(json.dumps(obj({"zip": INT if ref.version == 1 else STR})), "JSON")

    def order(version: int) -> JsonSchema:
        parsed = parse_schema(Schema(json.dumps(obj({"address": {"$ref": "address.json"}})),
                                     "JSON", (SchemaReference("address.json", "address",
                                                              version),)), resolve)
        assert isinstance(parsed, JsonSchema)
        return parsed

    assert_verdict(order(2), order(1), False, "/properties/address/properties/zip")
    assert_verdict(order(1), order(1), True)


def test_levels() -> None:
    v1, v2 = js(obj({"a": STR}, closed=True)), js(obj({"a": STR, "b": STR}, closed=True))
    assert check(CompatibilityLevel.BACKWARD, v2, [v1]) == []
    assert check(CompatibilityLevel.FORWARD, v2, [v1])
    assert check(CompatibilityLevel.NONE, v2, [v1]) == []
