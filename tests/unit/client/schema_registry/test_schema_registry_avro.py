"""AvroSerializer / AvroDeserializer against the in-memory registry: the bytes, the caches
(registry requests counted), subject name strategies, configuration, reader schemas, and
bad records (each negative control raises SerializationError naming the problem)."""

from __future__ import annotations

import json
import struct
from typing import Any

import fastavro
import pytest

from millrace.client.errors import SerializationError
from millrace.client.schema_registry.avro import AvroDeserializer, AvroSerializer
from millrace.client.schema_registry.config import is_serde_config, registry_client_config
from millrace.client.serialization import resolve_deserializer, resolve_serializer
from millrace.common.errors import ConfigError
from tests.unit.client.schema_registry.fake_registry import FakeRegistry

ORDER: dict[str, Any] = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "customer", "type": "string"},
    {"name": "amount", "type": "double"}]}
ORDER_V2: dict[str, Any] = {**ORDER, "fields": [
    *ORDER["fields"], {"name": "note", "type": ["null", "string"], "default": None}]}
RECORD = {"id": 12345, "customer": "alice", "amount": 12.5}


def avro_bytes(schema: Any, record: Any) -> bytes:
    import io

    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


@pytest.fixture
def registry() -> FakeRegistry:
    return FakeRegistry()


def test_the_bytes_are_the_header_and_the_avro_datum(registry: FakeRegistry) -> None:
    serializer = AvroSerializer(registry.client(), json.dumps(ORDER))
    data = serializer.serialize("orders", RECORD)
    assert data == b"\x00\x00\x00\x00\x01" + avro_bytes(ORDER, RECORD)
    assert registry.subjects["orders-value"][0]["id"] == 1
    assert AvroDeserializer(registry.client()).deserialize("orders", data) == RECORD


def test_none_stays_none(registry: FakeRegistry) -> None:
    assert AvroSerializer(registry.client(), json.dumps(ORDER)).serialize("t", None) is None
    assert AvroDeserializer(registry.client()).deserialize("t", None) is None
    assert registry.count() == 0


def test_one_registration_per_topic_and_one_fetch_per_id(registry: FakeRegistry) -> None:
    serializer = AvroSerializer(registry.client(), json.dumps(ORDER))
    records = [serializer.serialize("orders", {**RECORD, "id": i}) for i in range(1000)]
    serializer.serialize("returns", RECORD)
    assert registry.count("POST") == 2  # orders-value and returns-value, once each
    deserializer = AvroDeserializer(registry.client())
    assert [deserializer.deserialize("orders", r)["id"] for r in records] == list(range(1000))
    assert registry.count("GET") == 1  # /schemas/ids/1, once


def test_the_key_side_uses_the_key_subject(registry: FakeRegistry) -> None:
    serializer = AvroSerializer(registry.client(), '"string"')
    serializer.configure({}, is_key=True)
    # a string: its length 2 as a zigzag varint (4), then the UTF-8
    assert serializer.serialize("orders", "k1") == b"\x00\x00\x00\x00\x01\x04k1"
    assert list(registry.subjects) == ["orders-key"]


@pytest.mark.parametrize(("strategy", "subject"), [
    ("TopicNameStrategy", "orders-value"),
    ("RecordNameStrategy", "shop.Order"),
    ("TopicRecordNameStrategy", "orders-shop.Order"),
    ("io.confluent.kafka.serializers.subject.RecordNameStrategy", "shop.Order"),
])
def test_subject_name_strategies(registry: FakeRegistry, strategy: str, subject: str) -> None:
    serializer = AvroSerializer(registry.client(), json.dumps(ORDER),
                                conf={"subject.name.strategy": strategy})
    serializer.serialize("orders", RECORD)
    assert list(registry.subjects) == [subject]


def test_a_callable_strategy(registry: FakeRegistry) -> None:
    seen: list[tuple[str, bool, str | None]] = []

    def strategy(topic: str, is_key: bool, record_name: str | None) -> str:
        seen.append((topic, is_key, record_name))
        return f"custom.{topic}"

    serializer = AvroSerializer(registry.client(), json.dumps(ORDER),
                                conf={"subject.name.strategy": strategy})
    for _ in range(3):
        serializer.serialize("orders", RECORD)
    assert list(registry.subjects) == ["custom.orders"]
    assert seen == [("orders", False, "shop.Order")]  # once: the subject is cached per topic


