"""Marker sending with an injected sender: grouping by leader, retries, drops, give-up."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from millrace.broker.metadata import PartitionState
from millrace.broker.transaction.coordinator import TxnMarkerEntry
from millrace.broker.transaction.transaction_marker_channel_manager import (
    TransactionMarkerChannelManager,
)
from millrace.common.errors import BrokerNotAvailableError, Errors
from millrace.protocol.types import WriteTxnMarkersRequest, WriteTxnMarkersResponse

ENTRY = TxnMarkerEntry("tx", 3, 7, 1000, 2, True,
                       frozenset({("a", 0), ("a", 1), ("b", 0), ("gone", 0)}))


class _Topic:
    def __init__(self, partitions: int) -> None:
        self.partitions = partitions


class FakeMetadata:
    def __init__(self) -> None:
        self.topics: dict[str, Any] = {"a": _Topic(2), "b": _Topic(1)}
        self.leaders = {("a", 0): 1, ("a", 1): 2, ("b", 0): 1}

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        leader = self.leaders.get((topic, partition))
        return None if leader is None else PartitionState(leader, 5, (leader,))


def answer(request: WriteTxnMarkersRequest, errors: dict[tuple[str, int], int]
           ) -> WriteTxnMarkersResponse:
    cls = WriteTxnMarkersResponse
    markers = []
    for m in request.markers:
        topics = [cls.WritableTxnMarkerResult.WritableTxnMarkerTopicResult(
            name=t.name, partitions=[
                cls.WritableTxnMarkerResult.WritableTxnMarkerTopicResult
                .WritableTxnMarkerPartitionResult(
                    partition_index=p, error_code=errors.get((t.name, p), Errors.NONE))
                for p in t.partition_indexes]) for t in m.topics]
        markers.append(cls.WritableTxnMarkerResult(producer_id=m.producer_id, topics=topics))
    return cls(markers=markers)


class Script:
    """Answers per round from a list of {(topic, partition): error} (or an exception
    per node)."""

    def __init__(self, rounds: list[dict[Any, Any]],
                 on_send: Callable[[], None] | None = None) -> None:
        self.rounds = rounds
        self.on_send = on_send
        self.sent: list[tuple[int, list[tuple[str, int]], bool, int, int, int]] = []
        self.round = 0

    async def __call__(self, node: int, request: WriteTxnMarkersRequest
                       ) -> WriteTxnMarkersResponse:
        m = request.markers[0]
        parts = [(t.name, p) for t in m.topics for p in t.partition_indexes]
        self.sent.append((node, parts, m.transaction_result, m.producer_id,
                          m.producer_epoch, m.coordinator_epoch))
        if self.on_send is not None:
            self.on_send()
        errors = self.rounds[min(self.round, len(self.rounds) - 1)]
        exc = errors.get(node)
        if isinstance(exc, BaseException):
            raise exc
        return answer(request, errors)


def run(script: Script, metadata: FakeMetadata | None = None,
        current: bool = True) -> tuple[list[TxnMarkerEntry], Script]:
    completed: list[TxnMarkerEntry] = []
    md = metadata or FakeMetadata()

    async def main() -> None:
        async def send(node: int, req: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
            return await script(node, req)

        mgr = TransactionMarkerChannelManager(
            md, send, is_current=lambda e: current, on_complete=completed.append,  # type: ignore[arg-type]
            backoff_ms=1, max_backoff_ms=2)
        original = mgr.send_round

        async def counted(entry: TxnMarkerEntry, parts: set[tuple[str, int]]) -> Any:
            try:
                return await original(entry, parts)
            finally:
                script.round += 1
        mgr.send_round = counted  # type: ignore[method-assign,assignment]
        mgr.add_txn_markers_to_send(ENTRY)
        for _ in range(200):
            await asyncio.sleep(0.001)
            if not mgr.in_flight:
                break
        await mgr.stop()
    asyncio.run(main())
    return completed, script


def test_one_request_per_leader_and_vanished_partitions_dropped() -> None:
    completed, script = run(Script([{}]))
    assert completed == [ENTRY]
    assert sorted((n, sorted(p)) for n, p, *_ in script.sent) == [
        (1, [("a", 0), ("b", 0)]), (2, [("a", 1)])]
    assert {tuple(s[2:]) for s in script.sent} == {(True, 1000, 2, 7)}


def test_retriable_errors_and_unreachable_leader_are_retried() -> None:
    md = FakeMetadata()
    rounds: list[dict[Any, Any]] = [
        {("a", 0): Errors.NOT_LEADER_OR_FOLLOWER, 2: BrokerNotAvailableError("down")},
        {("a", 0): Errors.NOT_ENOUGH_REPLICAS},
        {},
    ]
    completed, script = run(Script(rounds), md)
    assert completed == [ENTRY]
    per_round = [sorted((n, sorted(p)) for n, p, *_ in script.sent[:2]),
                 sorted((n, sorted(p)) for n, p, *_ in script.sent[2:4]),
                 [(n, sorted(p)) for n, p, *_ in script.sent[4:]]]
    assert per_round == [[(1, [("a", 0), ("b", 0)]), (2, [("a", 1)])],
                         [(1, [("a", 0)]), (2, [("a", 1)])],
                         [(1, [("a", 0)])]]


def test_leaderless_partition_waits_for_a_leader() -> None:
    md = FakeMetadata()
    del md.leaders[("a", 1)]
    # the election finishes while the first round is under way
    script = Script([{}], on_send=lambda: md.leaders.__setitem__(("a", 1), 2))
    completed, script = run(script, md)
    assert completed == [ENTRY]
    assert sorted(p for n, ps, *_ in script.sent if n == 2 for p in ps) == [("a", 1)]


def test_fenced_producer_epoch_abandons_without_completing() -> None:
    completed, script = run(Script([{("a", 1): Errors.INVALID_PRODUCER_EPOCH}]))
    assert completed == []
    assert len(script.sent) == 2


def test_markers_no_longer_current_are_not_sent() -> None:
    completed, script = run(Script([{}]), current=False)
    assert (completed, script.sent) == ([], [])
