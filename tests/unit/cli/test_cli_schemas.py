"""``millrace schemas`` and the console's schema formats without sockets: argument parsing,
the one-line errors (the registry's message and error code, an unreachable registry's
URL, a line that does not fit, a record that does not decode), and the JSON <-> schema
conversions, each checked against what fastavro / jsonschema / protobuf accept."""

from __future__ import annotations

import base64
import datetime
import decimal
import io
import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import fastavro
import pytest

from millrace.cli import schemas
from millrace.cli.common import CommandError
from millrace.cli.console import _decode, _encode
from millrace.cli.main import build_parser, main
from millrace.cli.schema_formats import (
    DoesNotFit,
    RecordDecoder,
    RecordEncoder,
    json_schema_problem,
    json_to_avro,
    json_to_protobuf,
    protobuf_class,
    to_json,
)
from millrace.client.schema_registry import (
    JsonSchema,
    ProtobufSchema,
    Schema,
    SchemaReference,
    parse_schema,
)
from tests.unit.client.schema_registry.fake_registry import FakeRegistry
from tests.unit.client.schema_registry.protos import order_file

ORDER = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "qty", "type": "int"},
    {"name": "amount", "type": "double"},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "digest", "type": "bytes", "default": "\u00ff"},
    {"name": "lines", "type": {"type": "array", "items": {
        "type": "record", "name": "Line", "fields": [{"name": "sku", "type": "string"}]}},
     "default": []},
    {"name": "extra", "type": ["null", "Line", {"type": "map", "values": "long"}],
     "default": None},
    {"name": "code", "type": {"type": "fixed", "name": "Code", "size": 2}, "default": "ab"},
]}
DOC = {"id": 2 ** 40, "qty": 3, "amount": 9.5, "status": "PAID", "note": "rush",
       "digest": "AAEC/w==", "lines": [{"sku": "a"}], "extra": {"k": 1}, "code": "eHk="}


def avro(schema: Any = ORDER) -> Any:
    return parse_schema(Schema(json.dumps(schema)))


def roundtrip(schema: Any, doc: Any) -> Any:
    """JSON -> fastavro bytes -> JSON, as produce and consume do it."""
    parsed = avro(schema)
    out = io.BytesIO()
    fastavro.schemaless_writer(out, parsed.parsed, json_to_avro(parsed, doc))
    out.seek(0)
    return to_json(fastavro.schemaless_reader(out, parsed.parsed, None))


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture()
def registry(monkeypatch: pytest.MonkeyPatch) -> FakeRegistry:
    fake = FakeRegistry()
    monkeypatch.setattr(schemas, "registry_client", lambda args: fake.client(
        {"url": args.schema_registry}))
    return fake


# ---------------------------------------------------------------------- parsing
def test_registry_options_before_or_after_the_action(monkeypatch: pytest.MonkeyPatch
                                                     ) -> None:
    monkeypatch.delenv(schemas.REGISTRY_ENV, raising=False)
    parser = build_parser()
    assert parser.parse_args(["schemas", "list"]).schema_registry == "http://localhost:8081"
    args = parser.parse_args(["schemas", "--schema-registry", "http://a:1", "-o", "json",
                              "--user-info", "u:p", "list"])
    assert (args.schema_registry, args.output, args.registry_user_info) == (
        "http://a:1", "json", "u:p")
    args = parser.parse_args(["schemas", "--schema-registry", "http://a:1", "list",
                              "--schema-registry-url", "http://b:2", "-o", "json"])
    assert (args.schema_registry, args.output) == ("http://b:2", "json")
    monkeypatch.setenv(schemas.REGISTRY_ENV, "http://env:3")
    assert build_parser().parse_args(["schemas", "list"]).schema_registry == "http://env:3"
    args = build_parser().parse_args(["produce", "-t", "t", "--value-format", "avro",
                                      "--value-schema-file", "o.avsc",
                                      "--schema-registry-user-info", "u:p"])
    assert (args.schema_registry, args.registry_user_info) == ("http://env:3", "u:p")


