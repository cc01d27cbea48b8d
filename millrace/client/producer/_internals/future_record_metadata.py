"""Per-batch results and per-record futures (Java ``ProduceRequestResult`` and
``FutureRecordMetadata``).

A batch has one ``ProduceRequestResult`` -- base offset, log-append time, error -- that
the sender completes once.  Each record gets a small ``FutureRecordMetadata`` holding only
its index in the batch and sizes; its ``RecordMetadata`` is derived on demand.  The
waiting primitive (a ``threading.Event``) is created only if somebody actually waits, so
fire-and-forget sends cost one small object per record.

When a batch is split after MESSAGE_TOO_LARGE, its result *redirects* each record index
to the record's future in a new batch; ``get`` follows the redirection.
"""

from __future__ import annotations

import threading
import time as _time
from collections.abc import Callable

from millrace.client.cluster import TopicPartition
from millrace.client.errors import KafkaTimeoutError
from millrace.client.producer._internals.batch_core import FutureCore, set_future_type
from millrace.client.producer.producer_record import RecordMetadata

_EVENT_LOCK = threading.Lock()  # creating/setting the lazily-made events

RecordErrors = Callable[[int], Exception]


class ProduceRequestResult:
    __slots__ = ("_done", "_event", "base_offset", "error", "log_append_time",
                 "record_errors", "redirect", "topic_partition")

    def __init__(self, topic_partition: TopicPartition) -> None:
        self.topic_partition = topic_partition
        self.base_offset = -1
        self.log_append_time = -1
        self.error: Exception | None = None
        self.record_errors: RecordErrors | None = None
        # after a split: record index -> its future in the new batch
        self.redirect: list[FutureRecordMetadata] | None = None
        self._done = False
        self._event: threading.Event | None = None

    def set(self, base_offset: int, log_append_time: int, error: Exception | None,
            record_errors: RecordErrors | None = None) -> None:
        self.base_offset = base_offset
        self.log_append_time = log_append_time
        self.error = error
        self.record_errors = record_errors

    def done(self) -> None:
        with _EVENT_LOCK:
            self._done = True
            event = self._event
        if event is not None:
            event.set()

    @property
    def completed(self) -> bool:
        return self._done

    def wait(self, timeout: float | None = None) -> bool:
        if self._done:
            return True
        with _EVENT_LOCK:
            if self._done:
                return True
            event = self._event
            if event is None:
                event = self._event = threading.Event()
        return event.wait(timeout)

    def error_for(self, index: int) -> Exception | None:
        if self.error is None:
            return None
        if self.record_errors is not None:
            return self.record_errors(index)
        return self.error


class FutureRecordMetadata(FutureCore):
    """The future ``send`` returns: ``get(timeout)`` -> ``RecordMetadata`` or raises.

    ``FutureRecordMetadata(result, index, timestamp, key_size, value_size, callback=None)``;
    the fields live in ``batch_core.FutureCore`` (C when built)."""

    __slots__ = ()

    def get(self, timeout: float | None = None) -> RecordMetadata:
        """Wait for the outcome (seconds; None = forever): metadata, or raise the error."""
        deadline = None if timeout is None else _time.monotonic() + timeout
        future = self
        while True:
            remaining = None if deadline is None else max(deadline - _time.monotonic(), 0.0)
            if not future._result.wait(remaining):
                raise KafkaTimeoutError(
                    f"Timeout after waiting for {int((timeout or 0) * 1000)} ms.")
            redirect = future._result.redirect
            if redirect is None:
                return future.value()
            future = redirect[future._index]

    def done(self) -> bool:
        future = self
        while future._result.redirect is not None:
            future = future._result.redirect[future._index]
        return future._result.completed

    def exception(self, timeout: float | None = None) -> Exception | None:
        """The record's error (None on success); waits like ``get``."""
        try:
            self.get(timeout)
        except KafkaTimeoutError as e:
            if not self.done():
                raise  # the wait timed out, not the record
            return e
        except Exception as e:
            return e
        return None

    def value(self) -> RecordMetadata:
        """The outcome of a completed future (raises the error if it failed)."""
        result = self._result
        error = result.error_for(self._index) if result.error is not None else None
        if error is not None:
            raise error
        return self.metadata()

    def metadata(self) -> RecordMetadata:
        result = self._result
        tp = result.topic_partition
        offset = result.base_offset + self._index if result.base_offset >= 0 else -1
        timestamp = result.log_append_time if result.log_append_time >= 0 else self._timestamp
        return RecordMetadata(tp.topic, tp.partition, offset, timestamp, self._key_size,
                              self._value_size)

    @property
    def topic_partition(self) -> TopicPartition:
        return self._result.topic_partition

    def __repr__(self) -> str:
        state = "done" if self.done() else "pending"
        return f"FutureRecordMetadata({self._result.topic_partition}, #{self._index}, {state})"


# the class of the futures ProducerBatch.try_append makes
set_future_type(FutureRecordMetadata)
