"""Produce through the handler and ``ReplicaManager.append_records`` on one node: acks,
per-partition errors, internal topics, idempotent duplicates, ``min.insync.replicas``."""

from __future__ import annotations

import asyncio

from millrace.common.errors import Errors
from millrace.protocol import ApiKey
from tests.unit.broker.brokergen import (
    PRODUCE_V,
    Broker,
    batch,
    fetch_req,
    fetched,
    produce_req,
    produced,
    records,
    settle,
)


async def read_all(broker: Broker, topic: str) -> list[tuple[int, bytes | None]]:
    got = await broker.call(ApiKey.FETCH, 12, fetch_req([(topic, 0, 0, 1 << 20)]))
    part = fetched(got)[(topic, 0)]
    assert part.error_code == 0
    return records(part.records)


def test_acks_0_1_and_all_are_answered_at_once_and_the_records_are_readable(
        broker: Broker) -> None:
    async def main() -> None:
        broker.create_topic("t")
        none = await broker.call(ApiKey.PRODUCE, PRODUCE_V,
                                 produce_req({("t", 0): batch(b"a")}, acks=0))
        assert none is None                          # acks=0: no response at all
        answers = []
        for acks, value in ((1, b"b"), (-1, b"c")):
            task = asyncio.create_task(broker.call(
                ApiKey.PRODUCE, PRODUCE_V, produce_req({("t", 0): batch(value, b"x")}, acks)))
            await asyncio.sleep(0)                   # one step: nothing to wait for
            assert task.done()
            answers.append(produced(task.result()))
        assert answers == [{("t", 0): (0, 1)}, {("t", 0): (0, 3)}]
        assert broker.services.replica_manager.produce_purgatory.delayed == 0
        assert broker.services.replica_manager.produce_purgatory.watched == 0
        assert await read_all(broker, "t") == [
            (0, b"a"), (1, b"b"), (2, b"x"), (3, b"c"), (4, b"x")]

    asyncio.run(main())


def test_the_response_carries_log_start_offset_and_no_append_time(broker: Broker) -> None:
    async def main() -> None:
        broker.create_topic("t")
        got = await broker.call(ApiKey.PRODUCE, PRODUCE_V, produce_req({("t", 0): batch(b"a")}))
        part = got.responses[0].partition_responses[0]
        assert (part.error_code, part.base_offset, part.log_append_time_ms,
                part.log_start_offset, part.error_message) == (0, 0, -1, 0, None)

    asyncio.run(main())


def test_invalid_acks_are_refused_and_nothing_is_appended(broker: Broker) -> None:
    async def main() -> None:
        broker.create_topic("t", 2)
        got = await broker.call(ApiKey.PRODUCE, PRODUCE_V, produce_req(
            {("t", 0): batch(b"a"), ("t", 1): batch(b"b")}, acks=2))
        assert produced(got) == {("t", 0): (Errors.INVALID_REQUIRED_ACKS, -1),
                                 ("t", 1): (Errors.INVALID_REQUIRED_ACKS, -1)}
        assert [broker.partition("t", i).log.log_end_offset for i in (0, 1)] == [0, 0]

    asyncio.run(main())


def test_unknown_partitions_fail_alone(broker: Broker) -> None:
    async def main() -> None:
        broker.create_topic("t")
        got = await broker.call(ApiKey.PRODUCE, PRODUCE_V, produce_req(
            {("t", 0): batch(b"a"), ("t", 5): batch(b"b"), ("nope", 0): batch(b"c")}))
        assert produced(got) == {("t", 0): (0, 0),
                                 ("t", 5): (Errors.UNKNOWN_TOPIC_OR_PARTITION, -1),
                                 ("nope", 0): (Errors.UNKNOWN_TOPIC_OR_PARTITION, -1)}

    asyncio.run(main())


