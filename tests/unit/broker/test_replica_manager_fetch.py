"""Fetch through the handler and ``ReplicaManager.fetch_messages``: the long poll on
``MockTime`` (parked, woken by an append, expired only at its deadline), byte limits and
the first-batch-whole rule, offset range, and reads bounded by the high watermark."""

from __future__ import annotations

import asyncio
import uuid

from millrace.common.errors import Errors
from millrace.protocol import ApiKey
from tests.unit.broker.brokergen import (
    T0,
    Broker,
    batch,
    batch_sizes,
    fetch_req,
    fetched,
    produce,
    records,
    settle,
    start_fetch,
)

BIG = 1 << 20


def test_a_long_poll_parks_until_an_append_completes_it(broker: Broker) -> None:
    async def main() -> None:
        broker.create_topic("t", 2)
        purgatory = broker.services.replica_manager.fetch_purgatory
        task = start_fetch(broker, fetch_req([("t", 0, 0, BIG), ("t", 1, 0, BIG)],
                                             max_wait_ms=500, min_bytes=1))
        await settle()
        assert not task.done()
        assert (purgatory.delayed, purgatory.watched) == (1, 2)
        await produce(broker, "t", b"a", partition=1)
        await settle()
        assert task.done()
        parts = fetched(task.result())
        assert [(p.error_code, p.high_watermark, records(p.records))
                for p in parts.values()] == [(0, 0, []), (0, 1, [(0, b"a")])]
        assert (purgatory.delayed, purgatory.watched) == (0, 0)   # unwatched from both
        assert broker.time.milliseconds() == T0                   # no clock needed

    asyncio.run(main())


def test_a_parked_fetch_expires_empty_at_its_deadline_and_not_before(broker: Broker) -> None:
    async def main() -> None:
        broker.create_topic("t")
        await produce(broker, "t", b"a")
        purgatory = broker.services.replica_manager.fetch_purgatory
        task = start_fetch(broker, fetch_req([("t", 0, 1, BIG)], max_wait_ms=500))
        await settle()
        broker.time.sleep(499)
        assert purgatory.advance_clock() == 0
        await settle()
        assert not task.done() and purgatory.delayed == 1
        broker.time.sleep(1)                                      # the deadline: T0 + 500
        assert purgatory.advance_clock() == 1
        await settle()
        assert task.done()
        part = fetched(task.result())[("t", 0)]
        assert (part.error_code, part.high_watermark, part.log_start_offset,
                records(part.records)) == (0, 1, 0, [])
        assert (purgatory.delayed, purgatory.watched) == (0, 0)

    asyncio.run(main())


def test_below_min_bytes_an_append_is_not_enough_and_expiry_answers_what_is_there(
        broker: Broker) -> None:
    async def main() -> None:
        broker.create_topic("t")
        purgatory = broker.services.replica_manager.fetch_purgatory
        task = start_fetch(broker, fetch_req([("t", 0, 0, BIG)], max_wait_ms=100,
                                             min_bytes=10_000))
        await settle()
        await produce(broker, "t", b"small")
        await settle()
        assert not task.done()                                    # a few bytes < 10000
        broker.time.sleep(100)
        assert purgatory.advance_clock() == 1
        part = fetched(await task)[("t", 0)]
        assert records(part.records) == [(0, b"small")]
        await produce(broker, "t", b"x" * 10_000)                 # now enough: no parking
        task = start_fetch(broker, fetch_req([("t", 0, 0, BIG)], max_wait_ms=100,
                                             min_bytes=10_000))
        await asyncio.sleep(0)
        assert task.done()
        assert [o for o, _ in records(fetched(task.result())[("t", 0)].records)] == [0, 1]

    asyncio.run(main())


def test_max_wait_0_answers_at_once(broker: Broker) -> None:
    async def main() -> None:
        broker.create_topic("t")
        task = start_fetch(broker, fetch_req([("t", 0, 0, BIG)], max_wait_ms=0,
                                             min_bytes=1))
        await asyncio.sleep(0)
        assert task.done()
        part = fetched(task.result())[("t", 0)]
        assert (part.error_code, part.high_watermark, records(part.records)) == (0, 0, [])
        assert broker.services.replica_manager.fetch_purgatory.delayed == 0

    asyncio.run(main())


def test_partition_max_bytes_returns_whole_batches_and_at_least_the_first(
        broker: Broker) -> None:
    async def main() -> None:
        broker.create_topic("t")
        for value in (b"a" * 100, b"b" * 200, b"c" * 300):
            await produce(broker, "t", value)

        async def sizes(pmax: int) -> list[int]:
            got = await broker.call(ApiKey.FETCH, 12, fetch_req([("t", 0, 0, pmax)]))
            return batch_sizes(fetched(got)[("t", 0)].records)

        s = await sizes(BIG)
        assert len(s) == 3 and s[0] < s[1] < s[2]
        assert await sizes(1) == [s[0]]                           # first batch whole
        assert await sizes(s[0] + s[1] - 1) == [s[0]]
        assert await sizes(s[0] + s[1]) == [s[0], s[1]]
        got = await broker.call(ApiKey.FETCH, 12, fetch_req([("t", 0, 1, 1)]))
        assert records(fetched(got)[("t", 0)].records) == [(1, b"b" * 200)]

    asyncio.run(main())


