"""``BrokerTopicStats``: the BrokerTopicMetrics meters, for all topics and per topic, marked
per partition of a request -- directly, through the produce and fetch handlers of one
in-process broker, and by a follower replicating in process (replication bytes, lag)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

from millrace.broker.metrics.broker_topic_stats import BrokerTopicStats
from millrace.broker.metrics.registry import KafkaMetricsRegistry
from millrace.broker.metrics.yammer import Meter
from millrace.broker.replica_fetcher import (
    BrokerEndpoint,
    PartitionFetchState,
    ReplicaFetcherThread,
)
from millrace.common.errors import Errors
from millrace.protocol import ApiKey
from millrace.record import RecordBatchBuilder
from millrace.record.batch import MAGIC_OFFSET
from tests.unit.broker.brokergen import (
    FETCH_V,
    PRODUCE_V,
    Broker,
    batch,
    fetch_req,
    fetched,
    produce_req,
    produced,
)
from tests.unit.broker.test_replication_in_process import (
    TP,
    InProcessChannel,
    Node,
    cluster,
    lead,
)
from tests.unit.broker.test_replication_in_process import batch as replica_batch


def count(registry: KafkaMetricsRegistry, name: str, topic: str | None = None) -> int | None:
    """The meter's count; None when it is not registered."""
    found = registry.find("kafka.server", "BrokerTopicMetrics", name,
                          {"topic": topic} if topic else None)
    assert found is None or isinstance(found, Meter)
    return None if found is None else found.count


# ---------------------------------------------------------------------- the object alone
def test_an_append_marks_the_topic_and_all_topics() -> None:
    registry = KafkaMetricsRegistry()
    stats = BrokerTopicStats(registry)
    stats.produce_request("a", hosted=True)
    stats.appended("a", 120, 7)
    stats.produce_request("b", hosted=True)
    stats.appended("b", 30, 1)
    assert count(registry, "MessagesInPerSec", "a") == 7
    assert count(registry, "BytesInPerSec", "a") == 120
    assert count(registry, "MessagesInPerSec", "b") == 1
    assert count(registry, "MessagesInPerSec") == 8
    assert count(registry, "BytesInPerSec") == 150
    assert count(registry, "TotalProduceRequestsPerSec") == 2
    assert count(registry, "TotalProduceRequestsPerSec", "a") == 1


def test_a_partition_not_hosted_counts_for_all_topics_only() -> None:
    registry = KafkaMetricsRegistry()
    stats = BrokerTopicStats(registry)
    stats.produce_request("nope", hosted=False)
    stats.fetch_request("nope", hosted=False)
    stats.failed_fetch("nope", hosted=False)
    assert count(registry, "TotalProduceRequestsPerSec") == 1
    assert count(registry, "TotalFetchRequestsPerSec") == 1
    assert count(registry, "FailedFetchRequestsPerSec") == 1
    assert count(registry, "TotalProduceRequestsPerSec", "nope") is None  # nothing made


def test_follower_bytes_out_are_replication_bytes() -> None:
    registry = KafkaMetricsRegistry()
    stats = BrokerTopicStats(registry)
    stats.bytes_out("t", 100, follower=False)
    stats.bytes_out("t", 40, follower=True)
    stats.replication_bytes_received(25)
    assert count(registry, "BytesOutPerSec", "t") == 100
    assert count(registry, "BytesOutPerSec") == 100
    assert count(registry, "ReplicationBytesOutPerSec") == 40
    assert count(registry, "ReplicationBytesInPerSec") == 25
    assert count(registry, "ReplicationBytesOutPerSec", "t") is None  # all topics only


def test_a_deleted_topic_loses_its_meters_and_gets_fresh_ones() -> None:
    registry = KafkaMetricsRegistry()
    stats = BrokerTopicStats(registry)
    stats.appended("t", 10, 2)
    stats.appended("u", 10, 3)
    stats.remove_topic("t")
    assert count(registry, "MessagesInPerSec", "t") is None
    assert count(registry, "MessagesInPerSec", "u") == 3       # others stay
    assert count(registry, "MessagesInPerSec") == 5            # so does the total
    stats.appended("t", 10, 1)                                 # re-created: a new meter
    assert count(registry, "MessagesInPerSec", "t") == 1