def test_an_internal_topic_is_refused_to_clients(broker: Broker) -> None:
    async def main() -> None:
        got = await broker.call(ApiKey.PRODUCE, PRODUCE_V,
                                produce_req({("__consumer_offsets", 0): batch(b"a")}))
        part = got.responses[0].partition_responses[0]
        assert (part.error_code, part.base_offset) == (Errors.INVALID_TOPIC_EXCEPTION, -1)
        assert part.error_message == \
            "Cannot append records to internal topic __consumer_offsets"
        assert broker.partition("__consumer_offsets").log.log_end_offset == 0

    asyncio.run(main())


def test_an_idempotent_duplicate_is_answered_with_the_original_offset(broker: Broker) -> None:
    async def main() -> None:
        broker.create_topic("t")
        first = batch(b"plain")
        idem = batch(b"a", b"b", producer_id=1000, producer_epoch=0, base_sequence=0)
        nxt = batch(b"c", producer_id=1000, producer_epoch=0, base_sequence=2)
        offsets = []
        for data in (first, idem, idem, nxt):
            got = await broker.call(ApiKey.PRODUCE, PRODUCE_V, produce_req({("t", 0): data}))
            offsets.append(produced(got)[("t", 0)])
        assert offsets == [(0, 0), (0, 1), (0, 1), (0, 3)]
        assert await read_all(broker, "t") == [(0, b"plain"), (1, b"a"), (2, b"b"), (3, b"c")]

    asyncio.run(main())


def test_min_insync_replicas_above_the_isr_refuses_acks_all_only(broker: Broker) -> None:
    async def main() -> None:
        broker.create_topic("strict", configs={"min.insync.replicas": "2"})
        got = await broker.call(ApiKey.PRODUCE, PRODUCE_V,
                                produce_req({("strict", 0): batch(b"a")}, acks=-1))
        part = got.responses[0].partition_responses[0]
        assert (part.error_code, part.base_offset) == (Errors.NOT_ENOUGH_REPLICAS, -1)
        assert part.error_message is not None and "min.isr requirement of 2" in part.error_message
        assert broker.partition("strict").log.log_end_offset == 0     # nothing appended
        assert broker.services.replica_manager.produce_purgatory.delayed == 0
        got = await broker.call(ApiKey.PRODUCE, PRODUCE_V,
                                produce_req({("strict", 0): batch(b"b")}, acks=1))
        assert produced(got) == {("strict", 0): (0, 0)}
        assert await read_all(broker, "strict") == [(0, b"b")]

    asyncio.run(main())


def test_malformed_records_are_partition_errors(broker: Broker) -> None:
    async def main() -> None:
        broker.create_topic("t", 4)
        two = batch(b"a") + batch(b"b")
        bad_crc = bytearray(batch(b"c"))
        bad_crc[-1] ^= 0xFF                          # a value byte: the CRC no longer holds
        got = await broker.call(ApiKey.PRODUCE, PRODUCE_V, produce_req(
            {("t", 0): two, ("t", 1): b"\x00" * 70, ("t", 2): bytes(bad_crc),
             ("t", 3): batch(b"ok")}))
        assert produced(got) == {("t", 0): (Errors.INVALID_RECORD, -1),
                                 ("t", 1): (Errors.INVALID_RECORD, -1),     # magic 0
                                 ("t", 2): (Errors.CORRUPT_MESSAGE, -1),
                                 ("t", 3): (0, 0)}
        assert [broker.partition("t", i).log.log_end_offset for i in range(4)] == [0, 0, 0, 1]

    asyncio.run(main())


def test_topic_ids_from_v13(broker: Broker) -> None:
    async def main() -> None:
        broker.create_topic("t")
        known = broker.services.metadata.topics["t"].topic_id
        request = produce_req({("t", 0): batch(b"a"), ("gone", 0): batch(b"b")})
        request.topic_data[0].topic_id = known
        request.topic_data[1].topic_id = type(known)(int=12345)
        got = await broker.call(ApiKey.PRODUCE, 13, request)
        assert [(t.topic_id, p.error_code, p.base_offset) for t in got.responses
                for p in t.partition_responses] == [
            (known, 0, 0), (type(known)(int=12345), Errors.UNKNOWN_TOPIC_ID, -1)]
        await settle()
        assert await read_all(broker, "t") == [(0, b"a")]

    asyncio.run(main())