def test_max_bytes_spans_partitions_and_the_first_non_empty_one_gets_a_whole_batch(
        broker: Broker) -> None:
    async def main() -> None:
        broker.create_topic("t", 2)
        for p in (0, 1):
            await produce(broker, "t", b"x" * 100, partition=p)
            await produce(broker, "t", b"y" * 100, partition=p)
        one = batch_sizes(fetched(await broker.call(ApiKey.FETCH, 12, fetch_req(
            [("t", 0, 0, 1)])))[("t", 0)].records)[0]

        async def offsets(max_bytes: int, start0: int = 0) -> list[list[int]]:
            got = await broker.call(ApiKey.FETCH, 12, fetch_req(
                [("t", 0, start0, BIG), ("t", 1, 0, BIG)], max_bytes=max_bytes))
            parts = fetched(got)
            return [[o for o, _ in records(parts[("t", p)].records)] for p in (0, 1)]

        assert await offsets(1) == [[0], []]
        assert await offsets(2 * one) == [[0, 1], []]
        assert await offsets(3 * one) == [[0, 1], [0]]
        assert await offsets(3 * one - 1) == [[0, 1], []]
        assert await offsets(1, start0=2) == [[], [0]]            # p0 at its end: p1 is first

    asyncio.run(main())


def test_offsets_out_of_range_answer_at_once(broker: Broker) -> None:
    async def main() -> None:
        broker.create_topic("t")
        for value in (b"a", b"b", b"c"):
            await produce(broker, "t", value)
        rm = broker.services.replica_manager
        assert rm.delete_records("t", 0, 1) == (Errors.NONE, 1)
        for offset in (0, 4):
            task = start_fetch(broker, fetch_req([("t", 0, offset, BIG)], max_wait_ms=500))
            await asyncio.sleep(0)
            assert task.done()
            part = fetched(task.result())[("t", 0)]
            assert (part.error_code, part.high_watermark, part.log_start_offset,
                    records(part.records)) == (Errors.OFFSET_OUT_OF_RANGE, 3, 1, [])
        got = await broker.call(ApiKey.FETCH, 12, fetch_req([("t", 0, 1, BIG)]))
        assert records(fetched(got)[("t", 0)].records) == [(1, b"b"), (2, b"c")]
        assert rm.fetch_purgatory.delayed == 0

    asyncio.run(main())


def test_reads_stop_at_the_high_watermark(broker: Broker) -> None:
    async def main() -> None:
        broker.create_topic("t")
        await produce(broker, "t", b"a", b"b")
        p = broker.partition("t")
        # As if a follower had not fetched it yet: in the log, above the high watermark.
        p.log.append_as_leader(bytearray(batch(b"c")), p.leader_epoch, T0)
        assert (p.log.log_end_offset, p.log.high_watermark) == (3, 2)
        got = fetched(await broker.call(ApiKey.FETCH, 12, fetch_req([("t", 0, 0, BIG)])))
        assert (got[("t", 0)].high_watermark, records(got[("t", 0)].records)) == (
            2, [(0, b"a"), (1, b"b")])
        got = fetched(await broker.call(ApiKey.FETCH, 12, fetch_req([("t", 0, 2, BIG)])))
        assert (got[("t", 0)].error_code, records(got[("t", 0)].records)) == (0, [])
        assert p.maybe_increment_leader_hw() is True
        got = fetched(await broker.call(ApiKey.FETCH, 12, fetch_req([("t", 0, 2, BIG)])))
        assert records(got[("t", 0)].records) == [(2, b"c")]

    asyncio.run(main())


def test_unknown_partitions_sessions_and_topic_ids_answer_at_once(broker: Broker) -> None:
    async def main() -> None:
        broker.create_topic("t")
        task = start_fetch(broker, fetch_req([("t", 0, 0, BIG), ("t", 3, 0, BIG)],
                                             max_wait_ms=500))
        await asyncio.sleep(0)
        assert task.done()
        assert [(k, p.error_code) for k, p in fetched(task.result()).items()] == [
            (("t", 0), 0), (("t", 3), Errors.UNKNOWN_TOPIC_OR_PARTITION)]
        known = broker.services.metadata.topics["t"].topic_id
        request = fetch_req([("t", 0, 0, BIG), ("u", 0, 0, BIG)], max_wait_ms=500)
        request.topics[0].topic_id, request.topics[1].topic_id = known, uuid.UUID(int=99)
        got = await broker.call(ApiKey.FETCH, 13, request)
        assert [(t.topic_id, p.error_code) for t in got.responses for p in t.partitions] == [
            (known, 0), (uuid.UUID(int=99), Errors.UNKNOWN_TOPIC_ID)]
        request = fetch_req([("t", 0, 0, BIG)])
        request.session_id = 5
        got = await broker.call(ApiKey.FETCH, 12, request)
        assert (got.error_code, got.responses) == (Errors.FETCH_SESSION_ID_NOT_FOUND, [])
        assert broker.services.replica_manager.fetch_purgatory.delayed == 0

    asyncio.run(main())


def test_deleting_the_topic_wakes_a_parked_fetch_with_an_error(broker: Broker) -> None:
    async def main() -> None:
        broker.create_topic("t")
        task = start_fetch(broker, fetch_req([("t", 0, 0, BIG)], max_wait_ms=500))
        await settle()
        assert not task.done()
        broker.services.admin_manager.delete_topic("t")
        await settle()
        assert task.done()
        part = fetched(task.result())[("t", 0)]
        assert part.error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
        assert broker.services.replica_manager.fetch_purgatory.watched == 0

    asyncio.run(main())
