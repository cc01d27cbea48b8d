"""How idle the broker's event loop is: Kafka's
``kafka.network:type=SocketServer,name=NetworkProcessorAvgIdlePercent`` (0..1), the share
of time its network threads wait for sockets.  millrace has one loop doing network and
handler work, so the share is that of the loop's time spent inside ``select`` waiting
for I/O or a timer.

``IdleTimingSelector`` is the platform's default selector timing each ``select``;
``run(coro)`` runs the broker's main coroutine on a loop built around one (the broker
process and ``millrace broker`` do), and ``current_selector()`` finds it from inside the
loop's thread.  A broker running on a loop it did not make (in-process test fixtures)
has no idle gauge.

Thread ownership: the selector is used by its loop's thread only; ``idle_s`` is read
there too.
"""

from __future__ import annotations

import asyncio
import selectors
import threading
import time as _time
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
_local = threading.local()


class IdleTimingSelector(selectors.DefaultSelector):
    def __init__(self) -> None:
        super().__init__()
        self.idle_s = 0.0  # total time inside select()
        _local.selector = self

    def select(self, timeout: float | None = None) -> list[Any]:
        started = _time.perf_counter()
        try:
            return super().select(timeout)
        finally:
            self.idle_s += _time.perf_counter() - started


def current_selector() -> IdleTimingSelector | None:
    selector = getattr(_local, "selector", None)
    return selector if isinstance(selector, IdleTimingSelector) else None


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on a selector loop whose idle time is measured."""
    with asyncio.Runner(loop_factory=lambda: asyncio.SelectorEventLoop(
            IdleTimingSelector())) as runner:
        return runner.run(main)


class IdleShare:
    """The idle share over the last sample interval (``sample()`` every tick)."""

    def __init__(self, selector: IdleTimingSelector) -> None:
        self.selector = selector
        self._last = (_time.perf_counter(), selector.idle_s)
        self.value = 1.0

    def sample(self) -> None:
        now, idle = _time.perf_counter(), self.selector.idle_s
        elapsed = now - self._last[0]
        if elapsed > 0:
            self.value = min(1.0, max(0.0, (idle - self._last[1]) / elapsed))
        self._last = (now, idle)
