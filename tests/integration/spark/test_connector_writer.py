"""df.write / df.writeStream .format("millrace") against a real broker: rows round-trip
through a topic with their keys, partitions and headers; bad input fails clearly."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from millrace.client.admin import KafkaAdminClient, NewTopic
from millrace.client.producer import KafkaProducer, ProducerRecord
from millrace.testing.broker_process import BrokerProcess

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = [pytest.mark.integration]


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    with KafkaAdminClient(bootstrap_servers=broker.bootstrap) as client:
        yield client


def read_back(spark: SparkSession, broker: BrokerProcess, topic: str) -> DataFrame:
    return (spark.read.format("millrace").option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", topic).option("includeHeaders", "true").load())


def test_batch_write_round_trips_rows(spark: SparkSession, broker: BrokerProcess,
                                      admin: KafkaAdminClient) -> None:
    admin.create_topics([NewTopic("write-batch", num_partitions=3)]).all()
    df = spark.createDataFrame(
        [(f"k{i}", f"value-{i}", i % 3) for i in range(30)],
        "key string, value string, partition int")
    df = df.selectExpr("key", "value", "partition",
                       "array(named_struct('key', 'n', 'value', CAST(key AS BINARY))) "
                       "AS headers")
    (df.write.format("millrace").option("kafka.bootstrap.servers", broker.bootstrap)
     .option("topic", "write-batch").mode("append").save())
    rows = read_back(spark, broker, "write-batch").collect()
    got = sorted((r.key, r.value, r.partition, [(h.key, h.value) for h in r.headers])
                 for r in rows)
    assert got == sorted((b"k%d" % i, b"value-%d" % i, i % 3, [("n", b"k%d" % i)])
                         for i in range(30))


def test_topic_column_and_null_keys(spark: SparkSession, broker: BrokerProcess,
                                    admin: KafkaAdminClient) -> None:
    admin.create_topics([NewTopic("write-col-a", num_partitions=1),
                         NewTopic("write-col-b", num_partitions=1)]).all()
    df = spark.createDataFrame([("write-col-a", None, b"\x00\x01"),
                                ("write-col-b", b"k", b"\xff")],
                               "topic string, key binary, value binary")
    df.write.format("millrace").mode("append").option("kafka.bootstrap.servers",
                                                     broker.bootstrap).save()
    a = read_back(spark, broker, "write-col-a").collect()
    b = read_back(spark, broker, "write-col-b").collect()
    assert [(r.key, r.value) for r in a] == [(None, b"\x00\x01")]
    assert [(r.key, r.value) for r in b] == [(b"k", b"\xff")]


def test_streaming_write_copies_a_topic(spark: SparkSession, broker: BrokerProcess,
                                        admin: KafkaAdminClient, tmp_path: Path) -> None:
    admin.create_topics([NewTopic("write-src", num_partitions=2),
                         NewTopic("write-dst", num_partitions=2)]).all()
    with KafkaProducer({"bootstrap.servers": broker.bootstrap}) as producer:
        for i in range(40):
            producer.send(ProducerRecord("write-src", b"v%d" % i, b"k%d" % i, i % 2))
        producer.flush()
    source = (spark.readStream.format("millrace")
              .option("kafka.bootstrap.servers", broker.bootstrap)
              .option("subscribe", "write-src").option("startingOffsets", "earliest").load())
    query = (source.selectExpr("key", "value", "partition").writeStream.format("millrace")
             .option("kafka.bootstrap.servers", broker.bootstrap).option("topic", "write-dst")
             .option("checkpointLocation", str(tmp_path / "ck"))
             .trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    rows = read_back(spark, broker, "write-dst").collect()
    assert sorted((r.partition, r.key, r.value) for r in rows) == \
        sorted((i % 2, b"k%d" % i, b"v%d" % i) for i in range(40))


def test_bad_input_fails_clearly(spark: SparkSession, broker: BrokerProcess) -> None:
    no_value = spark.createDataFrame([("x",)], "data string")
    with pytest.raises(Exception, match="Required column 'value' not found"):
        (no_value.write.format("millrace").mode("append")
         .option("kafka.bootstrap.servers", broker.bootstrap).option("topic", "t").save())
    values = spark.createDataFrame([("x",)], "value string")
    with pytest.raises(Exception, match="No topic to write to"):
        (values.write.format("millrace").mode("append")
         .option("kafka.bootstrap.servers", broker.bootstrap).save())
    with pytest.raises(Exception, match=r"'kafka.key.serializer' is not supported"):
        (values.write.format("millrace").mode("append")
         .option("kafka.bootstrap.servers", broker.bootstrap).option("topic", "t")
         .option("kafka.key.serializer", "x").save())
    with pytest.raises(Exception, match=r"Writing to Kafka failed: .*INVALID_TOPIC_EXCEPTION"):
        (values.write.format("millrace").mode("append")
         .option("kafka.bootstrap.servers", broker.bootstrap)
         .option("topic", "bad topic name!").option("kafka.max.block.ms", "3000").save())