@pytest.mark.parametrize("argv, message", [
    (["schemas", "get", "s", "--version", "0"], "expected a version number or latest"),
    (["schemas", "config", "s", "--set", "SIDEWAYS"], "invalid choice"),
    (["schemas", "config", "s", "--set", "FULL", "--delete"], "not allowed with"),
    (["schemas", "register", "s"], "--schema-file"),
    (["consume", "-t", "t", "--value-format", "xml"], "invalid choice"),
])
def test_bad_command_lines_are_one_line(argv: list[str], message: str,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and message in err, err


def test_schema_files_and_references(tmp_path: Path) -> None:
    for name, kind in (("a.avsc", "AVRO"), ("a.json", "JSON"), ("a.proto", "PROTOBUF")):
        (tmp_path / name).write_text('{"type": "string"}')
        assert schemas.read_schema_file(str(tmp_path / name)).schema_type == kind
    assert schemas.read_schema_file(str(tmp_path / "a.json"), "AVRO").schema_type == "AVRO"
    (tmp_path / "a.txt").write_text("x")
    with pytest.raises(CommandError, match=r"cannot tell the schema type from the extension "
                                           r"\.txt"):
        schemas.read_schema_file(str(tmp_path / "a.txt"))
    with pytest.raises(CommandError, match=r"cannot read --schema-file .*missing\.avsc"):
        schemas.read_schema_file(str(tmp_path / "missing.avsc"))
    # a protoc descriptor set: its last file, base64, which parses as the schema
    from google.protobuf import descriptor_pb2

    files = descriptor_pb2.FileDescriptorSet(file=[order_file()])
    (tmp_path / "order.desc").write_bytes(files.SerializeToString())
    schema = schemas.read_schema_file(str(tmp_path / "order.desc"))
    assert parse_schema(schema).name() == "shop.Order"
    (tmp_path / "junk.desc").write_bytes(b"\xff\xff")
    with pytest.raises(CommandError, match="not a FileDescriptorSet"):
        schemas.read_schema_file(str(tmp_path / "junk.desc"))
    assert schemas.parse_reference("other.avsc=other-value:3") == SchemaReference(
        "other.avsc", "other-value", 3)
    for bad in ("x", "x=y", "x=y:latest", "=y:1"):
        with pytest.raises(CommandError, match="--reference"):
            schemas.parse_reference(bad)


# ---------------------------------------------------------------------- schemas actions
def test_register_check_get_and_the_registry_errors(
        registry: FakeRegistry, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "order.avsc"
    path.write_text(json.dumps(ORDER))
    code, out, _ = run(["schemas", "register", "orders-value", "--schema-file", str(path)],
                       capsys)
    assert (code, out) == (0, "Registered orders-value version 1 (schema id 1).\n")
    code, out, _ = run(["schemas", "get", "orders-value", "-o", "json"], capsys)
    assert code == 0 and json.loads(out)["id"] == 1
    code, out, err = run(["schemas", "check", "orders-value", "--schema-file", str(path)],
                         capsys)
    assert (code, out) == (0, "compatible with orders-value version latest\n")
    registry.incompatible["orders-value"] = ["READER_FIELD_MISSING_DEFAULT_VALUE: warehouse"]
    code, out, err = run(["schemas", "check", "orders-value", "--schema-file", str(path)],
                         capsys)
    assert code == 1 and out.splitlines() == [
        "incompatible with orders-value version latest:",
        "  - READER_FIELD_MISSING_DEFAULT_VALUE: warehouse"]
    code, out, err = run(["schemas", "get", "nope"], capsys)
    assert (code, out) == (1, "")
    assert err == ("Error: Subject 'nope' not found. (HTTP status code 404, SR code 40401)\n")
    code, out, err = run(["schemas", "config", "orders-value"], capsys)
    assert out == "BACKWARD (subject orders-value, from the global level)\n"
    code, out, err = run(["schemas", "config", "orders-value", "--set", "full"], capsys)
    assert out == "Set the compatibility level (subject orders-value) to FULL.\n"


def test_an_unreachable_registry_is_named(registry: FakeRegistry,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    registry.unreachable.add("down.test")
    code, out, err = run(["schemas", "list", "--schema-registry", "http://down.test:8081"],
                         capsys)
    assert (code, out) == (1, "")
    assert err.startswith("Error: no schema registry reachable: http://down.test:8081: ")
    assert len(err.splitlines()) == 1


def test_produce_refuses_incomplete_format_options(capsys: pytest.CaptureFixture[str]
                                                   ) -> None:
    for argv, message in (
            (["--value-format", "avro"], "--value-format avro needs --value-schema-file"),
            (["--value-schema-file", "o.avsc"], "--value-schema-file needs --value-format"),
            (["--key-format", "avro", "--key-schema-file", "k.avsc"],
             "--key-format needs --parse-key")):
        code, _out, err = run(["produce", "-t", "t", *argv], capsys)
        assert code == 1 and err.startswith(f"Error: {message}") and err.count("\n") == 1


# ---------------------------------------------------------------------- JSON -> Avro
def test_avro_roundtrip_keeps_the_json() -> None:
    assert roundtrip(ORDER, DOC) == DOC
    minimal = {"id": 1, "qty": 2, "amount": 3, "status": "NEW"}
    assert roundtrip(ORDER, minimal) == {**minimal, "amount": 3.0, "note": None,
                                         "digest": "/w==", "lines": [], "extra": None,
                                         "code": "YWI="}  # the defaults, as written
    # Avro's JSON encoding of a union branch is accepted too
    assert roundtrip(ORDER, {**DOC, "extra": {"shop.Line": {"sku": "z"}}})["extra"] == {
        "sku": "z"}
    assert roundtrip(ORDER, {**DOC, "note": {"string": "x"}})["note"] == "x"


@pytest.mark.parametrize("change, message", [
    ({"id": "7"}, 'at /id: expected a long, got "7"'),
    ({"id": True}, "at /id: expected a long, got true"),
    ({"qty": 2 ** 31}, "at /qty: 2147483648 is out of range for an int"),
    ({"qty": 1.5}, "at /qty: expected an int, got 1.5"),
    ({"amount": "x"}, 'at /amount: expected a double, got "x"'),
    ({"status": "LOST"}, 'at /status: expected one of the symbols NEW, PAID, got "LOST"'),
    ({"digest": "not base64!"}, "at /digest: expected bytes as base64 text"),
    ({"code": "eA=="}, "at /code: expected 2 bytes (fixed shop.Code), got 1"),
    ({"lines": [{"sku": 1}]}, "at /lines/0/sku: expected a string, got 1"),
    ({"note": 5}, "at /note: 5 fits none of the union's branches (null, string)"),
    ({"surprise": 1}, "at /: unknown field 'surprise' (record shop.Order has id, qty"),
])
def test_avro_values_that_do_not_fit(change: dict[str, Any], message: str) -> None:
    with pytest.raises(DoesNotFit) as e:
        json_to_avro(avro(), {**DOC, **change})
    assert str(e.value).startswith(message), str(e.value)


def test_avro_missing_field_and_special_floats() -> None:
    doc = dict(DOC)
    del doc["qty"]
    with pytest.raises(DoesNotFit, match="missing field 'qty' \\(it has no default\\)"):
        json_to_avro(avro(), doc)
    schema = {"type": "array", "items": "double"}
    got = roundtrip(schema, ["NaN", "Infinity", "-Infinity", 1])
    assert got == ["NaN", "Infinity", "-Infinity", 1.0]
    assert math.isnan(json_to_avro(avro(schema), ["NaN"])[0])


def test_avro_logical_types() -> None:
    schema = {"type": "record", "name": "T", "fields": [
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal",
                                   "precision": 9, "scale": 2}},
        {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
    ]}
    doc = {"day": "2026-11-29", "at": "2026-11-29T15:00:00.123000+00:00", "price": "12.50",
           "ref": "12345678-1234-5678-1234-567812345678"}
    assert roundtrip(schema, doc) == doc
    assert roundtrip(schema, {**doc, "day": 0, "at": 0, "price": 3})["day"] == "1970-01-01"
    parsed = avro(schema)
    assert json_to_avro(parsed, {**doc, "at": "2026-11-29T15:00:00"})["at"].tzinfo == \
        datetime.UTC
    assert json_to_avro(parsed, doc)["price"] == decimal.Decimal("12.50")
    for change, message in (({"price": "1.234"}, "more than the schema's 2 decimal places"),
                            ({"day": "soon"}, "expected a date"),
                            ({"ref": "nope"}, "expected a UUID")):
        with pytest.raises(DoesNotFit, match=message):
            json_to_avro(parsed, {**doc, **change})


# ---------------------------------------------------------------------- JSON Schema, Protobuf
def test_json_schema_problem_names_the_path() -> None:
    parsed = parse_schema(Schema(json.dumps({
        "type": "object", "properties": {"items": {"type": "array", "items": {
            "type": "object", "properties": {"price": {"type": "number"}}}}}}), "JSON"))
    assert isinstance(parsed, JsonSchema)
    assert json_schema_problem(parsed, {"items": [{"price": 1}]}) is None
    assert json_schema_problem(parsed, {"items": [{"price": 1}, {"price": "x"}]}) == \
        "at /items/1/price: 'x' is not of type 'number'"


def test_protobuf_json_roundtrip() -> None:
    schema = Schema(base64.b64encode(order_file().SerializeToString()).decode(), "PROTOBUF")
    parsed = parse_schema(schema)
    assert isinstance(parsed, ProtobufSchema)
    cls = protobuf_class(parsed)
    doc = {"id": 2 ** 40, "customer": "ada", "amount": 2.5,
           "lines": [{"sku": "a", "qty": 2}]}
    message = json_to_protobuf(cls, doc)
    assert to_json(cls.FromString(message.SerializeToString())) == doc
    # fields without presence are shown at their defaults; int64 stays a number
    assert to_json(cls()) == {"id": 0, "customer": "", "amount": 0.0, "lines": []}
    with pytest.raises(DoesNotFit, match="customer"):
        json_to_protobuf(cls, {"customer": 5})
    with pytest.raises(DoesNotFit, match=r"expected an object \(message shop\.Order\)"):
        json_to_protobuf(cls, [1])


# ---------------------------------------------------------------------- the codecs
def test_encode_and_decode_through_the_registry(registry: FakeRegistry) -> None:
    client = registry.client()
    schema = Schema(json.dumps(ORDER))
    encoder = RecordEncoder(client, "avro", schema, client.parse(schema), "orders", False)
    assert encoder.subject == "orders-value" and encoder.register() == 1
    data = _encode(encoder, json.dumps(DOC).encode(), 1, "value")
    assert data[:5] == b"\x00\x00\x00\x00\x01"
    decoder = RecordDecoder(client, "avro")
    assert decoder.decode("orders", data) == DOC
    with pytest.raises(CommandError) as e:
        _encode(encoder, b'{"id": 1}', 4, "value")
    assert str(e.value) == ("line 4: the value does not fit the schema of subject "
                            "orders-value: at /: missing field 'qty' (it has no default)")
    with pytest.raises(CommandError, match="line 5: the value is not JSON"):
        _encode(encoder, b"{", 5, "value")
    key_encoder = RecordEncoder(client, "json-schema", Schema('{"type": "string"}', "JSON"),
                                client.parse(Schema('{"type": "string"}', "JSON")), "orders",
                                True)
    assert key_encoder.subject == "orders-key"
    with pytest.raises(CommandError, match=r"line 2: the key does not fit .* orders-key: "
                                           r"at /: 5 is not of type 'string'"):
        _encode(key_encoder, b"5", 2, "key")
    assert _encode(key_encoder, b'"k1"', 2, "key").endswith(b'"k1"')


def test_a_record_that_does_not_decode_names_topic_partition_offset(
        registry: FakeRegistry) -> None:
    decoders = {"value": RecordDecoder(registry.client(), "avro")}
    record = SimpleNamespace(topic="orders", partition=2, offset=41, key=None,
                             value=b'{"not": "avro"}')
    with pytest.raises(CommandError) as e:
        _decode(decoders, record)
    assert str(e.value).startswith("topic orders partition 2 offset 41: the value does not "
                                   "decode as avro: unknown magic byte 0x7b")
    record.value = b"\x00\x00\x00\x00\x09\x02"  # a schema id the registry does not know
    with pytest.raises(CommandError, match=r"offset 41: .*schema id 9 is not known"):
        _decode(decoders, record)
    registry.unreachable.add("registry.test")  # not the record's fault: said so
    with pytest.raises(CommandError, match=r"offset 41: its avro schema could not be "
                                           r"fetched: .*no schema registry reachable: "
                                           r"http://registry\.test:8081"):
        _decode(decoders, record)
    record.value = None  # a tombstone decodes to null
    assert _decode(decoders, record) == {"value": None}
