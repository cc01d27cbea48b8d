"""Transactions on the partition leader, through the handlers: WriteTxnMarkers (control
batches, fencing, errors per partition, the marker listeners), read_committed Fetch
(bounded by the LSO, aborted transactions, the long poll waiting on the LSO), ListOffsets
with isolation_level 1, DescribeProducers, and Produce refusing control batches."""

from __future__ import annotations

import asyncio
from typing import Any

from millrace.common.errors import Errors
from millrace.protocol import ApiKey
from millrace.protocol.types import (
    DescribeProducersRequest,
    ListOffsetsRequest,
    WriteTxnMarkersRequest,
)
from millrace.record import RecordBatchBuilder
from millrace.record.control import build_end_txn_marker
from tests.unit.broker.brokergen import (
    PRODUCE_V,
    T0,
    Broker,
    fetch_req,
    fetched,
    produce,
    produce_req,
    produced,
    records,
    settle,
    start_fetch,
)

BIG = 1 << 20
PID = 5


def txn_batch(*values: bytes, pid: int = PID, epoch: int = 0, seq: int = 0) -> bytes:
    b = RecordBatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                           is_transactional=True)
    for i, v in enumerate(values):
        b.append(T0 + i, b"k", v)
    return b.build()


async def produce_txn(broker: Broker, topic: str, *values: bytes, seq: int = 0,
                      pid: int = PID, epoch: int = 0) -> int:
    got = await broker.call(ApiKey.PRODUCE, PRODUCE_V, produce_req(
        {(topic, 0): txn_batch(*values, pid=pid, epoch=epoch, seq=seq)}, acks=-1))
    error, offset = produced(got)[(topic, 0)]
    assert error == 0, error
    return offset


def markers_req(*markers: tuple[int, int, bool, int, list[tuple[str, int]]]) -> Any:
    cls = WriteTxnMarkersRequest
    out = []
    for pid, epoch, committed, coordinator_epoch, parts in markers:
        topics: dict[str, list[int]] = {}
        for t, i in parts:
            topics.setdefault(t, []).append(i)
        out.append(cls.WritableTxnMarker(
            producer_id=pid, producer_epoch=epoch, transaction_result=committed,
            coordinator_epoch=coordinator_epoch,
            topics=[cls.WritableTxnMarker.WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                    for t, ps in topics.items()]))
    return cls(markers=out)


async def write_markers(broker: Broker, *markers: tuple[int, int, bool, int,
                                                         list[tuple[str, int]]]
                        ) -> list[dict[tuple[str, int], int]]:
    got = await broker.call(ApiKey.WRITE_TXN_MARKERS, 1, markers_req(*markers))
    return [{(t.name, p.partition_index): p.error_code for t in m.topics for p in t.partitions}
            for m in got.markers]


def committed_fetch(parts: list[tuple[str, int, int, int]], **kwargs: Any) -> Any:
    req = fetch_req(parts, **kwargs)
    req.isolation_level = 1
    return req


async def fetch_one(broker: Broker, offset: int, isolation: int) -> Any:
    req = fetch_req([("t", 0, offset, BIG)])
    req.isolation_level = isolation
    return fetched(await broker.call(ApiKey.FETCH, 12, req))[("t", 0)]


def aborted(part: Any) -> list[tuple[int, int]] | None:
    if part.aborted_transactions is None:
        return None
    return [(a.producer_id, a.first_offset) for a in part.aborted_transactions]


def test_read_committed_fetch_stops_at_open_transaction(broker: Broker) -> None:
    async def main() -> None:
        broker.create_topic("t")
        await produce(broker, "t", b"plain")                        # 0
        await produce_txn(broker, "t", b"a", b"b")                  # 1-2
        await produce(broker, "t", b"after")                        # 3
        committed = await fetch_one(broker, 0, 1)
        assert (committed.high_watermark, committed.last_stable_offset) == (4, 1)
        assert records(committed.records) == [(0, b"plain")]
        assert aborted(committed) == []
        uncommitted = await fetch_one(broker, 0, 0)
        assert uncommitted.last_stable_offset == 1
        assert [o for o, _ in records(uncommitted.records)] == [0, 1, 2, 3]
        assert aborted(uncommitted) is None
        assert records((await fetch_one(broker, 1, 1)).records) == []

    asyncio.run(main())


def test_parked_read_committed_fetch_wakes_on_commit_marker(broker: Broker) -> None:
    async def main() -> None:
        broker.create_topic("t")
        await produce_txn(broker, "t", b"a")                        # 0
        await produce(broker, "t", b"x")                            # 1: HW moves, LSO not
        task = start_fetch(broker, committed_fetch([("t", 0, 0, BIG)], max_wait_ms=500))
        await settle()
        assert not task.done()
        assert await write_markers(broker, (PID, 0, True, 0, [("t", 0)])) == \
            [{("t", 0): Errors.NONE}]
        await settle()
        assert task.done()
        part = fetched(task.result())[("t", 0)]
        assert part.last_stable_offset == 3
        # the marker too (value: version 0, coordinator epoch 0)
        assert records(part.records) == [(0, b"a"), (1, b"x"), (2, bytes(6))]
        assert aborted(part) == []

    asyncio.run(main())


