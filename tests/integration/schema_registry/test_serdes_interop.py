"""millrace's schema-registry serializers and confluent-kafka's, byte for byte, against
``millrace schema-registry`` on a millrace broker.

For each format the two serializers write the same record under the same subject: the
bytes must be equal (the same schema gets the same id, and the encodings agree), and each
side's deserializer reads what the other wrote.  Then whole records: confluent-kafka's
``Producer`` with its ``AvroSerializer`` -> millrace's ``KafkaConsumer`` with
``AvroDeserializer``, and millrace's ``KafkaProducer`` with ``AvroSerializer`` ->
confluent-kafka's ``Consumer`` with its ``AvroDeserializer``; a record that is not in the
wire format fails millrace's consumer naming the topic, partition and offset.

One broker and one registry for the module.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient as CRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer as CAvroDeserializer
from confluent_kafka.schema_registry.avro import AvroSerializer as CAvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer as CJSONDeserializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer as CJSONSerializer
from confluent_kafka.schema_registry.protobuf import (
    ProtobufDeserializer as CProtobufDeserializer,
)
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer as CProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from millrace.client.consumer import KafkaConsumer, RecordDeserializationError
from millrace.client.producer import KafkaProducer, ProducerRecord
from millrace.client.schema_registry.avro import AvroDeserializer, AvroSerializer
from millrace.client.schema_registry.client import SchemaRegistryClient, SchemaRegistryError
from millrace.client.schema_registry.json_schema import (
    JsonSchemaDeserializer,
    JsonSchemaSerializer,
)
from millrace.client.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from millrace.common.topic_partition import TopicPartition
from millrace.testing.broker_process import BrokerProcess
from millrace.testing.schema_registry import SchemaRegistryProcess
from tests.unit.client.schema_registry import protos

pytestmark = [pytest.mark.integration, pytest.mark.compat, pytest.mark.slow]

QUIET = {"log_level": 3, "log.connection.close": False}

ORDER_AVRO = json.dumps({"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "customer", "type": "string"},
    {"name": "amount", "type": "double"},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "status", "type": {"type": "enum", "name": "Status",
                                "symbols": ["NEW", "PAID", "SHIPPED"]}},
    {"name": "note", "type": ["null", "string"], "default": None}]})
ORDERS = [{"id": i, "customer": f"customer-{i}", "amount": 10.25 * i, "tags": ["a", "ü"][:i % 3],
           "status": ["NEW", "PAID", "SHIPPED"][i % 3], "note": None if i % 2 else f"n{i}"}
          for i in range(20)]

ORDER_JSON = json.dumps({
    "$schema": "http://json-schema.org/draft-07/schema#", "title": "shop.Order",
    "type": "object", "required": ["id", "customer"],
    "properties": {"id": {"type": "integer"}, "customer": {"type": "string"},
                   "amount": {"type": "number"}, "tags": {"type": "array",
                                                          "items": {"type": "string"}}}})


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(bootstrap, registry url)."""
    data: Path = tmp_path_factory.mktemp("serdes-interop")
    with BrokerProcess(data / "broker", overrides={"num.partitions": "1"}) as broker, \
            SchemaRegistryProcess(broker.bootstrap, data / "registry") as registry:
        yield broker.bootstrap, registry.url


@pytest.fixture
def ours(stack: tuple[str, str]) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": stack[1]})


@pytest.fixture
def theirs(stack: tuple[str, str]) -> Iterator[CRegistryClient]:
    with CRegistryClient({"url": stack[1]}) as client:  # closes its connection pool
        yield client


def ctx(topic: str) -> SerializationContext:
    return SerializationContext(topic, MessageField.VALUE)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# ---------------------------------------------------------------------------- byte for byte


def test_avro_byte_for_byte(ours: SchemaRegistryClient, theirs: CRegistryClient) -> None:
    topic = unique("avro")
    serializer, c_serializer = AvroSerializer(ours, ORDER_AVRO), CAvroSerializer(theirs,
                                                                                 ORDER_AVRO)
    deserializer, c_deserializer = AvroDeserializer(ours), CAvroDeserializer(theirs)
    for order in ORDERS:
        mine = serializer.serialize(topic, order)
        their = c_serializer(order, ctx(topic))
        assert mine == their
        assert c_deserializer(mine, ctx(topic)) == order
        assert deserializer.deserialize(topic, their) == order
    assert ours.get_subjects().count(f"{topic}-value") == 1
    assert ours.get_versions(f"{topic}-value") == [1]  # one schema, registered once


def test_avro_byte_for_byte_the_other_way_first(ours: SchemaRegistryClient,
                                                theirs: CRegistryClient) -> None:
    """confluent-kafka registers, millrace finds the same id without registering."""
    topic = unique("avro-lookup")
    their = CAvroSerializer(theirs, ORDER_AVRO)(ORDERS[1], ctx(topic))
    mine = AvroSerializer(ours, ORDER_AVRO, conf={"auto.register.schemas": False}).serialize(
        topic, ORDERS[1])
    assert mine == their


