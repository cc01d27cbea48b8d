"""The consumer's single-thread guard (Java: ``KafkaConsumer``'s "light lock",
``acquire`` / ``release`` / ``acquireAndEnsureOpen``).

A consumer is not thread-safe, and using it from two threads at once must fail loudly
rather than corrupt its state.  The guard does not wait like a lock: a thread that finds
another one inside raises ``IllegalStateError`` at once.  The owning thread may enter
again (a public method calling another one); the guard is free when every entry has been
left.  It also holds the consumer's ``closed`` flag, since every entry but ``close``'s
refuses a closed consumer.

``with guard:`` is the entry of every public method that touches the consumer's state;
``close`` uses ``acquire`` / ``release``, as closing twice is allowed.

Thread-safety: any thread may enter; ``_owner`` and ``_depth`` are guarded by ``_lock``.
``wakeup`` does not enter: it is the one call meant to come from another thread.
"""

from __future__ import annotations

import threading
from types import TracebackType

from millrace.client.errors import IllegalStateError


class ThreadGuard:
    __slots__ = ("_depth", "_lock", "_owner", "closed")

    def __init__(self) -> None:
        self._owner: int | None = None  # guarded by _lock
        self._depth = 0  # guarded by _lock
        self._lock = threading.Lock()
        self.closed = False  # written by the owning thread

    def acquire(self) -> None:
        """Enter, or raise ``IllegalStateError`` if another thread is inside."""
        me = threading.get_ident()
        with self._lock:
            if self._owner is not None and self._owner != me:
                raise IllegalStateError("KafkaConsumer is not safe for multi-threaded access")
            self._owner = me
            self._depth += 1

    def release(self) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth == 0:
                self._owner = None

    def __enter__(self) -> None:
        """``acquire``, then refuse a closed consumer."""
        self.acquire()
        if self.closed:
            self.release()
            raise IllegalStateError("This consumer has already been closed.")

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()
