"""TxnMarkerWriter on its own: what it asks append_records for, and who hears of it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from millrace.broker.delayed_produce import PartitionResponse, TopicPartition
from millrace.broker.txn_marker_writer import TxnMarkerEntry, TxnMarkerWriter
from millrace.common.errors import Errors
from millrace.common.time import MockTime
from millrace.record.control import read_end_txn_marker
from millrace.storage import AppendOrigin


class FakeAppend:
    """append_records answering NOT_LEADER_OR_FOLLOWER for the partitions in ``refuse``."""

    def __init__(self, refuse: set[TopicPartition]) -> None:
        self.refuse = refuse
        self.calls: list[tuple[int, int, dict[TopicPartition, bytes | None], Any, bool]] = []

    async def __call__(self, timeout_ms: int, required_acks: int,
                       entries: dict[TopicPartition, bytes | None], *, origin: AppendOrigin,
                       internal_topics_allowed: bool) -> dict[TopicPartition, PartitionResponse]:
        self.calls.append((timeout_ms, required_acks, entries, origin, internal_topics_allowed))
        return {tp: PartitionResponse(error=Errors.NOT_LEADER_OR_FOLLOWER if tp in self.refuse
                                      else Errors.NONE) for tp in entries}


def test_one_marker_per_partition_as_coordinator_with_acks_all() -> None:
    append = FakeAppend(refuse={("t", 1)})
    writer = TxnMarkerWriter(append, MockTime(1000))
    got = asyncio.run(writer.append_txn_markers(
        [TxnMarkerEntry(7, 2, 5, False, (("t", 0), ("t", 1)))], timeout_ms=50))
    assert got == [{("t", 0): Errors.NONE, ("t", 1): Errors.NOT_LEADER_OR_FOLLOWER}]
    [(timeout_ms, acks, entries, origin, internal)] = append.calls
    assert (timeout_ms, acks, origin, internal) == (50, -1, AppendOrigin.COORDINATOR, True)
    for records in entries.values():
        assert records is not None
        marker = read_end_txn_marker(records)
        assert marker is not None and not marker.committed and marker.coordinator_epoch == 5


def test_listeners_hear_successes_and_a_failing_one_stops_nobody(
        caplog: pytest.LogCaptureFixture) -> None:
    writer = TxnMarkerWriter(FakeAppend(refuse={("t", 1)}), MockTime(1000))
    heard: list[tuple[str, int, int, bool]] = []

    def broken(*args: Any) -> None:
        raise RuntimeError("listener bug")

    writer.listeners.extend([broken, lambda *a: heard.append(a)])
    asyncio.run(writer.append_txn_markers(
        [TxnMarkerEntry(7, 2, 5, True, (("t", 0), ("t", 1))),
         TxnMarkerEntry(8, 0, 5, False, (("u", 0),))]))
    assert heard == [("t", 0, 7, True), ("u", 0, 8, False)]
    assert "transaction marker listener failed for t-0" in caplog.text
