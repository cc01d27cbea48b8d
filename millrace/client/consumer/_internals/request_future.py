"""The outcome of an asynchronous request (Java ``RequestFuture``) and a deadline (``Timer``).

A ``RequestFuture`` is completed exactly once, with a value or an exception, by whichever
thread polls the network when the answer arrives (the application thread or the
heartbeat thread).  Listeners run on that thread at completion time, or at once when added
to a future that is already done.  Nobody blocks on the future itself: a caller waits by
polling the network until ``is_done`` (``ConsumerNetworkClient.poll_until``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from millrace.client.errors import IllegalStateError
from millrace.common.time import Time

T = TypeVar("T")
S = TypeVar("S")

_PENDING: Any = object()


class RequestFuture(Generic[T]):
    __slots__ = ("_exception", "_listeners", "_lock", "_value")

    def __init__(self) -> None:
        self._value: Any = _PENDING
        self._exception: BaseException | None = None
        self._listeners: list[tuple[Callable[[T], None] | None,
                                    Callable[[BaseException], None] | None]] = []
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ state
    @property
    def is_done(self) -> bool:
        return self._value is not _PENDING or self._exception is not None

    def succeeded(self) -> bool:
        return self._value is not _PENDING

    def failed(self) -> bool:
        return self._exception is not None

    def is_retriable(self) -> bool:
        return self._exception is not None and bool(getattr(self._exception, "retriable",
                                                            False))

    @property
    def value(self) -> T:
        if self._value is _PENDING:
            raise IllegalStateError("the future has no value: it has not succeeded")
        return self._value

    @property
    def exception(self) -> BaseException:
        if self._exception is None:
            raise IllegalStateError("the future has not failed")
        return self._exception

    # ------------------------------------------------------------------ completion
    def complete(self, value: T) -> None:
        with self._lock:
            if self.is_done:
                raise IllegalStateError("the future was already completed")
            self._value = value
            listeners, self._listeners = self._listeners, []
        for on_success, _ in listeners:
            if on_success is not None:
                on_success(value)

    def raise_(self, exception: BaseException) -> None:
        with self._lock:
            if self.is_done:
                raise IllegalStateError("the future was already completed")
            self._exception = exception
            listeners, self._listeners = self._listeners, []
        for _, on_failure in listeners:
            if on_failure is not None:
                on_failure(exception)

    def add_listener(self, on_success: Callable[[T], None] | None = None,
                     on_failure: Callable[[BaseException], None] | None = None) -> None:
        with self._lock:
            if not self.is_done:
                self._listeners.append((on_success, on_failure))
                return
        if self._exception is not None:
            if on_failure is not None:
                on_failure(self._exception)
        elif on_success is not None:
            on_success(self._value)

    def chain(self, other: RequestFuture[T]) -> None:
        """Complete ``other`` the way this one completes."""
        self.add_listener(other.complete, other.raise_)

    def compose(self, adapter: Callable[[T, RequestFuture[S]], None]) -> RequestFuture[S]:
        """A new future that ``adapter(value, new_future)`` completes on success; failures
        pass through unchanged."""
        out: RequestFuture[S] = RequestFuture()

        def on_success(value: T) -> None:
            try:
                adapter(value, out)
            except Exception as e:  # an adapter bug must not leave the future pending
                if not out.is_done:
                    out.raise_(e)
                else:
                    raise
        self.add_listener(on_success, out.raise_)
        return out

    @staticmethod
    def failure(exception: BaseException) -> RequestFuture[Any]:
        f: RequestFuture[Any] = RequestFuture()
        f.raise_(exception)
        return f

    @staticmethod
    def of(value: T) -> RequestFuture[T]:
        f: RequestFuture[T] = RequestFuture()
        f.complete(value)
        return f

    def __repr__(self) -> str:
        state = ("pending" if not self.is_done else
                 f"failed: {self._exception!r}" if self._exception else "succeeded")
        return f"RequestFuture({state})"


class Timer:
    """A deadline on an injected clock (Java ``Timer``).  ``update`` reads the clock;
    the other accessors use the last reading."""

    __slots__ = ("_deadline", "_start", "_time", "current_ms")

    def __init__(self, time: Time, timeout_ms: float) -> None:
        self._time = time
        self.current_ms = self._start = time.milliseconds()
        self._deadline = self._start + max(int(timeout_ms), 0)

    def update(self, now_ms: int | None = None) -> int:
        self.current_ms = self._time.milliseconds() if now_ms is None else now_ms
        return self.current_ms

    @property
    def remaining_ms(self) -> int:
        return max(self._deadline - self.current_ms, 0)

    @property
    def elapsed_ms(self) -> int:
        return self.current_ms - self._start

    def is_expired(self) -> bool:
        return self.current_ms >= self._deadline

    def not_expired(self) -> bool:
        return not self.is_expired()
