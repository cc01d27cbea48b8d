"""``buffer.memory`` accounting with fair blocking (Java ``BufferPool``).

Java's pool hands out ``ByteBuffer``s; Python's batches grow their own ``bytearray``s, so
this pool keeps only the books: every new batch reserves ``max(batch.size, record)``
bytes before it is created and gives them back when the batch completes.  When the
books are empty, ``allocate`` blocks -- waiters are served first come, first served --
for at most ``max.block.ms`` and then raises ``BufferExhaustedError``.  While anyone
waits, the accumulator treats every batch as ready (``queued() > 0``), so memory frees
up as fast as the brokers allow.

Thread-safe: ``allocate`` is called by application threads, ``deallocate`` by the sender.
"""

from __future__ import annotations

import threading
import time as _time
from collections import deque

from millrace.client.errors import BufferExhaustedError, IllegalStateError
from millrace.client.metrics import Sensor


class BufferPool:
    def __init__(self, total_memory: int, poolable_size: int,
                 wait_time_sensor: Sensor | None = None) -> None:
        self.total_memory = total_memory
        self.poolable_size = poolable_size
        self._lock = threading.Lock()
        self._available = total_memory  # guarded by _lock
        self._waiters: deque[threading.Condition] = deque()  # guarded by _lock
        self._closed = False
        self._wait_time = wait_time_sensor

    def allocate(self, size: int, max_time_to_block_ms: float) -> int:
        """Reserve ``size`` bytes, blocking up to ``max_time_to_block_ms``; returns ``size``."""
        if size > self.total_memory:
            raise ValueError(f"Attempt to allocate {size} bytes, but there is a hard limit of "
                             f"{self.total_memory} on memory allocations.")
        with self._lock:
            if self._closed:
                raise IllegalStateError("Producer closed while allocating memory")
            if self._available >= size and not self._waiters:
                self._available -= size
                return size
            return self._wait_for(size, max_time_to_block_ms)

    def _wait_for(self, size: int, max_time_to_block_ms: float) -> int:
        # called with _lock held
        more_memory = threading.Condition(self._lock)
        self._waiters.append(more_memory)
        accumulated = 0
        start = _time.monotonic()
        deadline = start + max_time_to_block_ms / 1000.0
        try:
            while accumulated < size:
                if self._waiters[0] is more_memory and self._available > 0:
                    take = min(size - accumulated, self._available)
                    self._available -= take
                    accumulated += take
                    continue
                remaining = deadline - _time.monotonic()
                if remaining <= 0:
                    raise BufferExhaustedError(
                        f"Failed to allocate {size} bytes within the configured max blocking "
                        f"time {int(max_time_to_block_ms)} ms. Total memory: "
                        f"{self.total_memory} bytes. Available memory: {self._available} "
                        f"bytes. Poolable size: {self.poolable_size} bytes")
                more_memory.wait(remaining)
                if self._closed:
                    raise IllegalStateError("Producer closed while allocating memory")
            return size
        except BaseException:
            self._available += accumulated
            raise
        finally:
            self._waiters.remove(more_memory)
            if self._waiters and self._available > 0:
                self._waiters[0].notify()
            if self._wait_time is not None:
                self._wait_time.record((_time.monotonic() - start) * 1e9)

    def deallocate(self, size: int) -> None:
        with self._lock:
            self._available += size
            if self._waiters:
                self._waiters[0].notify()

    def available_memory(self) -> int:
        return self._available

    def queued(self) -> int:
        """Threads waiting for memory."""
        return len(self._waiters)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for waiter in self._waiters:
                waiter.notify()