def test_avro_record_name_strategy(ours: SchemaRegistryClient, theirs: CRegistryClient) -> None:
    from confluent_kafka.schema_registry import record_subject_name_strategy

    topic = unique("avro-rn")
    mine = AvroSerializer(ours, ORDER_AVRO, conf={
        "subject.name.strategy": "RecordNameStrategy"}).serialize(topic, ORDERS[2])
    their = CAvroSerializer(theirs, ORDER_AVRO, conf={
        "subject.name.strategy": record_subject_name_strategy})(ORDERS[2], ctx(topic))
    assert mine == their
    assert "shop.Order" in ours.get_subjects()


def test_json_schema_byte_for_byte(ours: SchemaRegistryClient, theirs: CRegistryClient) -> None:
    topic = unique("json")
    serializer = JsonSchemaSerializer(ours, ORDER_JSON)
    c_serializer = CJSONSerializer(ORDER_JSON, theirs)
    deserializer = JsonSchemaDeserializer(ours, conf={"validate": True})
    c_deserializer = CJSONDeserializer(None, schema_registry_client=theirs)
    for order in ({"id": 1, "customer": "zoë", "amount": 1.5, "tags": ["x"]},
                  {"id": 2, "customer": "bob"}):
        mine = serializer.serialize(topic, order)
        their = c_serializer(order, ctx(topic))
        assert mine == their
        assert c_deserializer(mine, ctx(topic)) == order
        assert deserializer.deserialize(topic, their) == order


def test_protobuf_byte_for_byte(ours: SchemaRegistryClient, theirs: CRegistryClient) -> None:
    shop = protos.classes(with_import=True)
    topic = unique("proto")
    order = shop.Order(id=7, customer="bob", amount=2.5, total=shop.Money(currency="EUR",
                                                                          cents=250))
    order.lines.add(sku="x", qty=2)
    cases = [(shop.Order, order), (shop.Refund, shop.Refund(order_id=7)),
             (shop.Line, shop.Line(sku="q", qty=1))]
    for cls, message in cases:
        mine = ProtobufSerializer(ours).serialize(topic, message)
        their = CProtobufSerializer(cls, theirs)(message, ctx(topic))
        assert mine == their, cls.DESCRIPTOR.full_name
        assert CProtobufDeserializer(cls)(mine, ctx(topic)) == message
        decoded = ProtobufDeserializer(ours).deserialize(topic, their)  # no generated code
        assert decoded.DESCRIPTOR.full_name == cls.DESCRIPTOR.full_name
        assert decoded.SerializeToString() == message.SerializeToString()
    # the import went in as a reference, under the file's name, as confluent-kafka does it
    assert "shop/money.proto" in ours.get_subjects()
    latest = ours.get_latest_version(f"{topic}-value")
    assert [(r.name, r.subject) for r in latest.schema.references] == \
        [("shop/money.proto", "shop/money.proto")]


# ---------------------------------------------------------------------------- whole records


def read_confluent(bootstrap: str, topic: str, expected: int) -> list[Any]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("g"),
                         "enable.auto.commit": False, **QUIET})
    try:
        consumer.assign([CTopicPartition(topic, 0, 0)])
        out: list[Any] = []
        deadline = time.monotonic() + 60
        while len(out) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                out.append(msg)
        return out
    finally:
        consumer.close()


def read_millrace(bootstrap: str, topic: str, expected: int,
                  deserializer: Any) -> list[Any]:
    with KafkaConsumer(config={"bootstrap.servers": bootstrap, "enable.auto.commit": False},
                       value_deserializer=deserializer) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        out: list[Any] = []
        deadline = time.monotonic() + 60
        while len(out) < expected and time.monotonic() < deadline:
            out.extend(consumer.poll(500))
        return out


def test_confluent_producer_to_millrace_consumer(stack: tuple[str, str],
                                                 ours: SchemaRegistryClient,
                                                 theirs: CRegistryClient) -> None:
    bootstrap, _url = stack
    topic = unique("c2m")
    serializer = CAvroSerializer(theirs, ORDER_AVRO)
    producer = Producer({"bootstrap.servers": bootstrap, **QUIET})
    for order in ORDERS:
        producer.produce(topic, serializer(order, ctx(topic)), partition=0)
    assert producer.flush(30) == 0
    records = read_millrace(bootstrap, topic, len(ORDERS), AvroDeserializer(ours))
    assert [r.value for r in records] == ORDERS


def test_millrace_producer_to_confluent_consumer(stack: tuple[str, str],
                                                 ours: SchemaRegistryClient,
                                                 theirs: CRegistryClient) -> None:
    bootstrap, _url = stack
    topic = unique("m2c")
    with KafkaProducer({"bootstrap.servers": bootstrap},
                       value_serializer=AvroSerializer(ours, ORDER_AVRO)) as producer:
        for order in ORDERS:
            producer.send(ProducerRecord(topic, order, partition=0))
        producer.flush()
    messages = read_confluent(bootstrap, topic, len(ORDERS))
    deserializer = CAvroDeserializer(theirs)
    assert [deserializer(m.value(), ctx(topic)) for m in messages] == ORDERS


