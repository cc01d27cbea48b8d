"""The ``traceparent`` header's strict version-00 form, read by the producer and by the
brokers alike (``millrace.common.trace_context``)."""

from __future__ import annotations

from typing import Any

import pytest

from millrace.common.trace_context import format_traceparent, parse_traceparent

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"
GOOD = f"00-{TRACE}-{SPAN}-01"


@pytest.mark.parametrize("value", [GOOD, GOOD.encode(), bytearray(GOOD.encode()),
                                   memoryview(GOOD.encode())])
def test_parse_traceparent_accepts_version_00(value: Any) -> None:
    assert parse_traceparent(value) == (TRACE, SPAN, 1)
    assert parse_traceparent(f"00-{TRACE}-{SPAN}-00") == (TRACE, SPAN, 0)
    assert format_traceparent(TRACE, SPAN) == GOOD


@pytest.mark.parametrize("value", [
    None, "", b"", 42, b"garbage", b"\xff\xfe", b"\xff" * 55, GOOD.upper(),
    GOOD.replace("-01", "-1"),
    f"01-{TRACE}-{SPAN}-01",  # only version 00 is parsed strictly
    f"ff-{TRACE}-{SPAN}-01",
    f"00-{'0' * 32}-{SPAN}-01",  # all-zero trace id
    f"00-{TRACE}-{'0' * 16}-01",  # all-zero span id
    f"00-{TRACE[:-1]}-{SPAN}-01", f"00-{TRACE}-{SPAN}0-01",
    GOOD + "-extra", GOOD + "\n", " " + GOOD, f"00_{TRACE}_{SPAN}_01",
    f"00-{TRACE[:-1]}g-{SPAN}-01",
])
def test_parse_traceparent_refuses_anything_else(value: Any) -> None:
    assert parse_traceparent(value) is None
