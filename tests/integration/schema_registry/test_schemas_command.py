"""``millrace schemas`` and ``produce``/``consume --value-format`` against a real broker and a
real ``millrace schema-registry`` (one each for the module), as a user runs them: register,
evolve, check compatible and incompatible changes (with the registry's reason), fetch by
id, set the compatibility level, delete soft and permanently; Avro lines produced and
consumed back as the same JSON; Protobuf values with JSON Schema keys; a line that does
not fit the schema; and a record with a bad magic byte that makes consume stop naming its
offset (the negative control: read as bytes, the topic reads to the end)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import descriptor_pb2

from millrace.testing.broker_process import BrokerProcess
from millrace.testing.schema_registry import SchemaRegistryProcess
from tests.unit.client.schema_registry.protos import order_file

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ORDER_V1 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "customer", "type": "string"},
    {"name": "amount", "type": "double"},
    {"name": "tags", "type": {"type": "array", "items": "string"}, "default": []},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "digest", "type": "bytes", "default": ""},
]}
# a new optional field: BACKWARD compatible
ORDER_V2 = {**ORDER_V1, "fields": [*ORDER_V1["fields"],
                                   {"name": "coupon", "type": ["null", "string"],
                                    "default": None}]}
# a new required field without a default: v2's records cannot be read with it
ORDER_BAD = {**ORDER_V1, "fields": [*ORDER_V1["fields"],
                                    {"name": "warehouse", "type": "string"}]}


class Env:
    def __init__(self, broker: BrokerProcess, registry: SchemaRegistryProcess,
                 tmp: Path) -> None:
        self.broker, self.registry, self.tmp = broker, registry, tmp

    def cli(self, *args: str, stdin: str | None = None, kafka: bool = False,
            registry: bool = True) -> subprocess.CompletedProcess[str]:
        extra = ["--bootstrap-server", self.broker.bootstrap] if kafka else []
        extra += ["--schema-registry", self.registry.url] if registry else []
        proc = subprocess.run([sys.executable, "-m", "millrace.cli.main", *args, *extra],
                              input=stdin, capture_output=True, text=True, timeout=120,
                              check=False)
        assert "Traceback" not in proc.stderr, proc.stderr
        return proc

    def schema_file(self, name: str, schema: Any) -> str:
        path = self.tmp / name
        path.write_text(json.dumps(schema))
        return str(path)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    with BrokerProcess(tmp_path_factory.mktemp("broker")) as broker, \
            SchemaRegistryProcess(broker.bootstrap, tmp_path_factory.mktemp("registry")
                                  ) as registry:
        yield Env(broker, registry, tmp_path_factory.mktemp("files"))


def _error(proc: subprocess.CompletedProcess[str]) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_register_evolve_check_get_config_delete(env: Env) -> None:
    v1, v2 = env.schema_file("v1.avsc", ORDER_V1), env.schema_file("v2.avsc", ORDER_V2)
    bad = env.schema_file("bad.avsc", ORDER_BAD)
    r = env.cli("schemas", "register", "orders-value", "--schema-file", v1, "-o", "json")
    assert r.returncode == 0, r.stderr
    first = json.loads(r.stdout)
    assert first["subject"] == "orders-value" and first["version"] == 1
    r = env.cli("schemas", "register", "orders-value", "--schema-file", v1, "-o", "json")
    assert json.loads(r.stdout) == first  # the same schema again: no new version

    r = env.cli("schemas", "check", "orders-value", "--schema-file", v2)
    assert r.returncode == 0 and r.stdout.startswith("compatible"), r.stdout + r.stderr
    r = env.cli("schemas", "check", "orders-value", "--schema-file", bad)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.startswith("incompatible") and "warehouse" in r.stdout, r.stdout
    r = env.cli("schemas", "check", "orders-value", "--schema-file", bad, "-o", "json")
    verdict = json.loads(r.stdout)
    assert r.returncode == 1 and verdict["is_compatible"] is False and verdict["messages"]

    r = env.cli("schemas", "register", "orders-value", "--schema-file", v2)
    assert r.returncode == 0 and "orders-value version 2" in r.stdout, r.stdout + r.stderr
    r = env.cli("schemas", "register", "orders-value", "--schema-file", bad)
    assert r.returncode == 1
    assert "SR code 409" in _error(r) and "warehouse" in _error(r)

    r = env.cli("schemas", "versions", "orders-value", "-o", "json")
    rows = json.loads(r.stdout)
    assert [row["version"] for row in rows] == [1, 2] and rows[0]["id"] == first["id"]
    r = env.cli("schemas", "versions", "orders-value")
    assert r.stdout.split()[:3] == ["VERSION", "ID", "TYPE"]
    r = env.cli("schemas", "--schema-registry", env.registry.url, "list")  # before the action
    assert "orders-value" in r.stdout.split(), r.stdout + r.stderr

    r = env.cli("schemas", "get", "--id", str(first["id"]), "-o", "json")
    got = json.loads(r.stdout)
    assert json.loads(got["schema"])["fields"] == ORDER_V1["fields"]
    assert got["versions"] == [{"subject": "orders-value", "version": 1}]
    r = env.cli("schemas", "get", "orders-value")  # latest: v2, shown as JSON
    assert "Version: 2" in r.stdout and '"coupon"' in r.stdout, r.stdout
    r = env.cli("schemas", "get", "orders-value", "--version", "7")
    assert r.returncode == 1 and "SR code 40402" in _error(r)

    r = env.cli("schemas", "config", "orders-value")
    assert r.stdout.strip() == "BACKWARD (subject orders-value, from the global level)"
    r = env.cli("schemas", "config", "orders-value", "--set", "full")
    assert r.returncode == 0 and "FULL" in r.stdout, r.stderr
    r = env.cli("schemas", "config", "orders-value", "-o", "json")
    assert json.loads(r.stdout) == {"subject": "orders-value", "compatibility": "FULL",
                                    "global": False}
    r = env.cli("schemas", "mode", "-o", "json")
    assert json.loads(r.stdout) == {"subject": None, "mode": "READWRITE"}

    # permanent before soft is refused (Confluent's rule), then soft, then permanent
    r = env.cli("schemas", "delete", "orders-value", "--version", "1", "--permanent")
    assert r.returncode == 1 and "SR code 40407" in _error(r), r.stderr
    r = env.cli("schemas", "delete", "orders-value", "--version", "1")
    assert r.returncode == 0 and "version(s) 1 (soft)" in r.stdout, r.stderr
    r = env.cli("schemas", "versions", "orders-value", "-o", "json")
    assert [row["version"] for row in json.loads(r.stdout)] == [2]
    r = env.cli("schemas", "versions", "orders-value", "--deleted", "-o", "json")
    assert [row["version"] for row in json.loads(r.stdout)] == [1, 2]
    r = env.cli("schemas", "delete", "orders-value")
    assert r.returncode == 0 and "version(s) 2 (soft)" in r.stdout, r.stderr
    r = env.cli("schemas", "list")
    assert "orders-value" not in r.stdout.split()
    r = env.cli("schemas", "list", "--deleted", "--prefix", "orders")
    assert r.stdout.split() == ["orders-value"]
    r = env.cli("schemas", "delete", "orders-value", "--permanent", "-o", "json")
    assert r.returncode == 0 and json.loads(r.stdout)["versions"] == [1, 2], r.stderr
    r = env.cli("schemas", "list", "--deleted")
    assert "orders-value" not in r.stdout.split()
    r = env.cli("schemas", "versions", "orders-value")
    assert r.returncode == 1 and "SR code 40401" in _error(r)


def test_produce_and_consume_avro_lines(env: Env) -> None:
    schema = env.schema_file("order.avsc", ORDER_V1)
    docs = [{"id": 1, "customer": "ada", "amount": 12.5, "tags": ["new"], "note": None,
             "digest": "AAEC/w=="},
            {"id": 2 ** 40, "customer": "grace", "amount": 3.0, "tags": [], "note": "rush",
             "digest": ""}]
    lines = "".join(json.dumps(d) + "\n" for d in docs)
    r = env.cli("produce", "--topic", "avro-orders", "--value-format", "avro",
                "--value-schema-file", schema, stdin=lines, kafka=True)
    assert r.returncode == 0, r.stderr
    assert "sent 2 records" in r.stderr and "avro-orders-value" in r.stderr
    r = env.cli("consume", "--topic", "avro-orders", "--from-beginning", "--max-messages",
                "2", "--value-format", "avro", kafka=True)
    assert r.returncode == 0, r.stderr
    assert [json.loads(line) for line in r.stdout.splitlines()] == docs
    r = env.cli("consume", "--topic", "avro-orders", "--from-beginning", "--max-messages",
                "2", "--value-format", "avro", "-o", "json", kafka=True)
    assert [json.loads(line)["value"] for line in r.stdout.splitlines()] == docs
    # the records are Confluent's wire format: magic 0 and the registered id
    r = env.cli("consume", "--topic", "avro-orders", "--from-beginning", "--max-messages",
                "1", "-o", "json", kafka=True)
    raw = json.loads(r.stdout)["value"]
    assert raw.startswith("base64:AAAAA"), raw

    # a line that does not fit: named by its number, nothing after it sent
    bad = lines + '{"id": "three", "customer": "x", "amount": 1}\n' + lines
    r = env.cli("produce", "--topic", "avro-orders", "--value-format", "avro",
                "--value-schema-file", schema, stdin=bad, kafka=True)
    assert r.returncode == 1
    assert _error(r) == ("Error: line 3: the value does not fit the schema of subject "
                         "avro-orders-value: at /id: expected a long, got \"three\"")
    r = env.cli("produce", "--topic", "avro-orders", "--value-format", "avro",
                "--value-schema-file", schema, stdin="not json\n", kafka=True)
    assert r.returncode == 1 and _error(r).startswith("Error: line 1: the value is not JSON")


def test_consume_stops_at_a_record_that_does_not_decode(env: Env) -> None:
    schema = env.schema_file("order.avsc", ORDER_V1)
    doc = {"id": 7, "customer": "ada", "amount": 1.5, "tags": [], "note": None, "digest": ""}
    good = json.dumps(doc) + "\n"
    r = env.cli("topics", "create", "--topic", "mixed", "--partitions", "1", kafka=True,
                registry=False)
    assert r.returncode == 0, r.stderr
    avro = ["--value-format", "avro", "--value-schema-file", schema]
    for stdin, options in ((good, avro), ('{"not": "avro"}\n', []), (good, avro)):
        r = env.cli("produce", "--topic", "mixed", *options, stdin=stdin, kafka=True)
        assert r.returncode == 0, r.stderr
    r = env.cli("consume", "--topic", "mixed", "--group", "g", "--from-beginning",
                "--max-messages", "3", "--value-format", "avro", kafka=True)
    assert r.returncode == 1
    assert r.stdout.splitlines() == [json.dumps(doc)]  # offset 0, then the stop
    error = _error(r)
    assert error.startswith("Error: topic mixed partition 0 offset 1: the value does not "
                            "decode as avro:") and "magic byte 0x7b" in error, error
    # the group committed offset 1: a rerun stops at the same record (no silent skip)
    r = env.cli("consume", "--topic", "mixed", "--group", "g", "--max-messages", "1",
                "--value-format", "avro", kafka=True)
    assert r.returncode == 1 and "offset 1:" in _error(r)
    # the negative control: the records around it decode; without --value-format all three
    r = env.cli("consume", "--topic", "mixed", "--from-beginning", "--max-messages", "3",
                kafka=True)
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 3, r.stderr
    assert r.stdout.splitlines()[1] == '{"not": "avro"}'


def test_protobuf_values_with_json_schema_keys(env: Env) -> None:
    """The other two formats, both sides: a protoc descriptor set for the values (its
    int64 read back as a number), a JSON Schema for the keys; each under its subject."""
    values = env.tmp / "order.desc"
    values.write_bytes(descriptor_pb2.FileDescriptorSet(file=[order_file()])
                       .SerializeToString())
    keys = env.schema_file("key.json", {"type": "object", "properties": {
        "region": {"type": "string"}}, "required": ["region"]})
    order = {"id": 2 ** 40, "customer": "ada", "amount": 2.5, "lines": [{"sku": "a", "qty": 2}]}
    options = ["--value-format", "protobuf", "--value-schema-file", str(values),
               "--key-format", "json-schema", "--key-schema-file", keys, "--parse-key"]
    r = env.cli("produce", "--topic", "pb-orders", *options,
                stdin=json.dumps({"region": "eu"}) + "\t" + json.dumps(order) + "\n",
                kafka=True)
    assert r.returncode == 0, r.stderr
    r = env.cli("schemas", "list", "--prefix", "pb-orders", "-o", "json")
    assert json.loads(r.stdout) == ["pb-orders-key", "pb-orders-value"]
    r = env.cli("consume", "--topic", "pb-orders", "--from-beginning", "--max-messages", "1",
                "--value-format", "protobuf", "--key-format", "json-schema", "-o", "json",
                kafka=True)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert (got["key"], got["value"]) == ({"region": "eu"}, order)
    r = env.cli("produce", "--topic", "pb-orders", *options,
                stdin=json.dumps({"zone": "eu"}) + "\t" + json.dumps(order) + "\n",
                kafka=True)
    assert r.returncode == 1
    assert _error(r) == ("Error: line 1: the key does not fit the schema of subject "
                         "pb-orders-key: at /: 'region' is a required property")