def test_a_bad_record_names_topic_partition_and_offset(stack: tuple[str, str],
                                                       ours: SchemaRegistryClient) -> None:
    bootstrap, _url = stack
    topic = unique("bad")
    good = AvroSerializer(ours, ORDER_AVRO).serialize(topic, ORDERS[0])
    producer = Producer({"bootstrap.servers": bootstrap, **QUIET})
    producer.produce(topic, good, partition=0)
    producer.produce(topic, b"\x01" + good[1:], partition=0)  # offset 1: a bad magic byte
    assert producer.flush(30) == 0
    with KafkaConsumer(config={"bootstrap.servers": bootstrap, "enable.auto.commit": False},
                       value_deserializer=AvroDeserializer(ours)) as consumer:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning()
        got: list[Any] = []
        deadline = time.monotonic() + 60
        with pytest.raises(RecordDeserializationError) as e:
            while time.monotonic() < deadline:
                got.extend(consumer.poll(500))
        assert [r.value for r in got] == [ORDERS[0]]  # the good record came first
        assert f"offset 1 of partition {topic}-0" in str(e.value)
        assert "unknown magic byte 0x01" in str(e.value)
        assert (e.value.partition, e.value.offset) == (tp, 1)


# ---------------------------------------------------------------------------- TLS


def test_the_client_over_mutual_tls(tmp_path: Path) -> None:
    """ssl.ca.location verifies the server; ssl.certificate.location and ssl.key.location
    are the client's identity; basic auth rides inside.  A stdlib HTTPS server in a thread
    stands for the registry (this is the client's TLS, not the registry's)."""
    import http.server
    import ssl
    import threading

    from millrace.common.errors import ConfigError
    from millrace.security.certs import CertificateAuthority, write_pem

    ca, other_ca = CertificateAuthority.generate(), CertificateAuthority.generate("other CA")
    server_cert = ca.issue("registry", hosts=["127.0.0.1"])
    client_cert = ca.issue("client")
    for name, data in (("ca.pem", ca.cert_pem), ("other-ca.pem", other_ca.cert_pem),
                       ("server.pem", server_cert.key_and_chain_pem),
                       ("client.crt", client_cert.chain_pem), ("client.key", client_cert.key_pem)):
        write_pem(tmp_path / name, data, private=name.endswith((".key", "server.pem")))
    seen: list[tuple[str | None, Any]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            peer = self.connection.getpeercert()  # type: ignore[attr-defined]
            seen.append((self.headers.get("Authorization"), peer and peer["subject"]))
            body = b'["orders-value"]'
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(tmp_path / "server.pem")
    tls.load_verify_locations(tmp_path / "ca.pem")
    tls.verify_mode = ssl.CERT_OPTIONAL
    server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"https://127.0.0.1:{server.server_address[1]}"
    try:
        client = SchemaRegistryClient({
            "url": url, "ssl.ca.location": str(tmp_path / "ca.pem"),
            "ssl.certificate.location": str(tmp_path / "client.crt"),
            "ssl.key.location": str(tmp_path / "client.key"),
            "basic.auth.user.info": "alice:s3cret"})
        assert client.get_subjects() == ["orders-value"]
        auth, subject = seen[-1]
        assert auth == "Basic YWxpY2U6czNjcmV0"
        assert ((("commonName", "client"),) in subject)
        # negative control: a CA that did not sign the server's certificate
        untrusting = SchemaRegistryClient({"url": url,
                                           "ssl.ca.location": str(tmp_path / "other-ca.pem")})
        with pytest.raises(SchemaRegistryError, match="CERTIFICATE_VERIFY_FAILED") as e:
            untrusting.get_subjects()
        assert url in str(e.value)
    finally:
        server.shutdown()
        server.server_close()
    with pytest.raises(ConfigError, match=r"ssl\.ca\.location"):
        SchemaRegistryClient({"url": url, "ssl.ca.location": str(tmp_path / "missing.pem")})


def test_serializers_by_name_from_the_clients_configs_alone(stack: tuple[str, str]) -> None:
    """``value.serializer=avro`` with the registry's keys in the producer's config (as a
    properties file would give them), read back by ``value.deserializer=avro``."""
    bootstrap, url = stack
    topic = unique("by-name")
    with KafkaProducer({"bootstrap.servers": bootstrap, "value.serializer": "avro",
                        "schema.registry.url": url,
                        "value.serializer.schema": ORDER_AVRO}) as producer:
        for order in ORDERS[:5]:
            producer.send(ProducerRecord(topic, order))
        producer.flush()
    consumer: KafkaConsumer[Any, Any] = KafkaConsumer(config={
        "bootstrap.servers": bootstrap, "value.deserializer": "avro",
        "schema.registry.url": url, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, 0)])
        got: list[Any] = []
        deadline = time.monotonic() + 60
        while len(got) < 5 and time.monotonic() < deadline:
            got += [r.value for r in consumer.poll(1000)]
    finally:
        consumer.close()
    assert got == ORDERS[:5]
    with pytest.raises(Exception, match=r"needs schema\.registry\.url"):  # a misspelt key
        KafkaProducer({"bootstrap.servers": bootstrap, "value.serializer": "avro",
                       "schema.registry.ulr": url})
