"""Delayed operations and their purgatory (Kafka's ``DelayedOperation`` /
``DelayedOperationPurgatory``), on asyncio with injected time.

A request that cannot be answered yet — a Fetch below ``fetch.min.bytes``, an
``acks=all`` Produce waiting for the ISR — becomes a ``DelayedOperation`` with a
deadline.  ``try_complete_else_watch`` first tries to complete it; if it cannot, the
operation is watched under the keys (partitions) whose change may complete it.
Whatever changes a partition (an append, a high-watermark move, a leader change, a
deletion) calls ``check_and_complete(key)``, which asks each watcher of that key to try
again.  An operation still pending at its deadline is force-completed and told it
expired.  Every operation completes exactly once (``force_complete`` is the only way).

Time is the injected ``Time``: deadlines are ``time.milliseconds() + delay``.  A loop
timer calls ``advance_clock`` when a deadline should have passed; under ``MockTime``
tests move the clock and call ``advance_clock`` themselves, so nothing depends on the
wall clock.

Owned by the event-loop thread.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Hashable, Iterable

from millrace.broker.metrics.request_metrics import CURRENT_REQUEST
from millrace.common.time import Time


class DelayedOperation(ABC):
    """One parked request.  Subclasses implement ``try_complete`` (check the condition;
    if met, return ``self.force_complete()``) and ``on_complete`` (build the answer);
    ``on_expiration`` runs after a completion forced by the deadline."""

    def __init__(self, delay_ms: int) -> None:
        self.delay_ms = max(0, delay_ms)
        self.deadline_ms = 0
        self.completed = False
        self._waiter: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._keys: tuple[Hashable, ...] = ()

    @abstractmethod
    def try_complete(self) -> bool: ...

    @abstractmethod
    def on_complete(self) -> None: ...

    def on_expiration(self) -> None:  # noqa: B027 - an optional hook, empty by default
        """Called after ``on_complete`` when the deadline forced the completion."""

    def force_complete(self) -> bool:
        """Complete now unless already completed; True if this call completed it."""
        if self.completed:
            return False
        self.completed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.on_complete()
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)
        return True

    async def wait(self) -> None:
        """Return once the operation has completed.  The time spent waiting is the
        request's ``RemoteTimeMs`` (marked on the request being served, if any)."""
        if self.completed:
            return
        if self._waiter is None:
            self._waiter = asyncio.get_running_loop().create_future()
        times = CURRENT_REQUEST.get()
        if times is not None:
            times.park()
        try:
            await self._waiter
        finally:
            if times is not None:
                times.wake()


class DelayedOperationPurgatory:
    def __init__(self, name: str, time: Time) -> None:
        self.name = name
        self._time = time
        # key -> the operations watching it (a dict as an ordered set)
        self._watchers: defaultdict[Hashable, dict[DelayedOperation, None]] = defaultdict(dict)
        self._pending: set[DelayedOperation] = set()

    def try_complete_else_watch(self, op: DelayedOperation, keys: Iterable[Hashable]) -> bool:
        """Complete ``op`` now if it can be; otherwise watch it under ``keys`` until a
        ``check_and_complete`` of one of them completes it or its deadline passes.
        True if it completed at once."""
        if op.try_complete():
            return True
        op._keys = tuple(keys)
        if not op._keys or op.delay_ms <= 0:
            op.force_complete()
            op.on_expiration()
            return True
        for key in op._keys:
            self._watchers[key][op] = None
        op.deadline_ms = self._time.milliseconds() + op.delay_ms
        self._pending.add(op)
        self._arm(op)
        return False

    def check_and_complete(self, key: Hashable) -> int:
        """Let every operation watching ``key`` try again; the number completed."""
        ops = self._watchers.get(key)
        if not ops:
            return 0
        completed = 0
        for op in list(ops):
            if op.try_complete():
                completed += 1
                self._forget(op)
        return completed

    def advance_clock(self) -> int:
        """Expire every operation whose deadline has passed; the number expired."""
        now = self._time.milliseconds()
        expired = 0
        for op in [op for op in self._pending if op.deadline_ms <= now]:
            expired += self._expire(op)
        return expired

    def _expire(self, op: DelayedOperation) -> int:
        self._forget(op)
        if op.force_complete():
            op.on_expiration()
            return 1
        return 0

    def _forget(self, op: DelayedOperation) -> None:
        self._pending.discard(op)
        for key in op._keys:
            ops = self._watchers.get(key)
            if ops is not None:
                ops.pop(op, None)
                if not ops:
                    del self._watchers[key]

    def _arm(self, op: DelayedOperation) -> None:
        """A loop timer for ``op``'s deadline; re-armed while the injected clock has not
        reached it (a wall clock rounded down, or a MockTime that has not moved)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a synchronous unit test): advance_clock only
            return
        delay_s = max(0, op.deadline_ms - self._time.milliseconds()) / 1000

        def fire() -> None:
            op._timer = None
            if op.completed:
                return
            if self._time.milliseconds() >= op.deadline_ms:
                self._expire(op)  # this operation only: no scan of every pending one
            else:
                self._arm(op)

        op._timer = loop.call_later(max(delay_s, 0.001), fire)

    @property
    def is_empty(self) -> bool:
        """No operation is watching any key (``check_and_complete`` would do nothing)."""
        return not self._watchers

    @property
    def delayed(self) -> int:
        """Operations still waiting (Kafka's ``numDelayed``)."""
        return len(self._pending)

    @property
    def watched(self) -> int:
        """Watch entries, counting an operation once per key it watches."""
        return sum(len(w) for w in self._watchers.values())

    def shutdown(self) -> None:
        """Complete every pending operation (as if expired) and drop the watchers."""
        for op in list(self._pending):
            self._forget(op)
            if op.force_complete():
                op.on_expiration()
        self._watchers.clear()