def test_disabled_records_nothing() -> None:
    registry = KafkaMetricsRegistry()
    stats = BrokerTopicStats(registry, enabled=False)
    stats.produce_request("t", hosted=True)
    stats.appended("t", 10, 2)
    stats.bytes_out("t", 10, follower=False)
    assert count(registry, "MessagesInPerSec") == 0
    assert count(registry, "TotalProduceRequestsPerSec") == 0
    assert count(registry, "BytesOutPerSec", "t") is None


def one_batch(*keys: bytes | None) -> bytearray:
    b = RecordBatchBuilder()
    for i, key in enumerate(keys):
        b.append(1000 + i, key, b"v")
    return bytearray(b.build())


def test_a_refused_batch_is_classified_once_on_the_failure_path() -> None:
    registry = KafkaMetricsRegistry()
    stats = BrokerTopicStats(registry)

    def refused(error: int, records: bytearray, compacted: bool = False) -> None:
        stats.produce_refused("t", True, error, records, compacted, True)
    good = one_batch(b"k")
    refused(Errors.NOT_LEADER_OR_FOLLOWER, good)               # expected: not a failure
    assert count(registry, "FailedProduceRequestsPerSec") == 0
    refused(Errors.INVALID_TIMESTAMP, good)                    # a failure, nothing else
    assert count(registry, "FailedProduceRequestsPerSec") == 1
    assert count(registry, "FailedProduceRequestsPerSec", "t") == 1
    bad_crc = one_batch(b"k")
    bad_crc[-1] ^= 0xFF
    refused(Errors.CORRUPT_MESSAGE, bad_crc)
    assert count(registry, "InvalidMessageCrcRecordsPerSec") == 1
    assert count(registry, "FailedProduceRequestsPerSec") == 1  # CORRUPT_MESSAGE expected
    old_magic = one_batch(b"k")
    old_magic[MAGIC_OFFSET] = 1
    refused(Errors.INVALID_RECORD, old_magic)
    assert count(registry, "InvalidMagicNumberRecordsPerSec") == 1
    refused(Errors.INVALID_RECORD, one_batch(None), compacted=True)
    assert count(registry, "NoKeyCompactedTopicRecordsPerSec") == 1
    refused(Errors.INVALID_RECORD, one_batch(None), compacted=False)  # not compacted: none
    assert count(registry, "NoKeyCompactedTopicRecordsPerSec") == 1
    refused(Errors.MESSAGE_TOO_LARGE, good)
    assert count(registry, "BytesRejectedPerSec", "t") == len(good)
    assert count(registry, "InvalidOffsetOrSequenceRecordsPerSec") == 0


# ---------------------------------------------------------------------- through the handlers
def test_produce_and_fetch_through_the_handlers(broker: Broker) -> None:
    registry = broker.services.metrics

    async def main() -> None:
        broker.create_topic("t", 2)
        a, b = batch(b"1", b"2", b"3"), batch(b"4")
        got = await broker.call(ApiKey.PRODUCE, PRODUCE_V,
                                produce_req({("t", 0): a, ("t", 1): b}))
        assert produced(got) == {("t", 0): (0, 0), ("t", 1): (0, 0)}
        assert count(registry, "MessagesInPerSec", "t") == 4
        assert count(registry, "BytesInPerSec", "t") == len(a) + len(b)
        assert count(registry, "TotalProduceRequestsPerSec", "t") == 2  # per partition
        got = await broker.call(ApiKey.FETCH, FETCH_V,
                                fetch_req([("t", 0, 0, 1 << 20), ("t", 1, 0, 1 << 20)]))
        sent = sum(len(p.records or b"") for p in fetched(got).values())
        assert sent == len(a) + len(b)
        assert count(registry, "BytesOutPerSec", "t") == sent
        assert count(registry, "TotalFetchRequestsPerSec", "t") == 2
        assert count(registry, "FailedFetchRequestsPerSec") == 0
        assert count(registry, "ReplicationBytesOutPerSec") == 0

    asyncio.run(main())