def test_record_name_strategy_needs_a_named_schema(registry: FakeRegistry) -> None:
    serializer = AvroSerializer(registry.client(), '"string"',
                                conf={"subject.name.strategy": "RecordNameStrategy"})
    with pytest.raises(SerializationError, match="RecordNameStrategy needs a named record"):
        serializer.serialize("t", "x")


def test_an_unknown_strategy_is_a_config_error(registry: FakeRegistry) -> None:
    with pytest.raises(ConfigError, match=r"subject\.name\.strategy"):
        AvroSerializer(registry.client(), json.dumps(ORDER),
                       conf={"subject.name.strategy": "TopicNameStrategyy"})


def test_without_auto_register_the_schema_is_looked_up(registry: FakeRegistry) -> None:
    serializer = AvroSerializer(registry.client(), json.dumps(ORDER),
                                conf={"auto.register.schemas": False})
    with pytest.raises(SerializationError) as e:
        serializer.serialize("orders", RECORD)
    assert "looking up the schema under subject 'orders-value'" in str(e.value)
    assert "http://registry.test:8081" in str(e.value)
    assert registry.subjects == {}  # nothing registered
    registry.client().register_schema("orders-value", registry_schema(ORDER))
    data = serializer.serialize("orders", RECORD)  # control: registered, it works
    assert data[:5] == b"\x00\x00\x00\x00\x01"


def registry_schema(schema: Any) -> Any:
    from millrace.client.schema_registry.schemas import Schema

    return Schema(json.dumps(schema))


def test_use_latest_version_writes_with_the_latest(registry: FakeRegistry) -> None:
    client = registry.client()
    client.register_schema("orders-value", registry_schema(ORDER))
    v2 = client.register_schema("orders-value", registry_schema(ORDER_V2))
    serializer = AvroSerializer(registry.client(), conf={"use.latest.version": True,
                                                         "auto.register.schemas": False})
    data = serializer.serialize("orders", RECORD)  # note: its default, null
    assert struct.unpack(">bI", data[:5]) == (0, v2)
    assert data[5:] == avro_bytes(ORDER_V2, {**RECORD, "note": None})


def test_a_reader_schema_resolves_the_writers_data(registry: FakeRegistry) -> None:
    data = AvroSerializer(registry.client(), json.dumps(ORDER)).serialize("orders", RECORD)
    reader = AvroDeserializer(registry.client(), json.dumps(ORDER_V2))
    assert reader.deserialize("orders", data) == {**RECORD, "note": None}
    # and use.latest.version reads into the subject's latest version
    registry.client().register_schema("orders-value", registry_schema(ORDER_V2))
    latest = AvroDeserializer(registry.client(), conf={"use.latest.version": True})
    assert latest.deserialize("orders", data) == {**RECORD, "note": None}


def test_an_incompatible_reader_schema_fails_naming_the_id(registry: FakeRegistry) -> None:
    data = AvroSerializer(registry.client(), json.dumps(ORDER)).serialize("orders", RECORD)
    needs_more = {**ORDER, "fields": [*ORDER["fields"], {"name": "sku", "type": "string"}]}
    with pytest.raises(SerializationError, match="does not decode with schema id 1"):
        AvroDeserializer(registry.client(), json.dumps(needs_more)).deserialize("orders", data)


def test_to_dict_and_from_dict(registry: FakeRegistry) -> None:
    class Order:
        def __init__(self, **kw: Any) -> None:
            self.__dict__.update(kw)

    serializer = AvroSerializer(registry.client(), json.dumps(ORDER), to_dict=vars)
    data = serializer.serialize("orders", Order(**RECORD))
    order = AvroDeserializer(registry.client(), from_dict=lambda d: Order(**d)).deserialize(
        "orders", data)
    assert isinstance(order, Order) and vars(order) == RECORD


def test_a_bytes_schema_writes_the_raw_bytes(registry: FakeRegistry) -> None:
    # Confluent's serializers special-case a top-level "bytes": no Avro length prefix
    data = AvroSerializer(registry.client(), '"bytes"').serialize("t", b"\x01\x02")
    assert data == b"\x00\x00\x00\x00\x01\x01\x02"
    assert AvroDeserializer(registry.client()).deserialize("t", data) == b"\x01\x02"


