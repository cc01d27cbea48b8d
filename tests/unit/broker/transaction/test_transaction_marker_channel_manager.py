"""Marker sending with an injected sender: grouping by leader, retries, drops, give-up,
and batching the markers of many transactions per broker."""

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
    return answer_per_producer(
        request, {(m.producer_id, tp): code for m in request.markers
                  for tp, code in errors.items()})


def answer_per_producer(request: WriteTxnMarkersRequest,
                        errors: dict[tuple[int, tuple[str, int]], int]
                        ) -> WriteTxnMarkersResponse:
    cls = WriteTxnMarkersResponse
    markers = []
    for m in request.markers:
        topics = [cls.WritableTxnMarkerResult.WritableTxnMarkerTopicResult(
            name=t.name, partitions=[
                cls.WritableTxnMarkerResult.WritableTxnMarkerTopicResult
                .WritableTxnMarkerPartitionResult(
                    partition_index=p,
                    error_code=errors.get((m.producer_id, (t.name, p)), Errors.NONE))
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


async def finish(mgr: TransactionMarkerChannelManager) -> None:
    """Let every transaction's markers finish (or give up), then stop."""
    for _ in range(200):
        await asyncio.sleep(0.001)
        if not mgr.in_flight:
            break
    await mgr.stop()


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
        await finish(mgr)
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


# ---------------------------------------------------------------------- batching per broker
T1 = TxnMarkerEntry("t1", 0, 7, 1000, 2, True, frozenset({("a", 0)}))
T2 = TxnMarkerEntry("t2", 1, 7, 2000, 0, False, frozenset({("a", 1)}))
T3 = TxnMarkerEntry("t3", 2, 7, 3000, 4, True, frozenset({("a", 1), ("b", 0)}))
A0, A1, B0 = ("a", 0), ("a", 1), ("b", 0)

Sent = tuple[int, dict[int, list[tuple[str, int]]]]
Answer = dict[tuple[int, tuple[str, int]], int] | BaseException


def run_batched(answers: list[Answer], later: list[TxnMarkerEntry]
                ) -> tuple[list[str], list[Sent]]:
    """T1 goes out first and its request is held; ``later`` are added meanwhile, then it
    is answered.  Request i gets ``answers[i]`` ((producer id, partition) -> error, or an
    exception to raise), NONE everywhere once the list runs out.  Every partition is
    led by broker 1."""
    md = FakeMetadata()
    md.leaders[A1] = 1
    completed: list[str] = []
    sent: list[Sent] = []

    async def main() -> None:
        release = asyncio.Event()

        async def send(node: int, req: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
            call = len(sent)
            sent.append((node, {m.producer_id: sorted((t.name, p) for t in m.topics
                                                      for p in t.partition_indexes)
                                for m in req.markers}))
            if call == 0:
                await release.wait()
            outcome = answers[call] if call < len(answers) else {}
            if isinstance(outcome, BaseException):
                raise outcome
            return answer_per_producer(req, outcome)

        mgr = TransactionMarkerChannelManager(
            md, send, is_current=lambda e: True,  # type: ignore[arg-type]
            on_complete=lambda e: completed.append(e.transactional_id),
            backoff_ms=1, max_backoff_ms=2)
        mgr.add_txn_markers_to_send(T1)
        while not sent:
            await asyncio.sleep(0)
        for entry in later:
            mgr.add_txn_markers_to_send(entry)
            for _ in range(5):  # its task queues its marker
                await asyncio.sleep(0)
        assert len(sent) == 1  # the others wait for the request in flight
        release.set()
        await finish(mgr)
    asyncio.run(main())
    return sorted(completed), sent


def test_markers_queued_during_a_request_go_out_together_in_the_next() -> None:
    completed, sent = run_batched([], [T2, T3])
    assert sent == [(1, {1000: [A0]}), (1, {2000: [A1], 3000: [A1, B0]})]
    assert completed == ["t1", "t2", "t3"]


def test_batched_request_carries_each_transactions_own_marker_fields() -> None:
    requests: list[WriteTxnMarkersRequest] = []

    async def main() -> None:
        md = FakeMetadata()
        md.leaders[A1] = 1

        async def send(node: int, req: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
            requests.append(req)
            await asyncio.sleep(0)
            return answer(req, {})
        mgr = TransactionMarkerChannelManager(
            md, send, is_current=lambda e: True,  # type: ignore[arg-type]
            on_complete=lambda e: None)
        for entry in (T2, T3):
            mgr.add_txn_markers_to_send(entry)
        for _ in range(20):
            await asyncio.sleep(0)
        await mgr.stop()
    asyncio.run(main())
    assert len(requests) == 1
    assert [(m.producer_id, m.producer_epoch, m.transaction_result, m.coordinator_epoch)
            for m in requests[0].markers] == [(2000, 0, False, 7), (3000, 4, True, 7)]


def test_per_marker_error_is_retried_by_its_transaction_only() -> None:
    # t2 and t3 both wrote a-1; only t2's marker there failed
    completed, sent = run_batched([{}, {(2000, A1): Errors.NOT_LEADER_OR_FOLLOWER}],
                                  [T2, T3])
    assert sent == [(1, {1000: [A0]}), (1, {2000: [A1], 3000: [A1, B0]}),
                    (1, {2000: [A1]})]
    assert completed == ["t1", "t2", "t3"]


def test_fenced_marker_abandons_its_transaction_and_not_the_other() -> None:
    completed, sent = run_batched([{}, {(3000, B0): Errors.INVALID_PRODUCER_EPOCH}],
                                  [T2, T3])
    assert len(sent) == 2 and sorted(sent[1][1]) == [2000, 3000]
    assert completed == ["t1", "t2"]


def test_unreachable_broker_retries_every_marker_of_the_request() -> None:
    completed, sent = run_batched([{}, BrokerNotAvailableError("down")], [T2, T3])
    assert sent[1] == (1, {2000: [A1], 3000: [A1, B0]})
    resent: dict[int, list[tuple[str, int]]] = {}
    for _, markers in sent[2:]:
        resent.update(markers)
    assert resent == {2000: [A1], 3000: [A1, B0]}
    assert completed == ["t1", "t2", "t3"]


def test_one_request_never_carries_two_markers_of_one_producer_id() -> None:
    # the response is split by producer id, so the second waits for the next request
    twin = TxnMarkerEntry("t2-twin", 1, 7, 2000, 0, False, frozenset({B0}))
    completed, sent = run_batched([], [T2, twin])
    assert sent == [(1, {1000: [A0]}), (1, {2000: [A1]}), (1, {2000: [B0]})]
    assert completed == ["t1", "t2", "t2-twin"]


def test_superseded_marker_still_queued_is_not_sent() -> None:
    # t2's marker is queued, then t2's markers are handed over again (a reload)
    newer = TxnMarkerEntry("t2", 1, 8, 2000, 0, False, frozenset({B0}))
    completed, sent = run_batched([], [T2, newer])
    assert sent == [(1, {1000: [A0]}), (1, {2000: [B0]})]
    assert completed == ["t1", "t2"]
