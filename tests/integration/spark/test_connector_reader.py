"""The executor half of format("millrace") without Spark: ``read_range`` against a real
broker -- exact ranges, the Arrow batches Spark expects, data loss found while reading."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pyarrow as pa
import pytest

from millrace.client.admin import KafkaAdminClient, NewTopic, TopicPartition
from millrace.client.producer import KafkaProducer, ProducerRecord
from millrace.spark.offsets import DataLossError
from millrace.spark.options import SourceOptions
from millrace.spark.reader import KafkaInputPartition, KafkaOffsetReader, arrow_schema, read_range
from millrace.spark.source import source_schema
from millrace.testing.broker_process import BrokerProcess

pytestmark = [pytest.mark.integration]


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    with KafkaAdminClient(bootstrap_servers=broker.bootstrap) as client:
        yield client


def topic_with(admin: KafkaAdminClient, broker: BrokerProcess, topic: str, count: int) -> None:
    admin.create_topics([NewTopic(topic, num_partitions=1)]).all()
    with KafkaProducer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50}) as producer:
        for i in range(count):
            producer.send(ProducerRecord(topic, b"%d" % i, None, 0))
        producer.flush()


def options(broker: BrokerProcess, **extra: str) -> SourceOptions:
    return SourceOptions.parse({"kafka.bootstrap.servers": broker.bootstrap,
                                "subscribe": "x", **extra}, streaming=False)


def read(opts: SourceOptions, topic: str, begin: int, until: int,
         headers: bool = False) -> list[pa.RecordBatch]:
    schema = arrow_schema(source_schema(headers))
    return list(read_range(opts, KafkaInputPartition(topic, 0, begin, until), schema))


def test_a_range_reads_exactly_its_records_as_sparks_arrow_batches(
        broker: BrokerProcess, admin: KafkaAdminClient) -> None:
    topic_with(admin, broker, "reader-exact", 50)
    batches = read(options(broker), "reader-exact", 7, 31)
    assert all(b.schema.equals(arrow_schema(source_schema(False))) for b in batches)
    table = pa.Table.from_batches(batches)
    assert table.column("offset").to_pylist() == list(range(7, 31))
    assert table.column("value").to_pylist() == [b"%d" % i for i in range(7, 31)]
    assert set(table.column("topic").to_pylist()) == {"reader-exact"}
    assert set(table.column("partition").to_pylist()) == {0}
    assert set(table.column("timestampType").to_pylist()) == {0}
    with_headers = pa.Table.from_batches(read(options(broker), "reader-exact", 0, 2, True))
    assert with_headers.column("headers").to_pylist() == [None, None]
    assert read(options(broker), "reader-exact", 5, 5) == []


def test_offsets_deleted_under_a_reader_are_data_loss(
        broker: BrokerProcess, admin: KafkaAdminClient, caplog: pytest.LogCaptureFixture
        ) -> None:
    topic_with(admin, broker, "reader-deleted", 20)
    admin.delete_records({TopicPartition("reader-deleted", 0): 12}).all()
    with pytest.raises(DataLossError, match="Offsets 3 to 12 of partition reader-deleted-0 "
                                            "were deleted before they could be read"):
        read(options(broker), "reader-deleted", 3, 15)
    lenient = options(broker, failOnDataLoss="false")
    with caplog.at_level(logging.WARNING, logger="millrace.spark.offsets"):
        table = pa.Table.from_batches(read(lenient, "reader-deleted", 3, 15))
    assert table.column("offset").to_pylist() == [12, 13, 14]
    assert "Offsets 3 to 12 of partition reader-deleted-0 were deleted" in caplog.text
    assert read(lenient, "reader-deleted", 3, 10) == []


def test_a_log_that_ends_before_the_range_is_data_loss(
        broker: BrokerProcess, admin: KafkaAdminClient) -> None:
    topic_with(admin, broker, "reader-short", 10)
    with pytest.raises(DataLossError, match="reader-short-0 now ends at offset 10: offsets "
                                            "10 to 25 cannot be read"):
        read(options(broker), "reader-short", 4, 25)
    lenient = options(broker, failOnDataLoss="false")
    table = pa.Table.from_batches(read(lenient, "reader-short", 4, 25))
    assert table.column("offset").to_pylist() == list(range(4, 10))


def test_offset_reader_answers_only_for_partitions_that_exist(
        broker: BrokerProcess, admin: KafkaAdminClient) -> None:
    topic_with(admin, broker, "reader-lookup", 3)
    lookup = KafkaOffsetReader(SourceOptions.parse(
        {"kafka.bootstrap.servers": broker.bootstrap, "subscribePattern": "reader-look.*"},
        streaming=True))
    try:
        tp, missing = TopicPartition("reader-lookup", 0), TopicPartition("reader-lookup", 5)
        assert lookup.topic_partitions() == {tp}
        assert lookup.earliest_offsets([tp, missing]) == {tp: 0}
        assert lookup.latest_offsets([tp, missing]) == {tp: 3}
        assert lookup.offsets_for_times({tp: 0, missing: 0}) == {tp: 0}
    finally:
        lookup.close()
