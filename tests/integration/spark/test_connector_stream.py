"""spark.readStream.format("millrace") against a real broker: exact records, read limits,
restarts from a checkpoint, new partitions and topics, data loss."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from millrace.client.admin import KafkaAdminClient, NewPartitions, NewTopic, TopicPartition
from millrace.client.producer import KafkaProducer, ProducerRecord
from millrace.testing.broker_process import BrokerProcess

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

pytestmark = [pytest.mark.integration]


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    with KafkaAdminClient(bootstrap_servers=broker.bootstrap) as client:
        yield client


def create(admin: KafkaAdminClient, topic: str, partitions: int) -> None:
    admin.create_topics([NewTopic(topic, num_partitions=partitions)]).all()


def produce(broker: BrokerProcess, topic: str, partition: int, values: range) -> None:
    with KafkaProducer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0}) as producer:
        for i in values:
            producer.send(ProducerRecord(topic, b"%d" % i, None, partition))
        producer.flush()


def stream(spark: SparkSession, broker: BrokerProcess, **options: str) -> DataFrame:
    reader = (spark.readStream.format("millrace")
              .option("kafka.bootstrap.servers", broker.bootstrap))
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


class Collector:
    """foreachBatch target: every micro-batch's rows, by batch id (runs on the driver)."""

    def __init__(self) -> None:
        self.batches: dict[int, list[tuple[str, int, int, bytes]]] = {}

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        self.batches[batch_id] = [(r.topic, r.partition, r.offset, r.value)
                                  for r in df.collect()]

    def rows(self) -> list[tuple[str, int, int, bytes]]:
        return sorted(row for rows in self.batches.values() for row in rows)