def test_abort_marker_lists_aborted_transaction_and_calls_listener(broker: Broker) -> None:
    async def main() -> None:
        broker.create_topic("t", 2)
        heard: list[tuple[str, int, int, bool]] = []
        rm = broker.services.replica_manager
        rm.txn_marker_listeners.append(lambda *a: heard.append(a))
        await produce(broker, "t", b"plain")                        # 0
        await produce_txn(broker, "t", b"a", b"b")                  # 1-2
        got = await write_markers(broker, (PID, 0, False, 3, [("t", 0), ("t", 1)]),
                                  (PID + 1, 0, True, 3, [("t", 9), ("nope", 0)]))
        assert got == [{("t", 0): Errors.NONE, ("t", 1): Errors.NONE},
                       {("t", 9): Errors.UNKNOWN_TOPIC_OR_PARTITION,
                        ("nope", 0): Errors.UNKNOWN_TOPIC_OR_PARTITION}]
        assert heard == [("t", 0, PID, False), ("t", 1, PID, False)]
        part = await fetch_one(broker, 0, 1)
        assert part.last_stable_offset == 4
        assert aborted(part) == [(PID, 1)]
        assert [o for o, _ in records(part.records)] == [0, 1, 2, 3]
        # from past the aborted transaction: nothing to skip
        assert aborted(await fetch_one(broker, 4, 1)) == []
        entry = broker.partition("t").log.producer_state_manager.last_entry(PID)
        assert (entry.current_txn_first_offset, entry.coordinator_epoch) == (-1, 3)

    asyncio.run(main())


def test_markers_are_fenced_by_producer_and_coordinator_epoch(broker: Broker) -> None:
    async def main() -> None:
        broker.create_topic("t")
        await produce_txn(broker, "t", b"a", epoch=2)
        assert await write_markers(broker, (PID, 1, True, 0, [("t", 0)])) == \
            [{("t", 0): Errors.INVALID_PRODUCER_EPOCH}]
        assert await write_markers(broker, (PID, 2, True, 4, [("t", 0)])) == \
            [{("t", 0): Errors.NONE}]
        await produce_txn(broker, "t", b"b", epoch=2, seq=1)
        assert await write_markers(broker, (PID, 2, False, 3, [("t", 0)])) == \
            [{("t", 0): Errors.TRANSACTION_COORDINATOR_FENCED}]
        assert broker.partition("t").log.log_end_offset == 3

    asyncio.run(main())


def test_markers_need_the_leader(broker: Broker) -> None:
    async def main() -> None:
        broker.create_topic("t")
        heard: list[Any] = []
        broker.services.replica_manager.txn_marker_listeners.append(heard.append)
        broker.partition("t").stop()
        assert await write_markers(broker, (PID, 0, True, 0, [("t", 0)])) == \
            [{("t", 0): Errors.NOT_LEADER_OR_FOLLOWER}]
        assert heard == []

    asyncio.run(main())


def test_internal_offsets_topic_takes_markers(broker: Broker) -> None:
    async def main() -> None:
        end = broker.partition("__consumer_offsets").log.log_end_offset
        assert await write_markers(broker, (PID, 0, True, 0, [("__consumer_offsets", 0)])) \
            == [{("__consumer_offsets", 0): Errors.NONE}]
        assert broker.partition("__consumer_offsets").log.log_end_offset == end + 1

    asyncio.run(main())


def test_produce_of_a_control_batch_is_invalid_record(broker: Broker) -> None:
    async def main() -> None:
        broker.create_topic("t")
        got = await broker.call(ApiKey.PRODUCE, PRODUCE_V, produce_req(
            {("t", 0): build_end_txn_marker(PID, 0, True, 0, T0)}))
        assert produced(got)[("t", 0)] == (Errors.INVALID_RECORD, -1)

    asyncio.run(main())


def test_list_offsets_latest_read_committed_is_lso(broker: Broker) -> None:
    async def main() -> None:
        broker.create_topic("t")
        await produce(broker, "t", b"plain")
        await produce_txn(broker, "t", b"a")
        cls = ListOffsetsRequest
        answers = []
        for isolation in (0, 1):
            req = cls(replica_id=-1, isolation_level=isolation, topics=[cls.ListOffsetsTopic(
                name="t", partitions=[cls.ListOffsetsTopic.ListOffsetsPartition(
                    partition_index=0, timestamp=-1)])])
            got = await broker.call(ApiKey.LIST_OFFSETS, 7, req)
            answers.append(got.topics[0].partitions[0].offset)
        assert answers == [2, 1]

    asyncio.run(main())


def test_describe_producers(broker: Broker) -> None:
    async def main() -> None:
        broker.create_topic("t", 2)
        await produce_txn(broker, "t", b"a", b"b", epoch=1)
        broker.partition("t", 1).stop()
        cls = DescribeProducersRequest
        got = await broker.call(ApiKey.DESCRIBE_PRODUCERS, 0, cls(topics=[
            cls.TopicRequest(name="t", partition_indexes=[0, 1, 7])]))
        parts = got.topics[0].partitions
        assert [p.error_code for p in parts] == [Errors.NONE, Errors.NOT_LEADER_OR_FOLLOWER,
                                                 Errors.UNKNOWN_TOPIC_OR_PARTITION]
        assert [(s.producer_id, s.producer_epoch, s.last_sequence, s.last_timestamp,
                 s.coordinator_epoch, s.current_txn_start_offset)
                for s in parts[0].active_producers] == [(PID, 1, 1, T0 + 1, -1, 0)]

    asyncio.run(main())