# ---------------------------------------------------------------------------- bad input


def test_a_record_that_does_not_fit_names_the_topic(registry: FakeRegistry) -> None:
    serializer = AvroSerializer(registry.client(), json.dumps(ORDER))
    with pytest.raises(SerializationError, match="topic 'orders': the dict does not fit"):
        serializer.serialize("orders", {**RECORD, "amount": "twelve"})
    assert serializer.serialize("orders", RECORD)  # control


def test_an_invalid_schema_fails_at_construction() -> None:
    with pytest.raises(ConfigError, match="Avro"):
        AvroSerializer(None, json.dumps({"type": "record", "name": "X", "fields": [
            {"name": "a", "type": "nosuchtype"}]}))


@pytest.fixture
def good(registry: FakeRegistry) -> bytes:
    return AvroSerializer(registry.client(), json.dumps(ORDER)).serialize("orders", RECORD)


def test_negative_control_the_good_record_decodes(registry: FakeRegistry, good: bytes) -> None:
    assert AvroDeserializer(registry.client()).deserialize("orders", good) == RECORD


def test_a_corrupted_magic_byte_raises(registry: FakeRegistry, good: bytes) -> None:
    with pytest.raises(SerializationError, match="unknown magic byte 0x01"):
        AvroDeserializer(registry.client()).deserialize("orders", b"\x01" + good[1:])


def test_an_unknown_schema_id_raises(registry: FakeRegistry, good: bytes) -> None:
    bad = good[:1] + struct.pack(">I", 4242) + good[5:]
    with pytest.raises(SerializationError) as e:
        AvroDeserializer(registry.client()).deserialize("orders", bad)
    assert "topic 'orders': schema id 4242 is not known to the schema registry at " \
        "http://registry.test:8081" in str(e.value)


def test_a_truncated_payload_raises(registry: FakeRegistry, good: bytes) -> None:
    deserializer = AvroDeserializer(registry.client())
    with pytest.raises(SerializationError, match="does not decode with schema id 1"):
        deserializer.deserialize("orders", good[:-3])
    with pytest.raises(SerializationError, match="too short"):
        deserializer.deserialize("orders", good[:4])


def test_trailing_bytes_raise(registry: FakeRegistry, good: bytes) -> None:
    with pytest.raises(SerializationError, match="2 bytes left after the datum"):
        AvroDeserializer(registry.client()).deserialize("orders", good + b"\x00\x00")


def test_a_schema_of_another_type_raises(registry: FakeRegistry) -> None:
    from millrace.client.schema_registry.schemas import JSON, Schema

    json_id = registry.client().register_schema("j", Schema('{"type": "object"}', JSON))
    with pytest.raises(SerializationError, match="schema id 1 is a JSON schema, not AVRO"):
        AvroDeserializer(registry.client()).deserialize(
            "orders", struct.pack(">bI", 0, json_id) + b"{}")


def test_an_unreachable_registry_fails_the_first_record(registry: FakeRegistry) -> None:
    registry.unreachable.add("registry.test")
    serializer = AvroSerializer(registry.client(), json.dumps(ORDER))
    with pytest.raises(SerializationError, match="no schema registry reachable"):
        serializer.serialize("orders", RECORD)


# ---------------------------------------------------------------------------- configuration


