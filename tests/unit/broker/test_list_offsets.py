"""ListOffsets through the handler: earliest (-2), latest (-1, the high watermark), max
timestamp (-3), by timestamp, and unknown partitions."""

from __future__ import annotations

import asyncio

import pytest

from millrace.common.errors import Errors
from millrace.protocol import ApiKey
from tests.unit.broker.brokergen import (
    LIST_OFFSETS_V,
    PRODUCE_V,
    T0,
    Broker,
    batch,
    list_offsets_req,
    produce_req,
    produced,
)


async def three_records(broker: Broker) -> None:
    """Offsets 0, 1, 2 at timestamps T0, T0+10, T0+20, one batch each."""
    broker.create_topic("t")
    for i, value in enumerate((b"a", b"b", b"c")):
        got = await broker.call(ApiKey.PRODUCE, PRODUCE_V, produce_req(
            {("t", 0): batch(value, timestamps=[T0 + 10 * i])}))
        assert produced(got) == {("t", 0): (0, i)}


async def list_offsets(broker: Broker, *parts: tuple[str, int, int],
                       version: int = LIST_OFFSETS_V) -> list[tuple[int, int, int, int]]:
    """(error, timestamp, offset, leader_epoch) per asked partition, in order."""
    got = await broker.call(ApiKey.LIST_OFFSETS, version, list_offsets_req(parts))
    return [(p.error_code, p.timestamp, p.offset, p.leader_epoch)
            for t in got.topics for p in t.partitions]


def test_earliest_latest_and_by_timestamp(broker: Broker) -> None:
    async def main() -> None:
        await three_records(broker)
        assert await list_offsets(broker, ("t", 0, -2), ("t", 0, -1)) == [
            (0, -1, 0, 0), (0, -1, 3, 0)]
        assert await list_offsets(broker, ("t", 0, T0), ("t", 0, T0 + 5), ("t", 0, T0 + 15),
                                  ("t", 0, T0 + 20), ("t", 0, T0 + 21)) == [
            (0, T0, 0, 0), (0, T0 + 10, 1, 0), (0, T0 + 20, 2, 0), (0, T0 + 20, 2, 0),
            (0, -1, -1, -1)]

    asyncio.run(main())


def test_max_timestamp(broker: Broker) -> None:
    async def main() -> None:
        broker.create_topic("t")
        got = await broker.call(ApiKey.PRODUCE, PRODUCE_V, produce_req(
            {("t", 0): batch(b"a", b"b", b"c", timestamps=[T0 + 5, T0 + 50, T0 + 7])}))
        assert produced(got) == {("t", 0): (0, 0)}
        assert await list_offsets(broker, ("t", 0, -3)) == [(0, T0 + 50, 1, 0)]

    asyncio.run(main())


@pytest.mark.parametrize("version", [1, 4, LIST_OFFSETS_V, 11])
def test_unknown_partitions_at_each_version(broker: Broker, version: int) -> None:
    async def main() -> None:
        broker.create_topic("t")
        got = await list_offsets(broker, ("t", 0, -1), ("t", 9, -1), ("nope", 0, -2),
                                 version=version)
        epoch = 0 if version >= 4 else -1                # leader_epoch exists from v4
        assert got == [(0, -1, 0, epoch),
                       (Errors.UNKNOWN_TOPIC_OR_PARTITION, -1, -1, -1),
                       (Errors.UNKNOWN_TOPIC_OR_PARTITION, -1, -1, -1)]

    asyncio.run(main())


def test_earliest_follows_deleted_records_and_latest_the_high_watermark(
        broker: Broker) -> None:
    async def main() -> None:
        await three_records(broker)
        assert broker.services.replica_manager.delete_records("t", 0, 2) == (0, 2)
        p = broker.partition("t")
        p.log.append_as_leader(bytearray(batch(b"d")), p.leader_epoch, T0)  # above the HW
        assert (p.log.log_end_offset, p.log.high_watermark) == (4, 3)
        assert await list_offsets(broker, ("t", 0, -2), ("t", 0, -1)) == [
            (0, -1, 2, 0), (0, -1, 3, 0)]

    asyncio.run(main())


def test_by_timestamp_never_answers_an_offset_above_the_high_watermark(
        broker: Broker) -> None:
    async def main() -> None:
        await three_records(broker)
        p = broker.partition("t")
        p.log.append_as_leader(bytearray(batch(b"d", timestamps=[T0 + 30])), p.leader_epoch,
                               T0)                       # offset 3, not yet committed
        assert p.log.high_watermark == 3
        assert await list_offsets(broker, ("t", 0, T0 + 25), ("t", 0, -3)) == [
            (0, -1, -1, -1), (0, -1, -1, -1)]

    asyncio.run(main())
