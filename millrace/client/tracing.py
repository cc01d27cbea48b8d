"""The journey of one traced record through the client (issue 28's "trace a record").

A ``RecordJourney`` is one record's client-side trace: W3C Trace Context ids (the
record carries them in its ``traceparent`` header, so brokers and consumers can tie
their own events to the same trace) and the ordered list of stages the record went
through, each with its wall-clock time in epoch microseconds (``time.time_ns() //
1000``: the brokers on the same host stamp their events the same way, so the two line
up on one timeline).

``KafkaProducer.send_traced`` makes one per record and fills it in: the application
thread adds the ``producer`` lane (interceptors, serializers, partitioner, accumulator
append), the Sender thread the ``sender`` lane (batch ready, drain, request written,
response read) and the callback stage; the latter sets ``done``.  The stage names are a
contract (the console draws them):

========================  ========  ==================================================
stage                     lane      attributes
========================  ========  ==================================================
``producer.interceptors`` producer  ``interceptors`` (class names; 0 when none)
``producer.serialize``    producer  ``key_serializer``, ``value_serializer``,
                                    ``key_bytes``, ``value_bytes`` (-1 for null)
``producer.partition``    producer  ``partition``, ``reason``: explicit | key-hash |
                                    sticky | custom:<Class>
``accumulator.append``    producer  ``new_batch``, ``batch_records``, ``batch_bytes``,
                                    ``batch_size``, ``fill_pct``
``batch.ready``           sender    ``reason``, ``linger_ms``, ``age_ms``
``sender.drain``          sender    ``node``
``request.sent``          sender    ``node``, ``address``, ``correlation_id``, ``acks``
``response.received``     sender    ``node``, ``error``, ``base_offset``, ``offset``,
                                    ``log_append_time``
``producer.callback``     sender    (``error`` when the send failed)
========================  ========  ==================================================

A retried batch repeats the sender stages from ``batch.ready`` (reason ``retry``).

Thread-safety: ``add`` and the readers take the journey's lock (a leaf lock: nothing
else is acquired under it), so the application and Sender threads may add at once;
``stages`` hands out the list sorted by time (ties in the order of the table above),
since the two threads may add out of time order.

Consumers read the context back with ``journey_context(record)``.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from millrace.common.trace_context import (
    TRACEPARENT,
    format_traceparent,
    now_us,
    parse_traceparent,
)

__all__ = [
    "STAGES",
    "RecordJourney",
    "format_traceparent",
    "journey_context",
    "now_us",
    "parse_traceparent",
]

# the stages a producer records, in causal order (the tie-break of ``stages``)
STAGES = (
    "producer.interceptors",
    "producer.serialize",
    "producer.partition",
    "accumulator.append",
    "batch.ready",
    "sender.drain",
    "request.sent",
    "response.received",
    "producer.callback",
)
_RANK = {name: i for i, name in enumerate(STAGES)}

_random = random.Random()  # ids need to be unique, not secret (as OTel's RandomIdGenerator)


def _new_id(bits: int) -> str:
    while True:
        value = _random.getrandbits(bits)
        if value:
            return f"{value:0{bits // 4}x}"


def _header_items(headers: Any) -> Iterable[tuple[Any, Any]]:
    if not headers:
        return ()
    return headers.items() if isinstance(headers, Mapping) else headers


def find_traceparent(headers: Any) -> tuple[str, str, int] | None:
    """The parsed ``traceparent`` among record headers (a mapping or pairs), if valid."""
    for item in _header_items(headers):
        try:
            key, value = item
        except (TypeError, ValueError):
            continue
        if key == TRACEPARENT:
            return parse_traceparent(value)
    return None


def journey_context(record: Any) -> tuple[str, str] | None:
    """``(trace_id, span_id)`` carried by a consumed record's ``traceparent`` header
    (the producer's span: the parent of whatever the consumer does with it), or None."""
    parsed = find_traceparent(getattr(record, "headers", None))
    return None if parsed is None else (parsed[0], parsed[1])


class RecordJourney:
    """One traced record's client-side journey; see the module docstring."""

    def __init__(self, trace_id: str, span_id: str, parent_span_id: str | None = None,
                 flags: int = 1) -> None:
        self.trace_id = trace_id
        self.span_id = span_id
        self.parent_span_id = parent_span_id
        self.flags = flags
        self.topic: str | None = None
        self.partition: int | None = None
        self.offset: int | None = None
        self.client_id: str | None = None
        self.error: str | None = None  # the exception's class name when the send failed
        self.done = threading.Event()  # set after the producer.callback stage
        self._lock = threading.Lock()
        self._stages: list[dict[str, Any]] = []  # guarded by _lock

    @classmethod
    def start(cls, parent_traceparent: bytes | str | None = None) -> RecordJourney:
        """A new journey: a new trace, or a child span of a valid ``parent_traceparent``."""
        parent = parse_traceparent(parent_traceparent)
        if parent is None:
            return cls(_new_id(128), _new_id(64))
        trace_id, parent_span_id, flags = parent
        return cls(trace_id, _new_id(64), parent_span_id, flags | 1)

    @property
    def traceparent(self) -> str:
        """The header value for this journey's span (always sampled: flags 01)."""
        return format_traceparent(self.trace_id, self.span_id, 1)

    def add(self, stage: str, t_us: int, *, lane: str, duration_us: int = 0,
            detail: str = "", **attrs: Any) -> None:
        entry: dict[str, Any] = {"stage": stage, "t_us": t_us, "duration_us": duration_us,
                                 "lane": lane, "detail": detail}
        entry.update(attrs)
        with self._lock:
            self._stages.append(entry)

    def finish(self, error: BaseException | None = None) -> None:
        """The send's outcome is known (called after the callback stage)."""
        if error is not None:
            self.error = type(error).__name__
        self.done.set()

    @property
    def stages(self) -> list[dict[str, Any]]:
        """A copy of the stages in time order (ties in causal order)."""
        with self._lock:
            stages = [dict(s) for s in self._stages]
        stages.sort(key=lambda s: (s["t_us"], _RANK.get(s["stage"], len(_RANK))))
        return stages

    def stage(self, name: str) -> dict[str, Any] | None:
        """The first stage called ``name``, or None."""
        for entry in self.stages:
            if entry["stage"] == name:
                return entry
        return None

    def wait(self, timeout_s: float | None = None) -> bool:
        return self.done.wait(timeout_s)

    def to_json(self) -> dict[str, Any]:
        return {"trace_id": self.trace_id, "span_id": self.span_id,
                "parent_span_id": self.parent_span_id, "topic": self.topic,
                "partition": self.partition, "offset": self.offset,
                "client_id": self.client_id, "error": self.error, "stages": self.stages}

    def __repr__(self) -> str:
        with self._lock:
            n = len(self._stages)
        return (f"RecordJourney({self.traceparent}, {self.topic}-{self.partition}@"
                f"{self.offset}, {n} stages)")