def test_configured_from_a_clients_configs(registry: FakeRegistry,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[dict[str, Any]] = []

    def client(conf: dict[str, Any]) -> Any:
        made.append(conf)
        return registry.client(conf)

    monkeypatch.setattr("millrace.client.schema_registry.serdes.SchemaRegistryClient", client)
    configs = {"schema.registry.url": "http://registry.test:8081",
               "basic.auth.user.info": "u:p", "value.serializer.schema": json.dumps(ORDER),
               "value.subject.name.strategy": "RecordNameStrategy",
               "auto.register.schemas": "true", "bootstrap.servers": "x:9092"}
    serializer = resolve_serializer("avro", "value.serializer", configs, False)
    assert isinstance(serializer, AvroSerializer)
    assert made == [{"url": "http://registry.test:8081", "basic.auth.user.info": "u:p"}]
    data = serializer.serialize("orders", RECORD)
    assert list(registry.subjects) == ["shop.Order"]
    deserializer = resolve_deserializer(
        "io.confluent.kafka.serializers.KafkaAvroDeserializer", "value.deserializer",
        configs, False)
    assert isinstance(deserializer, AvroDeserializer)
    assert deserializer.deserialize("orders", data) == RECORD


def test_without_a_registry_url_configure_fails() -> None:
    with pytest.raises(ConfigError, match=r"AvroSerializer needs schema.registry.url"):
        resolve_serializer("avro", "value.serializer", {}, False)


def test_what_the_constructor_was_given_wins(registry: FakeRegistry) -> None:
    serializer = AvroSerializer(registry.client(), json.dumps(ORDER),
                                conf={"auto.register.schemas": True})
    serializer.configure({"auto.register.schemas": False,
                          "value.serializer.schema": '"string"'}, False)
    serializer.serialize("orders", RECORD)  # registers ORDER: the given conf and schema
    assert registry.count("POST", "/subjects/orders-value/versions") == 1


def test_unknown_conf_keys_are_rejected(registry: FakeRegistry) -> None:
    with pytest.raises(ConfigError, match=r"auto\.register\.schema"):
        AvroSerializer(registry.client(), json.dumps(ORDER), conf={"auto.register.schema": True})
    with pytest.raises(ConfigError, match=r"use\.latest\.version"):
        AvroSerializer(registry.client(), json.dumps(ORDER), conf={"use.latest.version": "yes"})


def test_which_client_configs_belong_to_the_serdes() -> None:
    for name in ("schema.registry.url", "schema.registry.ssl.ca.location",
                 "basic.auth.user.info", "auto.register.schemas", "use.latest.version",
                 "value.subject.name.strategy", "value.serializer.schema"):
        assert is_serde_config(name), name
    for name in ("bootstrap.servers", "linger.ms", "value.serializer", "ssl.ca.location"):
        assert not is_serde_config(name), name
    assert registry_client_config({"schema.registry.url": "http://r", "linger.ms": 5,
                                   "schema.registry.ssl.ca.location": "/ca.pem",
                                   "basic.auth.credentials.source": "USER_INFO"}) == {
        "url": "http://r", "ssl.ca.location": "/ca.pem",
        "basic.auth.credentials.source": "USER_INFO"}


def test_a_misspelt_registry_key_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"Unknown schema registry configuration key\(s\): "
                                          r"ssl\.ca\.locaton"):
        resolve_serializer("avro", "value.serializer", {
            "schema.registry.url": "http://r", "schema.registry.ssl.ca.locaton": "/ca.pem",
            "value.serializer.schema": '"string"'}, False)


def test_use_latest_version_with_the_record_name_strategy(registry: FakeRegistry) -> None:
    v1 = registry.client().register_schema("shop.Order", registry_schema(ORDER))
    serializer = AvroSerializer(registry.client(), json.dumps(ORDER), conf={
        "use.latest.version": True, "subject.name.strategy": "RecordNameStrategy"})
    assert serializer.serialize("orders", RECORD)[:5] == struct.pack(">bI", 0, v1)
    assert registry.count("GET", "/subjects/shop.Order/versions/latest") == 1


def test_configure_again_drops_the_caches(registry: FakeRegistry) -> None:
    serializer = AvroSerializer(registry.client(), json.dumps(ORDER))
    serializer.serialize("orders", RECORD)
    serializer.configure({}, is_key=True)  # the same instance, now a key serializer
    serializer.serialize("orders", RECORD)
    assert sorted(registry.subjects) == ["orders-key", "orders-value"]


def test_threads_racing_on_the_first_record_register_once(registry: FakeRegistry) -> None:
    import threading

    serializer = AvroSerializer(registry.client(), json.dumps(ORDER))
    start = threading.Barrier(8)
    out: list[bytes | None] = []

    def send() -> None:
        start.wait()
        out.append(serializer.serialize("orders", RECORD))

    threads = [threading.Thread(target=send) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(out) == 8 and len(set(out)) == 1
    assert registry.count("POST") == 1
