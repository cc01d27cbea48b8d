"""spark.read.format("millrace") against a real broker: the records, the columns, the
offset options, minPartitions, data loss and option errors."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from millrace.client.admin import KafkaAdminClient, NewTopic, TopicPartition
from millrace.client.producer import KafkaProducer, ProducerRecord
from millrace.testing.broker_process import BrokerProcess

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = [pytest.mark.integration]

UTC = datetime.UTC


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    with KafkaAdminClient(bootstrap_servers=broker.bootstrap) as client:
        yield client


def create(admin: KafkaAdminClient, topic: str, partitions: int) -> None:
    admin.create_topics([NewTopic(topic, num_partitions=partitions)]).all()


def produce(broker: BrokerProcess, records: list[ProducerRecord[bytes, bytes]]) -> None:
    with KafkaProducer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0}) as producer:
        for record in records:
            producer.send(record)
        producer.flush()


def read(spark: SparkSession, broker: BrokerProcess, **options: str) -> DataFrame:
    reader = spark.read.format("millrace").option("kafka.bootstrap.servers", broker.bootstrap)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def values(df: DataFrame) -> list[tuple[int, int, bytes]]:
    return sorted((r.partition, r.offset, r.value) for r in df.collect())


def test_batch_read_returns_exactly_the_records_with_sparks_columns(
        spark: SparkSession, broker: BrokerProcess, admin: KafkaAdminClient) -> None:
    create(admin, "batch-all", 2)
    produce(broker, [
        ProducerRecord("batch-all", b"v0", b"k0", 0, 1_700_000_000_000,
                       [("trace", b"t-1"), ("empty", None)]),
        ProducerRecord("batch-all", b"v1", None, 0, 1_700_000_000_001),
        ProducerRecord("batch-all", None, b"k2", 1, 1_700_000_000_002),
    ])
    df = read(spark, broker, subscribe="batch-all", includeHeaders="true")
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int,headers:array<struct<key:string,"
        "value:binary>>>")
    rows = sorted(df.collect(), key=lambda r: (r.partition, r.offset))
    first = datetime.datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)
    got = [(r.key, r.value, r.topic, r.partition, r.offset,
            r.timestamp.replace(tzinfo=UTC), r.timestampType,
            None if r.headers is None else [(h.key, h.value) for h in r.headers])
           for r in rows]
    ms = datetime.timedelta(milliseconds=1)
    assert got == [
        (b"k0", b"v0", "batch-all", 0, 0, first, 0, [("trace", b"t-1"), ("empty", None)]),
        (None, b"v1", "batch-all", 0, 1, first + ms, 0, None),
        (b"k2", None, "batch-all", 1, 0, first + 2 * ms, 0, None),
    ]
    plain = read(spark, broker, subscribe="batch-all")
    assert "headers" not in plain.columns and plain.count() == 3


def test_offset_options(spark: SparkSession, broker: BrokerProcess,
                        admin: KafkaAdminClient) -> None:
    create(admin, "batch-offsets", 2)
    produce(broker, [ProducerRecord("batch-offsets", b"%d-%d" % (p, i), None, p,
                                    1_000_000 + 1000 * i)
                     for p in (0, 1) for i in range(5)])
    everything = values(read(spark, broker, subscribe="batch-offsets"))
    assert len(everything) == 10
    assert values(read(spark, broker, subscribe="batch-offsets", startingOffsets="earliest",
                       endingOffsets="latest")) == everything
    ranged = read(spark, broker, subscribe="batch-offsets",
                  startingOffsets='{"batch-offsets":{"0":1,"1":-2}}',
                  endingOffsets='{"batch-offsets":{"0":3,"1":-1}}')
    assert values(ranged) == [(0, 1, b"0-1"), (0, 2, b"0-2")] + \
        [(1, i, b"1-%d" % i) for i in range(5)]
    by_time = read(spark, broker, subscribe="batch-offsets", startingTimestamp="1002500",
                   endingOffsetsByTimestamp='{"batch-offsets":{"0":1004000,"1":9999999}}')
    assert values(by_time) == [(0, 3, b"0-3"), (1, 3, b"1-3"), (1, 4, b"1-4")]
    assigned = read(spark, broker, assign='{"batch-offsets":[1]}')
    assert values(assigned) == [(1, i, b"1-%d" % i) for i in range(5)]
    pattern = read(spark, broker, subscribePattern="batch-off.*")
    assert values(pattern) == everything
    assert read(spark, broker, subscribe="no-such-topic").collect() == []


def test_min_partitions_splits_ranges_without_changing_the_records(
        spark: SparkSession, broker: BrokerProcess, admin: KafkaAdminClient) -> None:
    create(admin, "batch-split", 1)
    produce(broker, [ProducerRecord("batch-split", b"%d" % i, None, 0) for i in range(200)])
    df = read(spark, broker, subscribe="batch-split", minPartitions="4")
    assert df.rdd.getNumPartitions() == 4
    assert values(df) == [(0, i, b"%d" % i) for i in range(200)]


def test_max_partitions_groups_ranges_without_changing_the_records(
        spark: SparkSession, broker: BrokerProcess, admin: KafkaAdminClient) -> None:
    create(admin, "batch-group", 5)
    produce(broker, [ProducerRecord("batch-group", b"%d-%d" % (p, i), None, p)
                     for p in range(5) for i in range(10 + 10 * p)])
    everything = [(p, i, b"%d-%d" % (p, i)) for p in range(5) for i in range(10 + 10 * p)]
    df = read(spark, broker, subscribe="batch-group", maxPartitions="2")
    assert df.rdd.getNumPartitions() == 2
    assert values(df) == everything
    # each task reads whole ranges: every partition's records in one Spark partition
    spread = df.rdd.mapPartitions(lambda rows: [sorted({r.partition for r in rows})]).collect()
    assert sorted(p for ps in spread for p in ps) == list(range(5))
    assert read(spark, broker, subscribe="batch-group", maxPartitions="9").rdd \
        .getNumPartitions() == 5


def test_deleted_records_fail_the_read_unless_fail_on_data_loss_is_false(
        spark: SparkSession, broker: BrokerProcess, admin: KafkaAdminClient) -> None:
    create(admin, "batch-loss", 1)
    produce(broker, [ProducerRecord("batch-loss", b"%d" % i, None, 0) for i in range(10)])
    admin.delete_records({TopicPartition("batch-loss", 0): 4}).all()
    start = '{"batch-loss":{"0":1}}'
    with pytest.raises(Exception, match=r"Offsets 1 to 4 of partition batch-loss-0 were "
                                         "deleted before they could be read"):
        read(spark, broker, subscribe="batch-loss", startingOffsets=start).collect()
    lenient = read(spark, broker, subscribe="batch-loss", startingOffsets=start,
                   failOnDataLoss="false")
    assert values(lenient) == [(0, i, b"%d" % i) for i in range(4, 10)]


@pytest.mark.parametrize("options, message", [
    ({}, "Exactly one of the options 'subscribe', 'subscribePattern' or 'assign'"),
    ({"subscribe": "t", "startingOffsets": "latest"},
     "a batch query cannot start at the latest offsets"),
    ({"subscribe": "t", "kafka.group.id": "g"}, "Kafka option 'kafka.group.id' is not "
                                                "supported"),
    ({"subscribe": "t", "failOnDataLoss": "maybe"}, "option 'failOnDataLoss'"),
])
def test_bad_options_fail_with_a_clear_message(spark: SparkSession, broker: BrokerProcess,
                                               options: dict[str, Any], message: str) -> None:
    with pytest.raises(Exception, match=message):
        read(spark, broker, **options).collect()
