"""The common case of ``KafkaProducer.send`` in one call: ``SendPath(record, callback)``.

Theory.  Most records need none of ``send``'s rarer steps: no interceptors, bytes (or
None) key and value with the byte-array serializers, no headers, a topic already in the
metadata, a partition given, derived from the key (murmur2) or the topic's current sticky
partition, and a partition whose last batch has room.  ``SendPath`` does exactly that
part of ``send`` + ``RecordAccumulator.append`` and returns the record's future; when
anything is out of the ordinary it calls ``fallback(record, callback)`` -- the full
``send``, which does everything again from the start -- and returns what that returns.
Giving up leaves no trace except the metadata touch (which ``send`` repeats anyway), so
both paths give the same batches, futures, callbacks and errors.  An error before the
record is in a batch (a timestamp whose delta leaves int64, say) also goes to the full
``send``, which raises it with its error metrics; after ``close()`` every call does.
``try_common_case`` is the part without the fallback (``None`` for "give up").

There are two implementations with the same results, as for ``batch_core``:

- ``PySendPath`` (this module): the reference, pure Python; the producer does not use it
  (its full ``send`` costs the same), the differential tests do;
- ``_speedups.SendPath`` (``_speedups.c``): the same in C, one call per record.

``KafkaProducer`` makes one where no record can need the rarer steps (no interceptors, no
custom partitioner, not transactional) and, being a plain ``KafkaProducer``, binds it
as the instance's ``send``: the caller's ``producer.send(record)`` is then one C call.
``clock`` is None for the system clock (read in C) or a ``Time.milliseconds``.

Thread-safety: called from any application thread.  The accumulator's lock is taken
without blocking; when another thread holds it, ``None`` (the full ``send`` waits for
it).  With the C accelerator that lock is ``_speedups.Lock`` (``Lock`` here):
``threading.Lock``'s interface, but taken and released by ``SendPath`` without a Python
call, and its ``acquire(False)`` costs no argument tuple.  The metadata is read as ``send`` reads it (``_cluster`` snapshot, the tracked
topics' dict touched without a lock).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, cast

from millrace.client.producer._internals.batch_core import wall_clock_ms
from millrace.client.producer._internals.built_in_partitioner import py_murmur2


class PySendPath:
    """``send``'s common case; see the module docstring."""

    __slots__ = ("_acc", "_acc_topics", "_clock", "_closed", "_fallback", "_idle_ms",
                 "_ignore_keys", "_key_is_bytes", "_lock", "_max_record_size", "_metadata",
                 "_overhead", "_record_type", "_tracked", "_value_is_bytes", "_wakeup")

    def __init__(self, record_type: type, metadata: Any, accumulator: Any, wakeup: Any,
                 clock: Any, max_record_size: int, overhead: int, key_is_bytes: bool,
                 value_is_bytes: bool, ignore_keys: bool, fallback: Any) -> None:
        self._record_type = record_type
        self._metadata = metadata
        self._tracked = metadata._topics
        self._idle_ms = metadata._idle_ms
        self._acc = accumulator
        self._acc_topics = accumulator._topics
        self._lock = accumulator._lock
        self._wakeup = wakeup
        self._max_record_size = max_record_size
        self._overhead = overhead
        self._key_is_bytes = key_is_bytes
        self._value_is_bytes = value_is_bytes
        self._ignore_keys = ignore_keys
        self._clock = clock
        self._fallback = fallback
        self._closed = False

    def close(self) -> None:
        """Every later call runs the full send (which raises: the producer is closed)."""
        self._closed = True

    def __call__(self, record: Any, callback: Any = None) -> Any:
        appended: list[bool] = []
        try:
            future = self.try_common_case(record, callback, appended)
        except Exception:
            if appended:
                raise
            future = None  # nothing was buffered: the full send raises it (or not) itself
        if future is None:
            return self._fallback(record, callback)
        return future

    def try_common_case(self, record: Any, callback: Any, appended: list[bool]) -> Any:
        """The record's future, or None to give up; ``appended`` gets True once the
        record is in a batch."""
        if self._closed or type(record) is not self._record_type:
            return None
        record = cast(Any, record)
        headers = record.headers
        if headers is not None and (type(headers) not in (tuple, list) or headers):
            return None
        topic = record.topic
        if self._clock is None:
            now = wall_clock_ms()
        else:
            now = self._clock()
            if type(now) is not int:
                return None
        tracked = self._tracked
        if topic not in tracked:
            return None
        tracked[topic] = now + self._idle_ms
        cluster = self._metadata._cluster
        count = cluster.partition_counts.get(topic)
        if count is None:
            return None
        key = record.key
        if key is not None and not (self._key_is_bytes and type(key) is bytes):
            return None
        value = record.value
        if value is not None and not (self._value_is_bytes and type(value) is bytes):
            return None
        partition = record.partition
        if partition is not None:
            if type(partition) is not int or partition >= count:
                return None
        elif key is not None and not self._ignore_keys:
            if count <= 0:
                return None
            partition = (py_murmur2(key) & 0x7FFFFFFF) % count
        size = self._overhead + (len(key) if key else 0) + (len(value) if value else 0)
        if size > self._max_record_size:
            return None
        timestamp = record.timestamp
        if timestamp is None:
            timestamp = now
        elif type(timestamp) is not int:
            return None
        info = self._acc_topics.get(topic)
        if info is None:
            return None
        lock = self._lock
        if not lock.acquire(False):
            return None
        try:
            if self._acc._closed:
                return None
            sticky = None
            if partition is None:
                partitioner = info.partitioner
                sticky = partitioner.current
                if sticky is None:
                    return None
                partition = sticky.partition
            dq = info.batches.get(partition)
            if not dq:
                return None
            last = dq[-1]
            future = last.try_append(timestamp, key, value, (), callback, now)
            if future is None:
                return None
            appended.append(True)
            full = last.full
            if sticky is not None:
                sticky.produced_bytes += last.last_record_size
                if sticky.produced_bytes >= partitioner.sticky_batch_size:
                    partitioner.maybe_switch(sticky, cluster, full)
        finally:
            lock.release()
        if full:
            self._wakeup()
        return future


if TYPE_CHECKING:
    SendPath = PySendPath
    Lock = threading.Lock
else:
    try:
        from millrace.client.producer._internals._speedups import Lock, SendPath
    except ImportError:  # no compiler at install time, or MILLRACE_NO_SPEEDUPS set
        SendPath = None
        Lock = threading.Lock
