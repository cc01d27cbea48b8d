"""W3C Trace Context as it travels in a record header: the ``traceparent`` header's name,
its version-00 form (``00-<32 hex trace id>-<16 hex span id>-<2 hex flags>``, lowercase,
ids not all zero) and the wall clock every stage of a record's journey is timed with
(epoch microseconds: the producer's, the brokers' and the console's stages on one host
line up).  One definition for the producer that writes the header (``client.tracing``)
and the brokers that look for it (``broker.record_tracer``)."""

from __future__ import annotations

import re
import time

TRACEPARENT = "traceparent"

_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16


def now_us() -> int:
    """Microseconds since the epoch: the time base of every stage and event."""
    return time.time_ns() // 1000


def parse_traceparent(value: object) -> tuple[str, str, int] | None:
    """``(trace_id, span_id, flags)`` of a ``traceparent`` value (str or bytes), or None
    unless it is exactly version 00 in lowercase hex with non-zero ids."""
    if isinstance(value, bytes | bytearray | memoryview):
        try:
            value = bytes(value).decode("ascii")
        except UnicodeDecodeError:
            return None
    if not isinstance(value, str):
        return None
    match = _TRACEPARENT.fullmatch(value)
    if match is None:
        return None
    trace_id, span_id, flags = match.groups()
    if trace_id == _ZERO_TRACE or span_id == _ZERO_SPAN:
        return None
    return trace_id, span_id, int(flags, 16)


def format_traceparent(trace_id: str, span_id: str, flags: int = 1) -> str:
    return f"00-{trace_id}-{span_id}-{flags:02x}"