def run_available_now(df: DataFrame, checkpoint: Path, collector: Collector) -> StreamingQuery:
    query = (df.writeStream.foreachBatch(collector)
             .option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert not query.isActive
    return query


def expected(topic: str, partition: int, values: range, first_offset: int = 0
             ) -> list[tuple[str, int, int, bytes]]:
    return [(topic, partition, first_offset + n, b"%d" % i) for n, i in enumerate(values)]


def test_stream_reads_exactly_the_records_within_max_offsets_per_trigger(
        spark: SparkSession, broker: BrokerProcess, admin: KafkaAdminClient,
        tmp_path: Path) -> None:
    create(admin, "stream-limit", 2)
    produce(broker, "stream-limit", 0, range(0, 30))
    produce(broker, "stream-limit", 1, range(100, 110))
    collector = Collector()
    df = stream(spark, broker, subscribe="stream-limit", startingOffsets="earliest",
                maxOffsetsPerTrigger="8")
    query = run_available_now(df, tmp_path / "ck", collector)
    assert collector.rows() == sorted(expected("stream-limit", 0, range(0, 30))
                                      + expected("stream-limit", 1, range(100, 110)))
    sizes = [len(rows) for _, rows in sorted(collector.batches.items())]
    assert sizes == [8, 8, 8, 8, 8]
    progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
    assert [p["numInputRows"] for p in progress] == sizes
    # the latest offsets reported are the true ends of the partitions
    last = progress[-1]["sources"][0]
    assert json.loads(last["latestOffset"]) == {"stream-limit": {"0": 30, "1": 10}}
    assert json.loads(last["endOffset"]) == {"stream-limit": {"0": 30, "1": 10}}


def test_restart_from_checkpoint_reads_only_new_records_and_new_partitions(
        spark: SparkSession, broker: BrokerProcess, admin: KafkaAdminClient,
        tmp_path: Path) -> None:
    create(admin, "stream-restart", 1)
    produce(broker, "stream-restart", 0, range(0, 5))
    df = stream(spark, broker, subscribe="stream-restart", startingOffsets="earliest")
    first = Collector()
    run_available_now(df, tmp_path / "ck", first)
    assert first.rows() == expected("stream-restart", 0, range(0, 5))

    produce(broker, "stream-restart", 0, range(5, 8))
    admin.create_partitions({"stream-restart": NewPartitions(2)}).all()
    produce(broker, "stream-restart", 1, range(50, 53))
    second = Collector()
    run_available_now(df, tmp_path / "ck", second)
    assert second.rows() == expected("stream-restart", 0, range(5, 8), 5) + \
        expected("stream-restart", 1, range(50, 53))

    third = Collector()
    run_available_now(df, tmp_path / "ck", third)
    assert third.rows() == []


def test_pattern_picks_up_new_topics_and_latest_skips_old_records(
        spark: SparkSession, broker: BrokerProcess, admin: KafkaAdminClient,
        tmp_path: Path) -> None:
    create(admin, "pat-a", 1)
    produce(broker, "pat-a", 0, range(0, 3))
    df = stream(spark, broker, subscribePattern="pat-.*")  # startingOffsets: latest
    first = Collector()
    run_available_now(df, tmp_path / "ck", first)
    assert first.rows() == []
    produce(broker, "pat-a", 0, range(3, 5))
    create(admin, "pat-b", 1)
    produce(broker, "pat-b", 0, range(0, 2))
    second = Collector()
    run_available_now(df, tmp_path / "ck", second)
    assert second.rows() == expected("pat-a", 0, range(3, 5), 3) + \
        expected("pat-b", 0, range(0, 2))


def test_deleted_records_fail_the_query_or_are_skipped(
        spark: SparkSession, broker: BrokerProcess, admin: KafkaAdminClient,
        tmp_path: Path) -> None:
    create(admin, "stream-loss", 1)
    produce(broker, "stream-loss", 0, range(0, 3))
    strict = stream(spark, broker, subscribe="stream-loss", startingOffsets="earliest")
    lenient = stream(spark, broker, subscribe="stream-loss", startingOffsets="earliest",
                     failOnDataLoss="false")
    for name, df in (("strict", strict), ("lenient", lenient)):
        collector = Collector()
        run_available_now(df, tmp_path / name, collector)
        assert collector.rows() == expected("stream-loss", 0, range(0, 3))

    produce(broker, "stream-loss", 0, range(3, 10))
    admin.delete_records({TopicPartition("stream-loss", 0): 6}).all()

    query = (strict.writeStream.foreachBatch(Collector())
             .option("checkpointLocation", str(tmp_path / "strict"))
             .trigger(availableNow=True).start())
    with pytest.raises(Exception, match=r"Offsets 3 to 6 of partition stream-loss-0 were "
                                        r"deleted before they could be read.*failOnDataLoss"):
        query.awaitTermination(120)
    collector = Collector()
    run_available_now(lenient, tmp_path / "lenient", collector)
    assert collector.rows() == expected("stream-loss", 0, range(6, 10), 6)


def test_memory_sink_and_option_errors(spark: SparkSession, broker: BrokerProcess,
                                       admin: KafkaAdminClient, tmp_path: Path) -> None:
    create(admin, "stream-mem", 3)
    for p in range(3):
        produce(broker, "stream-mem", p, range(10 * p, 10 * p + 4))
    df = stream(spark, broker, assign='{"stream-mem":[0,2]}', startingOffsets="earliest",
                minPartitions="4")
    query = (df.selectExpr("CAST(value AS STRING) AS v").writeStream.format("memory")
             .queryName("millrace_stream_mem").option("checkpointLocation", str(tmp_path))
             .trigger(availableNow=True).start())
    query.awaitTermination(120)
    got = sorted(r.v for r in spark.sql("SELECT v FROM millrace_stream_mem").collect())
    assert got == sorted(str(i) for i in [0, 1, 2, 3, 20, 21, 22, 23])

    bad: dict[str, Any] = {"subscribe": "stream-mem", "endingOffsets": "latest"}
    with pytest.raises(Exception, match="'endingoffsets' is not valid in streaming queries"):
        q = stream(spark, broker, **bad).writeStream.format("memory").queryName("x1").start()
        try:
            q.awaitTermination(60)
        finally:
            q.stop()
