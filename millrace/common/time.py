"""Injected time (Java's ``Time`` / ``MockTime``): components never call the clock directly.

Background loops take a ``Time`` so tests step them deterministically with ``MockTime``.
"""

from __future__ import annotations

import time as _time


class Time:
    def milliseconds(self) -> int:
        raise NotImplementedError

    def nanoseconds(self) -> int:
        raise NotImplementedError


class SystemTime(Time):
    def milliseconds(self) -> int:
        return _time.time_ns() // 1_000_000

    def nanoseconds(self) -> int:
        return _time.monotonic_ns()


class MockTime(Time):
    """Time that moves only when told to (``sleep`` advances it at once)."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._ns = start_ms * 1_000_000

    def milliseconds(self) -> int:
        return self._ns // 1_000_000

    def nanoseconds(self) -> int:
        return self._ns

    def sleep(self, ms: float) -> None:
        self._ns += int(ms * 1_000_000)


SYSTEM_TIME = SystemTime()
