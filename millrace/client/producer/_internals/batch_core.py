"""The per-record state of a batch and of a record's future: the producer's hot path.

``ProducerBatch`` and ``FutureRecordMetadata`` inherit their fields -- and the batch its
``try_append`` -- from the classes here.  There are two implementations with the same
fields, results and errors:

- ``PyBatchCore`` / ``PyFutureCore`` (this module): the reference, pure Python;
- ``_speedups.BatchCore`` / ``FutureCore`` (``_speedups.c``, built by ``setup.py`` when a
  compiler is there): the same in C.  ``try_append`` then encodes with the record codec's
  C encoder and allocates the future without running Python code, which is most of what a
  ``send()`` costs besides the caller's own ``ProducerRecord``.

``BatchCore`` / ``FutureCore`` are whichever is in use (``SPEEDUPS`` says which);
``MILLRACE_NO_SPEEDUPS=1`` forces the Python ones, as it does for the record codec.
tests/unit/client/producer/test_batch_core.py runs both side by side.

``try_append(timestamp, key, value, headers, callback, now_ms)`` appends one record to
``_buf`` (behind the batch header placeholder) and returns its future, or None when the
batch is full or closed, or when a record other than the first would pass the write limit
(the bytes written are taken back: that record opens the next batch).  The first record
always fits: a batch of one oversized record is how a record larger than ``batch.size``
travels.  ``full`` turns true once the buffer reaches the limit.
"""

from __future__ import annotations

import time as _time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from millrace.record.batch import NO_TIMESTAMP
from millrace.record.default_record import encode_record

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1


class PyFutureCore:
    """The fields of ``FutureRecordMetadata``: the batch's result, the record's index in
    the batch, its timestamp and key/value sizes (-1 for null), and its callback."""

    __slots__ = ("_callback", "_index", "_key_size", "_result", "_timestamp", "_value_size")

    def __init__(self, result: Any, index: int, timestamp: int, key_size: int,
                 value_size: int, callback: Any = None) -> None:
        self._result = result
        self._index = index
        self._timestamp = timestamp
        self._key_size = key_size
        self._value_size = value_size
        self._callback = callback


class PyBatchCore:
    """The append state of ``ProducerBatch``; owned by whoever holds the accumulator's lock."""

    __slots__ = ("_base_timestamp", "_buf", "_max_timestamp", "_thunks", "_write_limit",
                 "full", "last_record_size", "produce_future", "record_count")

    _future_type: type[Any] = PyFutureCore

    def __init__(self, buf: bytearray, write_limit: int, produce_future: Any) -> None:
        self._buf = buf
        self._write_limit = write_limit
        self.produce_future = produce_future
        self._thunks: list[Any] = []  # the futures of the records that have a callback
        self._base_timestamp = NO_TIMESTAMP
        self._max_timestamp = NO_TIMESTAMP
        self.record_count = 0
        self.last_record_size = 0  # bytes the last append added
        self.full = False  # at or over the write limit, or closed

    def try_append(self, timestamp: int, key: bytes | None, value: bytes | None,
                   headers: Sequence[tuple[str, bytes | None]], callback: Any,
                   now_ms: int) -> Any:
        """Append one record: its future, or None if the batch has no room (or is closed)."""
        if self.full:
            return None
        if not isinstance(timestamp, int):
            raise TypeError(f"timestamp must be an int, not {type(timestamp).__name__}")
        if not _INT64_MIN <= timestamp <= _INT64_MAX:
            raise ValueError(f"timestamp out of int64 range: {timestamp}")
        count = self.record_count
        if count:
            delta = timestamp - self._base_timestamp
        else:
            if timestamp < 0:
                raise ValueError(f"invalid negative timestamp {timestamp}")
            self._base_timestamp = timestamp
            delta = 0
        buf = self._buf
        before = len(buf)
        size = encode_record(buf, count, delta, key, value, headers)
        if count and before + size > self._write_limit:
            del buf[before:]  # no room: this record opens the next batch
            return None
        key_size = -1 if key is None else len(key)
        value_size = -1 if value is None else len(value)
        if before + size >= self._write_limit:
            self.full = True
        if timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        future = self._future_type(self.produce_future, count, timestamp, key_size,
                                   value_size, callback)
        if callback is not None:
            self._thunks.append(future)
        self.record_count = count + 1
        self.last_record_size = size
        return future


def _set_py_future_type(cls: type[Any]) -> None:
    PyBatchCore._future_type = cls


def py_wall_clock_ms() -> int:
    """Milliseconds since the epoch: ``SystemTime.milliseconds`` for the per-record path."""
    return _time.time_ns() // 1_000_000


if TYPE_CHECKING:
    BatchCore = PyBatchCore
    FutureCore = PyFutureCore
    SPEEDUPS: bool
    set_future_type = _set_py_future_type
    wall_clock_ms = py_wall_clock_ms
else:
    try:
        from millrace.client.producer._internals._speedups import (
            BatchCore,
            FutureCore,
            set_future_type,
            wall_clock_ms,
        )
    except ImportError:  # no compiler at install time, or MILLRACE_NO_SPEEDUPS set
        BatchCore, FutureCore = PyBatchCore, PyFutureCore
        set_future_type = _set_py_future_type
        wall_clock_ms = py_wall_clock_ms
        SPEEDUPS = False
    else:
        SPEEDUPS = True
