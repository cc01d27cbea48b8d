"""``DelayedOperationPurgatory`` on ``MockTime``: each operation completes exactly once,
leaves no watch entry behind, expires only when due, and shutdown answers the rest."""

from __future__ import annotations

import asyncio

from millrace.broker.purgatory import DelayedOperation, DelayedOperationPurgatory
from millrace.common.time import MockTime

T0 = 1_700_000_000_000


class Op(DelayedOperation):
    """Completes once ``ready`` is set; counts its completions and expirations."""

    def __init__(self, delay_ms: int, ready: bool = False) -> None:
        super().__init__(delay_ms)
        self.ready = ready
        self.completions = 0
        self.expirations = 0

    def try_complete(self) -> bool:
        return self.force_complete() if self.ready else False

    def on_complete(self) -> None:
        self.completions += 1

    def on_expiration(self) -> None:
        self.expirations += 1


def make() -> tuple[MockTime, DelayedOperationPurgatory]:
    time = MockTime(T0)
    return time, DelayedOperationPurgatory("Test", time)


def test_completed_by_a_key_once_then_neither_another_key_nor_expiry_repeats_it() -> None:
    time, purgatory = make()
    op = Op(100)
    assert purgatory.try_complete_else_watch(op, ["a", "b", "c"]) is False
    assert (purgatory.delayed, purgatory.watched, op.deadline_ms) == (1, 3, T0 + 100)
    assert purgatory.check_and_complete("b") == 0          # not ready: still parked
    op.ready = True
    assert purgatory.check_and_complete("b") == 1
    assert (purgatory.delayed, purgatory.watched) == (0, 0)   # gone from a and c too
    assert purgatory.check_and_complete("a") == 0
    time.sleep(100)
    assert purgatory.advance_clock() == 0
    assert (op.completed, op.completions, op.expirations) == (True, 1, 0)


def test_expired_once_then_a_key_does_not_complete_it_again() -> None:
    time, purgatory = make()
    op = Op(50)
    purgatory.try_complete_else_watch(op, ["a", "b"])
    time.sleep(50)
    assert purgatory.advance_clock() == 1
    assert (purgatory.delayed, purgatory.watched) == (0, 0)
    op.ready = True
    assert purgatory.check_and_complete("a") == 0
    assert purgatory.advance_clock() == 0
    assert (op.completions, op.expirations) == (1, 1)
    assert op.force_complete() is False


def test_advance_clock_expires_only_the_operations_that_are_due() -> None:
    time, purgatory = make()
    ops = [Op(100), Op(200), Op(300)]
    for i, op in enumerate(ops):
        purgatory.try_complete_else_watch(op, [f"k{i}", "shared"])
    time.sleep(199)
    assert purgatory.advance_clock() == 1
    assert [op.expirations for op in ops] == [1, 0, 0]
    time.sleep(1)
    assert purgatory.advance_clock() == 1
    assert [op.expirations for op in ops] == [1, 1, 0]
    assert (purgatory.delayed, purgatory.watched) == (1, 2)
    ops[2].ready = True
    assert purgatory.check_and_complete("shared") == 1
    assert (purgatory.delayed, purgatory.watched) == (0, 0)
    assert [(op.completions, op.expirations) for op in ops] == [(1, 1), (1, 1), (1, 0)]


def test_an_operation_that_can_complete_at_once_is_never_watched() -> None:
    _, purgatory = make()
    ready = Op(100, ready=True)
    assert purgatory.try_complete_else_watch(ready, ["a"]) is True
    assert (ready.completions, ready.expirations) == (1, 0)
    no_wait, no_keys = Op(0), Op(100)
    assert purgatory.try_complete_else_watch(no_wait, ["a"]) is True
    assert purgatory.try_complete_else_watch(no_keys, []) is True
    assert [(op.completions, op.expirations) for op in (no_wait, no_keys)] == [(1, 1), (1, 1)]
    assert (purgatory.delayed, purgatory.watched) == (0, 0)


def test_shutdown_completes_every_pending_operation_as_expired() -> None:
    _, purgatory = make()
    ops = [Op(100), Op(10_000)]
    for op in ops:
        purgatory.try_complete_else_watch(op, ["a"])
    purgatory.shutdown()
    assert [(op.completions, op.expirations) for op in ops] == [(1, 1), (1, 1)]
    assert (purgatory.delayed, purgatory.watched) == (0, 0)
    assert purgatory.advance_clock() == 0


def test_waiters_are_released_by_a_key_by_expiry_and_by_shutdown() -> None:
    async def main() -> None:
        time, purgatory = make()
        by_key, by_expiry, by_shutdown = Op(100), Op(100), Op(200)
        for op in (by_key, by_expiry, by_shutdown):
            purgatory.try_complete_else_watch(op, [id(op)])
        tasks = [asyncio.create_task(op.wait()) for op in (by_key, by_expiry, by_shutdown)]
        await asyncio.sleep(0)
        assert [t.done() for t in tasks] == [False, False, False]
        by_key.ready = True
        purgatory.check_and_complete(id(by_key))
        await asyncio.sleep(0)
        assert [t.done() for t in tasks] == [True, False, False]
        time.sleep(100)                                    # by_shutdown is not due yet
        assert purgatory.advance_clock() == 1
        await asyncio.sleep(0)
        assert [t.done() for t in tasks] == [True, True, False]
        purgatory.shutdown()
        await asyncio.sleep(0)
        assert [t.done() for t in tasks] == [True, True, True]
        await by_key.wait()                                # already completed: returns

    asyncio.run(main())


def test_the_loop_timer_waits_for_the_injected_clock() -> None:
    async def main() -> None:
        time, purgatory = make()
        op = Op(5)
        purgatory.try_complete_else_watch(op, ["a"])
        await asyncio.sleep(0.03)          # the timer fired several times; MockTime did not move
        assert op.completions == 0 and purgatory.delayed == 1
        time.sleep(5)
        await asyncio.wait_for(op.wait(), 1)
        assert (op.completions, op.expirations, purgatory.watched) == (1, 1, 0)

    asyncio.run(main())
