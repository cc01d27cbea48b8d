"""``RecordTracer`` (issue 28): arming and its expiry and bounds, ``traceparent``
parsing, the events of a traced record through the in-process broker's handlers
(produce with acks=1 and acks=-1, compressed batches, fetch, offset commit), the
"first only" rules per follower, client id and group, ``watch``, the record and
event bounds, and the JSON shape.  The tracer's clock is a fake one the tests move."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from millrace.broker.delayed_fetch import FetchPartitionData
from millrace.broker.record_tracer import (
    MAX_ARMED,
    MAX_EVENTS,
    MAX_RECORDS,
    RecordTracer,
    TooManyArmed,
    scan_traceparents,
)
from millrace.protocol import ApiKey
from millrace.record import RecordBatchBuilder
from millrace.record.compression import CompressionType
from tests.unit.broker.brokergen import (
    PRODUCE_V,
    T0,
    Broker,
    fetch_req,
    produce_req,
    produced,
)

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"
GOOD = f"00-{TRACE}-{SPAN}-01".encode()
START_US = 1_800_000_000_000_000


class Clock:
    def __init__(self) -> None:
        self.us = START_US

    def __call__(self) -> int:
        return self.us

    def advance_ms(self, ms: int) -> None:
        self.us += ms * 1000


@pytest.fixture
def clock(broker: Broker) -> Clock:
    c = Clock()
    broker.services.replica_manager.tracer.clock_us = c
    return c


def tracer_of(broker: Broker) -> RecordTracer:
    return broker.services.replica_manager.tracer


def headed_batch(*headers: bytes | None, compression: CompressionType = CompressionType.NONE
                 ) -> bytes:
    """One batch of a record per entry: a ``traceparent`` header with that value, or
    (None) no header at all."""
    builder = RecordBatchBuilder(compression=compression)
    for i, value in enumerate(headers):
        builder.append(T0 + i, b"k", b"v%d" % i,
                       headers=[] if value is None else [("other", b"x"),
                                                         ("traceparent", value)])
    return builder.build()


async def produce_batch(broker: Broker, topic: str, data: bytes, acks: int = 1) -> int:
    got = await broker.call(ApiKey.PRODUCE, PRODUCE_V, produce_req({(topic, 0): data}, acks))
    error, offset = produced(got)[(topic, 0)]
    assert error == 0
    return offset


def stages(record: Any) -> list[str]:
    return [e["stage"] for e in record.events]


def consumer(client_id: str) -> Any:
    return SimpleNamespace(client_id=client_id, client_host="10.0.0.9", client_port=4242)


def test_scan_finds_headers_in_plain_and_compressed_batches() -> None:
    for codec in (CompressionType.NONE, CompressionType.GZIP):
        data = headed_batch(None, GOOD, b"bad", compression=codec)
        assert list(scan_traceparents(data, 10)) == [(11, TRACE, SPAN)]
        assert list(scan_traceparents(data, None)) == [(1, TRACE, SPAN)]
    assert list(scan_traceparents(b"\x00" * 70, 0)) == []  # garbage: nothing, no error


# ---------------------------------------------------------------------- arming
def test_arm_sets_a_trace_on_the_local_partitions_until_it_expires(broker: Broker,
                                                                   clock: Clock) -> None:
    broker.create_topic("t", 2)
    tracer = tracer_of(broker)
    assert broker.partition("t", 0).trace is None  # nothing armed: nothing to check
    until_ms, partitions = tracer.arm("t", 1000)
    assert (until_ms, partitions) == (START_US // 1000 + 1000, 2)
    assert all(broker.partition("t", i).trace is not None for i in range(2))
    assert tracer.arm("unknown", 1000)[1] == 0  # by name: nothing hosted here
    clock.advance_ms(1001)
    tracer.expire()
    assert tracer.armed == {}
    assert all(broker.partition("t", i).trace is None for i in range(2))


@pytest.mark.parametrize("ttl", [0, -1, 600_001, True, "60000", 1.5])
def test_arm_refuses_a_bad_ttl(broker: Broker, ttl: Any) -> None:
    with pytest.raises(ValueError, match="ttl_ms"):
        tracer_of(broker).arm("t", ttl)


def test_at_most_64_topics_are_armed(broker: Broker, clock: Clock) -> None:
    tracer = tracer_of(broker)
    for i in range(MAX_ARMED):
        tracer.arm(f"t{i}", 1000)
    with pytest.raises(TooManyArmed, match=str(MAX_ARMED)):
        tracer.arm("one-more", 1000)
    tracer.arm("t0", 5000)  # re-arming extends and takes no new slot
    clock.advance_ms(2000)
    tracer.arm("one-more", 1000)  # the others expired
    assert set(tracer.armed) == {"t0", "one-more"}


def test_an_expired_arm_is_dropped_by_the_next_hook(broker: Broker, clock: Clock) -> None:
    async def main() -> None:
        broker.create_topic("t")
        tracer = tracer_of(broker)
        tracer.arm("t", 1000)
        clock.advance_ms(1001)
        await produce_batch(broker, "t", headed_batch(GOOD))
        assert broker.partition("t").trace is None
        assert tracer.by_trace(TRACE) == [] and tracer.armed == {}

    asyncio.run(main())


# ---------------------------------------------------------------------- a record's journey
@pytest.mark.parametrize("acks", [1, -1, 0])
def test_produce_records_receive_append_hw_and_response(broker: Broker, clock: Clock,
                                                        acks: int) -> None:
    async def main() -> None:
        broker.create_topic("t")
        broker.create_topic("unarmed")
        tracer = tracer_of(broker)
        tracer.arm("t", 60_000)
        await produce_batch(broker, "unarmed", headed_batch(GOOD))
        assert tracer.by_trace(TRACE) == []
        got = await broker.call(ApiKey.PRODUCE, PRODUCE_V, produce_req(
            {("t", 0): headed_batch(None, b"00-bad", GOOD)}, acks))
        assert got is None if acks == 0 else produced(got)[("t", 0)] == (0, 0)
        (record,) = tracer.by_trace(TRACE)
        assert (record.topic, record.partition, record.offset, record.span_id) == \
            ("t", 0, 2, SPAN)
        assert stages(record) == ["broker.receive", "broker.append", "hw.advance",
                                  "broker.response"]
        receive, append, hw, response = record.events
        assert receive["client_id"] == "test"
        assert receive["client_address"] == "127.0.0.1:5555"
        assert receive["api_version"] == PRODUCE_V
        assert (append["offset"], append["leader_epoch"]) == (2, 0)
        assert append["append_us"] == 0  # the fake clock did not move
        assert hw["high_watermark"] == 3
        assert (response["acks"], response["error"]) == (acks, "NONE")
        assert all(e["broker"] == 1 and e["t_us"] == START_US and e["detail"]
                   for e in record.events)
        assert tracer.by_offset("t", 0, 1) == [] and tracer.by_offset("t", 0, 2) == [record]

    asyncio.run(main())


def test_a_compressed_batch_is_traced_and_a_resent_duplicate_is_not_twice(
        broker: Broker, clock: Clock) -> None:
    async def main() -> None:
        broker.create_topic("t")
        tracer = tracer_of(broker)
        tracer.arm("t", 60_000)
        await produce_batch(broker, "t", headed_batch(GOOD, compression=CompressionType.GZIP))
        (record,) = tracer.by_trace(TRACE)
        assert record.offset == 0
        assert tracer.track(TRACE, SPAN, "t", 0, 0, START_US) is None

    asyncio.run(main())


def test_consumer_fetch_once_per_client_and_only_below_the_high_watermark(
        broker: Broker, clock: Clock) -> None:
    async def main() -> None:
        broker.create_topic("t")
        tracer = tracer_of(broker)
        tracer.arm("t", 60_000)
        await produce_batch(broker, "t", headed_batch(None, GOOD))  # traced offset 1
        rm = broker.services.replica_manager
        (record,) = tracer.by_trace(TRACE)
        rm.read("t", 0, 2, 1 << 20, True, 0, request=consumer("past"))  # beyond it
        for client in ("a", "a", "b"):
            data = rm.read("t", 0, 0, 1 << 20, True, 0, request=consumer(client))
            assert data.records
        fetches = [e for e in record.events if e["stage"] == "consumer.fetch"]
        assert [(e["client_id"], e["client_address"], e["fetch_offset"], e["isolation"])
                for e in fetches] == [("a", "10.0.0.9:4242", 0, "read_uncommitted"),
                                      ("b", "10.0.0.9:4242", 0, "read_uncommitted")]
        # through the Fetch handler too (client id "test", the handler's context)
        await broker.call(ApiKey.FETCH, 12, fetch_req([("t", 0, 1, 1 << 20)]))
        assert [e["client_id"] for e in record.events
                if e["stage"] == "consumer.fetch"] == ["a", "b", "test"]

    asyncio.run(main())


def test_replica_fetch_then_caught_up_once_per_follower(broker: Broker, clock: Clock
                                                         ) -> None:
    async def main() -> None:
        broker.create_topic("t")
        tracer = tracer_of(broker)
        tracer.arm("t", 60_000)
        await produce_batch(broker, "t", headed_batch(None, GOOD, None))  # traced offset 1
        p = broker.partition("t")
        trace = p.trace
        assert trace is not None
        data = FetchPartitionData(0, 3, 3, 0, b"records")
        empty = FetchPartitionData(0, 3, 3, 0, b"")
        trace.fetched(p, 0, empty, 2, 0, None)  # nothing returned: no replica.fetch
        for fetch_offset, returned in ((0, data), (1, data), (2, empty), (3, empty)):
            trace.fetched(p, fetch_offset, returned, 2, 0, None)
        trace.fetched(p, 1, data, 3, 0, None)
        (record,) = tracer.by_trace(TRACE)
        replica = [(e["stage"], e["replica"], e["fetch_offset"]) for e in record.events
                   if e["stage"].startswith("replica.")]
        assert replica == [("replica.fetch", 2, 0), ("replica.caught-up", 2, 2),
                           ("replica.fetch", 3, 1)]

    asyncio.run(main())


def test_hw_advance_when_the_high_watermark_passes_later(broker: Broker, clock: Clock
                                                         ) -> None:
    broker.create_topic("t")
    tracer = tracer_of(broker)
    tracer.arm("t", 60_000)
    p = broker.partition("t")
    tracer.watch(TRACE, SPAN, "t", 0, 5)
    assert p.trace is not None
    p.trace.high_watermark_advanced(p, 5)
    p.trace.high_watermark_advanced(p, 6)
    p.trace.high_watermark_advanced(p, 7)
    (record,) = tracer.by_trace(TRACE)
    assert [(e["stage"], e["high_watermark"]) for e in record.events] == [("hw.advance", 6)]


def test_follower_append_names_the_leader(broker: Broker, clock: Clock) -> None:
    broker.create_topic("t")
    tracer = tracer_of(broker)
    tracer.arm("t", 60_000)
    p = broker.partition("t")
    assert p.trace is not None
    p.trace.follower_appended(p, headed_batch(None, GOOD))
    (record,) = tracer.by_trace(TRACE)
    (event,) = record.events
    assert (event["stage"], event["offset"], event["leader"]) == \
        ("follower.append", 1, p.leader_id)


def test_a_watch_of_a_record_seen_appended_is_the_same_record(broker: Broker,
                                                              clock: Clock) -> None:
    """The console watches what the leader (or a follower) already found by its header:
    one record, so each later event is recorded once."""
    broker.create_topic("t")
    tracer = tracer_of(broker)
    tracer.arm("t", 60_000)
    p = broker.partition("t")
    assert p.trace is not None
    p.trace.follower_appended(p, headed_batch(None, GOOD))
    (seen,) = tracer.by_trace(TRACE)
    assert tracer.watch(TRACE, SPAN, "t", 0, 1) is seen          # its span named
    assert tracer.watch(TRACE, None, "t", 0, 1) is seen          # or none named
    assert len(tracer.by_trace(TRACE)) == 1
    # negative control: another offset of the same trace is another record
    assert tracer.watch(TRACE, None, "t", 0, 2) is not seen
    assert len(tracer.by_trace(TRACE)) == 2


def test_group_commit_once_per_group_above_the_offset(broker: Broker, clock: Clock
                                                       ) -> None:
    tracer = tracer_of(broker)
    assert not tracer.active  # the commit path's one check
    tracer.watch(TRACE, None, "elsewhere", 3, 10)  # a partition not hosted here
    assert tracer.active
    tracer.offsets_committed("g", "m-1", 4, [("elsewhere", 3, 10)])  # not past it
    tracer.offsets_committed("g", "m-1", 4, [("elsewhere", 3, 11), ("other", 0, 99)])
    tracer.offsets_committed("g", "m-2", 5, [("elsewhere", 3, 12)])
    tracer.offsets_committed("h", "m-3", 1, [("elsewhere", 3, 20)])
    (record,) = tracer.by_trace(TRACE)
    assert record.span_id == ""
    assert [(e["group"], e["member_id"], e["generation"], e["committed_offset"])
            for e in record.events] == [("g", "m-1", 4, 11), ("h", "m-3", 1, 20)]


def test_offset_commit_through_the_group_coordinator(broker: Broker, clock: Clock) -> None:
    async def main() -> None:
        from millrace.protocol.types import OffsetCommitRequest
        broker.create_topic("t")
        tracer = tracer_of(broker)
        tracer.watch(TRACE, SPAN, "t", 0, 0)
        await broker.services.group_coordinator.start()
        try:
            t_cls = OffsetCommitRequest.OffsetCommitRequestTopic
            body = OffsetCommitRequest(group_id="simple", generation_id_or_member_epoch=-1,
                                       member_id="", topics=[t_cls(name="t", partitions=[
                                           t_cls.OffsetCommitRequestPartition(
                                               partition_index=0, committed_offset=1)])])
            await broker.call(ApiKey.OFFSET_COMMIT, 8, body)
        finally:
            await broker.services.group_coordinator.stop()
        (record,) = tracer.by_trace(TRACE)
        assert [(e["stage"], e["group"], e["committed_offset"]) for e in record.events] == \
            [("group.commit", "simple", 1)]

    asyncio.run(main())


def test_a_watch_expires(broker: Broker, clock: Clock) -> None:
    tracer = tracer_of(broker)
    tracer.watch(TRACE, SPAN, "x", 0, 0, ttl_ms=1000)
    clock.advance_ms(1001)
    tracer.offsets_committed("g", "m", 1, [("x", 0, 5)])
    (record,) = tracer.by_trace(TRACE)
    assert record.events == []  # kept for GET, but no longer collecting
    tracer.expire()
    assert not tracer.active


# ---------------------------------------------------------------------- bounds and shape
def test_at_most_1000_records_the_oldest_dropped(broker: Broker, clock: Clock) -> None:
    tracer = tracer_of(broker)
    for i in range(MAX_RECORDS + 5):
        tracer.watch(f"{i:032x}", None, "x", 0, i)
    assert tracer.by_trace(f"{0:032x}") == []
    assert len(tracer.by_trace(f"{5:032x}")) == 1
    assert sum(len(rs) for rs in tracer.active.values()) == MAX_RECORDS


def test_at_most_64_events_per_record(broker: Broker, clock: Clock) -> None:
    tracer = tracer_of(broker)
    tracer.watch(TRACE, SPAN, "x", 0, 0)
    for i in range(MAX_EVENTS + 10):
        tracer.offsets_committed(f"g{i}", "m", 1, [("x", 0, 1)])
    (record,) = tracer.by_trace(TRACE)
    assert len(record.events) == MAX_EVENTS


def test_json_shape_with_events_in_time_order(broker: Broker, clock: Clock) -> None:
    tracer = tracer_of(broker)
    record = tracer.watch(TRACE, SPAN, "x", 2, 7)
    record.add(tracer.event(START_US + 5, "b", "later", n=1))
    record.add(tracer.event(START_US, "a", "earlier"))
    doc = record.to_json()
    assert list(doc) == ["trace_id", "span_id", "topic", "partition", "offset", "events"]
    assert (doc["trace_id"], doc["span_id"], doc["topic"], doc["partition"],
            doc["offset"]) == (TRACE, SPAN, "x", 2, 7)
    assert doc["events"] == [
        {"t_us": START_US, "stage": "a", "broker": 1, "detail": "earlier"},
        {"t_us": START_US + 5, "stage": "b", "broker": 1, "detail": "later", "n": 1}]


def test_nothing_armed_costs_no_state(broker: Broker) -> None:
    async def main() -> None:
        broker.create_topic("t")
        await produce_batch(broker, "t", headed_batch(GOOD))
        tracer = tracer_of(broker)
        assert broker.partition("t").trace is None
        assert (tracer.armed, tracer.active, tracer.by_trace(TRACE)) == ({}, {}, [])

    asyncio.run(main())
