"""Avro values through Spark with ``millrace schema-registry``: the source, the sink and the
pipeline's schema evolution, against a real broker, a real registry and real Spark.

- The source reads what confluent-kafka's ``AvroSerializer`` wrote (two versions of the
  subject, the old records resolved to the new one), names an undecodable record by
  topic, partition and offset (FAILFAST) or keeps it as a ``decodeError`` row
  (PERMISSIVE); the sink's Avro is read by confluent-kafka's ``AvroDeserializer``.
- The source reads confluent-kafka's ``JSONSerializer`` and ``ProtobufSerializer`` too;
  the sink's JSON Schema and Protobuf values are read by its ``JSONDeserializer`` and
  ``ProtobufDeserializer``.
- ``millrace demo --value-format avro`` on the module's broker and registry: the order
  schema evolved half-way, the tables (coupons included) verified against the events.
- ``millrace pipeline run --value-format avro`` in a child process (processing-time
  trigger): version 1 records reach the table; version 2 (an added optional ``coupon``)
  is registered and written while the query runs -> the query restarts from its
  checkpoint, the table gains ``coupon`` (old rows null), nothing is lost or doubled; a
  record that is not Avro goes to the dead-letter topic; then an incompatible version 3
  (registered with compatibility NONE) stops the run naming subject and version.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest
from pipeline_events import PipelineChild, create_topic

from millrace.client.consumer import KafkaConsumer
from millrace.client.producer import KafkaProducer, ProducerRecord
from millrace.common.topic_partition import TopicPartition
from millrace.spark.sinks import open_database
from millrace.testing.broker_process import BrokerProcess
from millrace.testing.schema_registry import SchemaRegistryProcess

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [
    pytest.mark.integration, pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]

T = TypeVar("T")
WAIT_S = 300.0
ORDER_V1 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "order_id", "type": "string"},
    {"name": "quantity", "type": "int"},
    {"name": "price", "type": "double"},
    {"name": "event_time", "type": {"type": "long", "logicalType": "timestamp-millis"}},
]}
ORDER_V2 = {**ORDER_V1, "fields": [*ORDER_V1["fields"],
                                   {"name": "coupon", "type": ["null", "string"],
                                    "default": None}]}
ORDER_V3 = {**ORDER_V1, "fields": [{"name": "order_id", "type": "long"},
                                   *ORDER_V1["fields"][1:]]}


@pytest.fixture(scope="module")
def registry(broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[SchemaRegistryProcess]:
    with SchemaRegistryProcess(broker.bootstrap, tmp_path_factory.mktemp("registry")) as r:
        yield r


def until(what: str, condition: Callable[[], T | None], timeout: float = WAIT_S) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.5)


def order(n: int, **extra: Any) -> dict[str, Any]:
    return {"order_id": f"o{n}", "quantity": n, "price": 2.5 * n,
            "event_time": dt.datetime(2026, 1, 1, 9, 0, n % 60, tzinfo=dt.UTC), **extra}


class ConfluentAvro:
    """confluent-kafka's serializer against the registry: the judge of the wire format.
    Its client keeps HTTP connections open: ``close`` (the context manager) ends them."""

    def __init__(self, url: str, topic: str) -> None:
        from confluent_kafka.schema_registry import SchemaRegistryClient

        self.client = SchemaRegistryClient({"url": url})
        self.topic = topic

    def __enter__(self) -> ConfluentAvro:
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close()

    def serializer(self, schema: dict[str, Any]) -> Callable[[dict[str, Any]], bytes]:
        from confluent_kafka.schema_registry.avro import AvroSerializer
        from confluent_kafka.serialization import MessageField, SerializationContext

        serializer = AvroSerializer(self.client, json.dumps(schema))
        context = SerializationContext(self.topic, MessageField.VALUE)
        return lambda datum: serializer(datum, context)


def produce(bootstrap: str, topic: str, values: list[bytes], partition: int = 0) -> None:
    producer: KafkaProducer[bytes, bytes] = KafkaProducer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    with producer:
        futures = [producer.send(ProducerRecord(topic, v, key=str(i).encode(),
                                                partition=partition))
                   for i, v in enumerate(values)]
        producer.flush()
    for future in futures:
        future.get()


def read_topic(bootstrap: str, topic: str) -> list[Any]:
    tp = TopicPartition(topic, 0)
    consumer: KafkaConsumer[bytes, bytes] = KafkaConsumer({"bootstrap.servers": bootstrap})
    with consumer:
        consumer.assign([tp])
        consumer.seek_to_beginning([tp])
        end = consumer.end_offsets([tp])[tp]
        out: list[Any] = []
        deadline = time.monotonic() + 60
        while consumer.position(tp) < end:
            assert time.monotonic() < deadline, f"{topic} did not read to its end"
            out.extend(consumer.poll(200))
    return out


# ---------------------------------------------------------------------------- source, sink
def test_source_reads_confluent_avro_and_the_sink_writes_it(
        spark: SparkSession, broker: BrokerProcess, registry: SchemaRegistryProcess) -> None:
    topic = "avro-source"
    create_topic(broker.bootstrap, topic, 1)
    with ConfluentAvro(registry.url, topic) as avro:
        check_source_and_sink(spark, broker, registry, avro)


def check_source_and_sink(spark: SparkSession, broker: BrokerProcess,
                          registry: SchemaRegistryProcess, avro: ConfluentAvro) -> None:
    topic = avro.topic
    v1, v2 = avro.serializer(ORDER_V1), avro.serializer(ORDER_V2)
    produce(broker.bootstrap, topic, [v1(order(1)), v1(order(2)), v2(order(3, coupon="C3"))])
    options = {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic,
               "valueFormat": "avro", "schema.registry.url": registry.url}
    frame = spark.read.format("millrace").options(**options).load()
    assert frame.schema["value"].dataType.simpleString() == (
        "struct<order_id:string,quantity:int,price:double,event_time:timestamp,"
        "coupon:string>")
    rows = frame.select("value.*", "offset").orderBy("offset").collect()
    assert [(r.order_id, r.quantity, r.price, r.coupon) for r in rows] == [
        ("o1", 1, 2.5, None), ("o2", 2, 5.0, None), ("o3", 3, 7.5, "C3")]
    assert rows[2].event_time.replace(tzinfo=dt.UTC) == order(3)["event_time"]

    # a record that is not in the wire format: named (FAILFAST) or kept (PERMISSIVE)
    produce(broker.bootstrap, topic, [b'{"order_id": "o4"}'])
    with pytest.raises(Exception, match=rf"bad record {topic}-0@3: value does not decode: "
                                        r"unknown magic byte 0x7b"):
        spark.read.format("millrace").options(**options).load().collect()
    kept = (spark.read.format("millrace").options(**options, mode="PERMISSIVE").load()
            .orderBy("offset").collect())
    assert [r.decodeError is None for r in kept] == [True, True, True, False]
    assert kept[3].value is None and kept[3].decodeError.value == b'{"order_id": "o4"}'

    # the sink: a struct column as Avro under <topic>-value, read by confluent-kafka
    out = "avro-sink"
    create_topic(broker.bootstrap, out, 1)
    (frame.where("offset < 3").selectExpr("value")
     .write.format("millrace").mode("append")
     .option("kafka.bootstrap.servers", broker.bootstrap)
     .option("topic", out).option("valueFormat", "avro")
     .option("schema.registry.url", registry.url).save())
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    deserialize = AvroDeserializer(avro.client)
    context = SerializationContext(out, MessageField.VALUE)
    written = sorted((deserialize(r.value, context) for r in read_topic(broker.bootstrap, out)),
                     key=lambda d: d["order_id"])
    assert [(d["order_id"], d["quantity"], d["coupon"]) for d in written] == [
        ("o1", 1, None), ("o2", 2, None), ("o3", 3, "C3")]
    assert written[0]["event_time"] == order(1)["event_time"]
    assert avro.client.get_latest_version(f"{out}-value").version == 1


def test_source_reads_confluent_json_schema_and_protobuf(
        spark: SparkSession, broker: BrokerProcess, registry: SchemaRegistryProcess) -> None:
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    document = {"type": "object", "title": "Order", "required": ["order_id"], "properties": {
        "order_id": {"type": "string"}, "quantity": {"type": "integer"},
        "at": {"type": "string", "format": "date-time"}}}
    fdp = descriptor_pb2.FileDescriptorProto(name="order.proto", package="shop",
                                             syntax="proto3")
    message = fdp.message_type.add(name="Order")
    F = descriptor_pb2.FieldDescriptorProto
    message.field.add(name="order_id", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    message.field.add(name="quantity", number=2, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    order_class = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))
    with ConfluentAvro(registry.url, "json-orders") as confluent:
        for topic, fmt in (("json-orders", "json-schema"), ("proto-orders", "protobuf")):
            create_topic(broker.bootstrap, topic, 1)
            context = SerializationContext(topic, MessageField.VALUE)
            if fmt == "json-schema":
                to_json = JSONSerializer(json.dumps(document), confluent.client)
                values = [to_json({"order_id": f"o{n}", "quantity": n,
                                   "at": f"2026-01-01T09:00:0{n}Z"}, context)
                          for n in (1, 2)]
                expected = [("o1", 1), ("o2", 2)]
            else:
                to_proto = ProtobufSerializer(order_class, confluent.client,
                                              {"use.deprecated.format": False})
                values = [to_proto(order_class(order_id=f"p{n}", quantity=n), context)
                          for n in (1, 2)]
                expected = [("p1", 1), ("p2", 2)]
            produce(broker.bootstrap, topic, values)
            frame = (spark.read.format("millrace")
                     .option("kafka.bootstrap.servers", broker.bootstrap)
                     .option("subscribe", topic).option("valueFormat", fmt)
                     .option("schema.registry.url", registry.url).load())
            got = frame.select("value.*").orderBy("value.order_id").collect()
            assert [(r.order_id, r.quantity) for r in got] == expected, fmt
            if fmt == "json-schema":
                assert got[1].at.replace(tzinfo=dt.UTC) == dt.datetime(2026, 1, 1, 9, 0, 2,
                                                                       tzinfo=dt.UTC)
                check_json_schema_sink(broker, registry, confluent, frame)
            else:
                check_protobuf_sink(broker, registry, confluent, frame)


def write_values(frame: Any, broker: BrokerProcess, registry: SchemaRegistryProcess, out: str,
                 fmt: str) -> None:
    """``frame``'s value column into a new topic ``out`` through the sink, encoded as
    ``fmt`` under a schema derived from its type (record name Order)."""
    create_topic(broker.bootstrap, out, 1)
    (frame.selectExpr("value").write.format("millrace").mode("append")
     .option("kafka.bootstrap.servers", broker.bootstrap)
     .option("topic", out).option("valueFormat", fmt).option("recordName", "Order")
     .option("schema.registry.url", registry.url).save())


def check_json_schema_sink(broker: BrokerProcess, registry: SchemaRegistryProcess,
                           confluent: ConfluentAvro, frame: Any) -> None:
    """The sink's JSON Schema values, read by confluent-kafka's JSONDeserializer (which
    validates each against the schema registered for the subject)."""
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    out = "json-sink"
    write_values(frame, broker, registry, out, "json-schema")
    registered = confluent.client.get_latest_version(f"{out}-value")
    assert registered.schema.schema_type == "JSON" and registered.version == 1
    document = json.loads(registered.schema.schema_str)
    deserialize = JSONDeserializer(json.dumps(document), schema_registry_client=confluent.client)
    context = SerializationContext(out, MessageField.VALUE)
    written = sorted((deserialize(r.value, context) for r in read_topic(broker.bootstrap, out)),
                     key=lambda d: d["order_id"])
    assert written == [
        {"order_id": "o1", "quantity": 1, "at": "2026-01-01T09:00:01+00:00"},
        {"order_id": "o2", "quantity": 2, "at": "2026-01-01T09:00:02+00:00"}]


def check_protobuf_sink(broker: BrokerProcess, registry: SchemaRegistryProcess,
                        confluent: ConfluentAvro, frame: Any) -> None:
    """The sink's Protobuf values, read by confluent-kafka's ProtobufDeserializer with a
    message class built from the file descriptor registered for the subject."""
    import base64

    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    out = "proto-sink"
    write_values(frame, broker, registry, out, "protobuf")
    registered = confluent.client.get_latest_version(f"{out}-value")
    assert registered.schema.schema_type == "PROTOBUF" and registered.version == 1
    pool = descriptor_pool.DescriptorPool()
    pool.Add(descriptor_pb2.FileDescriptorProto.FromString(
        base64.b64decode(registered.schema.schema_str)))
    order_class = message_factory.GetMessageClass(pool.FindMessageTypeByName("millrace.Order"))
    deserialize = ProtobufDeserializer(order_class, {"use.deprecated.format": False})
    context = SerializationContext(out, MessageField.VALUE)
    written = sorted((m.order_id, m.quantity) for m in (
        deserialize(r.value, context) for r in read_topic(broker.bootstrap, out)))
    assert written == [("p1", 1), ("p2", 2)]


# ---------------------------------------------------------------------------- pipeline
def rows(database: str, sql: str) -> list[tuple[Any, ...]]:
    with open_database(database) as db:
        try:
            return [tuple(r) for r in db.query(sql)]
        except Exception:  # the table is not there yet
            return []


def test_pipeline_restarts_on_an_added_field_and_stops_on_an_incompatible_one(
        broker: BrokerProcess, registry: SchemaRegistryProcess, tmp_path: Path) -> None:
    topic, dead = "avro-orders", "avro-orders-dead"
    create_topic(broker.bootstrap, topic, 1)
    create_topic(broker.bootstrap, dead, 1)
    with ConfluentAvro(registry.url, topic) as avro:
        check_pipeline(broker, registry, avro, dead, tmp_path)


def check_pipeline(broker: BrokerProcess, registry: SchemaRegistryProcess, avro: ConfluentAvro,
                   dead: str, tmp_path: Path) -> None:
    topic = avro.topic
    v1 = avro.serializer(ORDER_V1)
    produce(broker.bootstrap, topic, [v1(order(n)) for n in range(1, 6)] + [b"not avro"])
    database = f"sqlite:///{tmp_path / 'avro.db'}"
    child = PipelineChild([
        "--bootstrap-server", broker.bootstrap, "--topic", topic, "--name", "avro",
        "--option", "startingOffsets=earliest", "--value-format", "avro",
        "--schema-registry-url", registry.url, "--state-table", "orders",
        "--key", "order_id", "--errors-tolerance", "all", "--dead-letter-topic", dead,
        "--database", database, "--checkpoint", str(tmp_path / "checkpoints"),
        "--trigger", "processing-time=1s", "--output", "json", "--timeout", str(WAIT_S)],
        tmp_path / "pipeline.log")
    try:
        until("the version 1 rows", lambda: len(rows(
            database, "SELECT order_id FROM orders")) == 5 or child.proc.poll() is not None)
        assert child.proc.poll() is None, child.output()
        assert "coupon" not in {c for (_, c, *_) in rows(database, "PRAGMA table_info(orders)")}

        # version 2 while the query runs: the query restarts with the coupon column
        v2 = avro.serializer(ORDER_V2)
        produce(broker.bootstrap, topic, [v2(order(n, coupon=f"C{n}")) for n in (6, 7)]
                + [v1(order(8))])
        until("the version 2 rows", lambda: len(rows(
            database, "SELECT order_id FROM orders")) == 8 or child.proc.poll() is not None)
        assert child.proc.poll() is None, child.output()
        table = sorted(rows(database, "SELECT order_id, quantity, price, coupon, \"offset\" "
                                      "FROM orders"))
        assert table == sorted([(f"o{n}", n, 2.5 * n, None, n - 1) for n in range(1, 6)]
                               + [("o6", 6, 15.0, "C6", 6), ("o7", 7, 17.5, "C7", 7),
                                  ("o8", 8, 20.0, None, 8)])
        changes = [json.loads(line)["change"] for line in child.output().splitlines()
                   if line.startswith('{"event": "schema_change"')]
        assert changes == [f"subject {topic}-value version 1 -> 2 (first seen at "
                           f"{topic}-0@6): added coupon"]
        dead_letters = read_topic(broker.bootstrap, dead)
        assert [(r.value, dict(r.headers)["__connect.errors.offset"]) for r in dead_letters] \
            == [(b"not avro", b"5")]

        # version 3 changes a field's type: registered with compatibility NONE, it stops
        # the run naming the subject and the version
        avro.client.set_compatibility(f"{topic}-value", "NONE")
        v3 = avro.serializer(ORDER_V3)
        produce(broker.bootstrap, topic, [v3({**order(9), "order_id": 9})])
        code = child.proc.wait(WAIT_S)
    finally:
        if child.proc.poll() is None:
            child.kill()
    output = child.output()
    assert code != 0, output
    assert (f"subject {topic}-value version 3 is incompatible with version 2 the query "
            "reads: field order_id changed type from string to bigint") in output
    assert len(rows(database, "SELECT order_id FROM orders")) == 8  # nothing of version 3


# ---------------------------------------------------------------------------- demo
def test_demo_with_avro_values(broker: BrokerProcess, registry: SchemaRegistryProcess,
                               tmp_path: Path) -> None:
    topic = "demo-avro-orders"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "millrace.cli.main", "demo", "--value-format", "avro",
         "--schema-registry-url", registry.url, "--bootstrap-server", broker.bootstrap,
         "--topic", topic, "--events", "1500", "--partitions", "2",
         "--data-dir", str(tmp_path), "--database", f"sqlite:///{tmp_path / 'demo.db'}",
         "--output", "json"], capture_output=True, text=True, timeout=WAIT_S, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["verification"]["passed"], summary["verification"]
    assert summary["value_format"] == "avro" and summary["schema_registry_url"] == registry.url
    assert any(f"{topic}-value evolved at event 750: version 2" in n for n in summary["notes"])
    with ConfluentAvro(registry.url, topic) as avro:
        assert avro.client.get_latest_version(f"{topic}-value").version == 2
    coupons = dict(rows(f"sqlite:///{tmp_path / 'demo.db'}",
                        "SELECT coupon, COUNT(*) FROM orders GROUP BY coupon"))
    assert coupons.get("WELCOME10", 0) > 0 and coupons.get(None, 0) > 0, coupons