def test_a_corrupt_batch_and_a_batch_too_large_through_the_handler(broker: Broker) -> None:
    registry = broker.services.metrics

    async def main() -> None:
        broker.create_topic("t", 1, {"max.message.bytes": "200"})
        corrupt = bytearray(batch(b"x"))
        corrupt[-1] ^= 0xFF
        got = await broker.call(ApiKey.PRODUCE, PRODUCE_V, produce_req({("t", 0): bytes(corrupt)}))
        assert produced(got)[("t", 0)][0] == Errors.CORRUPT_MESSAGE
        assert count(registry, "InvalidMessageCrcRecordsPerSec") == 1
        big = batch(b"y" * 500)
        got = await broker.call(ApiKey.PRODUCE, PRODUCE_V, produce_req({("t", 0): big}))
        assert produced(got)[("t", 0)][0] == Errors.MESSAGE_TOO_LARGE
        assert count(registry, "BytesRejectedPerSec", "t") == len(big)
        assert count(registry, "MessagesInPerSec", "t") == 0
        assert count(registry, "FailedProduceRequestsPerSec") == 0  # both expected errors
        assert count(registry, "TotalProduceRequestsPerSec", "t") == 2

    asyncio.run(main())


def test_deleting_a_topic_removes_its_meters(broker: Broker) -> None:
    registry = broker.services.metrics

    async def main() -> None:
        broker.create_topic("gone")
        await broker.call(ApiKey.PRODUCE, PRODUCE_V, produce_req({("gone", 0): batch(b"x")}))
        assert count(registry, "MessagesInPerSec", "gone") == 1
        broker.services.admin_manager.delete_topic("gone")
        assert count(registry, "MessagesInPerSec", "gone") is None
        assert count(registry, "MessagesInPerSec") == 1

    asyncio.run(main())


# ---------------------------------------------------------------------- replication
def fetcher_with_stats(follower: Node, leader: Node, time: Any) -> ReplicaFetcherThread:
    f = ReplicaFetcherThread("ReplicaFetcherThread-0-1", BrokerEndpoint(1, "h", 1), 2,
                             follower.rm.get_partition, follower.rm.partition_changed,
                             follower.config, time, follower.rm.topic_stats)
    f.channel = cast(Any, InProcessChannel(leader, "fetcher"))
    p = follower.partition()
    f.add_partitions({TP: PartitionFetchState(p.log.log_end_offset, p.leader_epoch)})
    return f


def test_a_follower_counts_replication_bytes(tmp_path: Path) -> None:
    async def main() -> None:
        time, _, leader, follower = cluster(tmp_path)
        try:
            lead(leader, follower, epoch=1)
            f = fetcher_with_stats(follower, leader, time)
            data = replica_batch(3)
            await leader.rm.append_records(1000, 1, {TP: data}, produce_version=9)
            await f.run_once()            # 0..3 arrive
            assert count(follower.rm.metrics, "ReplicationBytesInPerSec") == len(data)
            assert count(leader.rm.metrics, "ReplicationBytesOutPerSec") == len(data)
            assert count(leader.rm.metrics, "BytesOutPerSec") == 0   # not a consumer's
            assert count(leader.rm.metrics, "MessagesInPerSec", "t") == 3
            assert count(leader.rm.metrics, "TotalFetchRequestsPerSec", "t") == 1
            assert count(follower.rm.metrics, "MessagesInPerSec") == 0  # a follower's: none
            assert f.max_lag == 0         # the leader's HW (0) is behind us: never below 0
        finally:
            leader.close()
            follower.close()

    asyncio.run(main())


def test_a_follower_behind_the_high_watermark_lags(tmp_path: Path) -> None:
    async def main() -> None:
        # one batch per fetch; the follower is out of the ISR, so the HW is the log end
        time, _, leader, follower = cluster(tmp_path, **{"replica.fetch.max.bytes": 1})
        try:
            lead(leader, follower, epoch=1, isr=(1,))
            f = fetcher_with_stats(follower, leader, time)
            for n in (3, 2):
                await leader.rm.append_records(1000, 1, {TP: replica_batch(n)},
                                               produce_version=9)
            assert leader.partition().log.high_watermark == 5
            await f.run_once()            # the first batch only: 5 - 3 behind
            assert follower.partition().log.log_end_offset == 3
            assert f.max_lag == 2
            await f.run_once()            # the second: caught up
            assert f.max_lag == 0
            await f.run_once()
            f.remove_partitions([TP])
            assert f.max_lag == 0 and TP not in f.lags
        finally:
            leader.close()
            follower.close()

    asyncio.run(main())
