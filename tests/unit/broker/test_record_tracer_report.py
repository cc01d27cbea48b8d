"""``RecordTracer.report`` (issue 28): a client's stage for a range of offsets reaches the
traced records in it -- the range is half-open, a retried report (same stage and lane)
adds nothing, other lanes do, the per-record event cap holds, expired records are left
alone, nothing is done (or checked) while nothing is traced, and bad arguments are
refused naming the argument.  No broker: the tracer tracks records directly."""

from __future__ import annotations

from typing import Any

import pytest

from millrace.broker.record_tracer import (
    MAX_EVENTS,
    MAX_REPORT_ATTRS,
    MAX_REPORT_TEXT,
    RecordTracer,
    TracedRecord,
)

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
START_US = 1_800_000_000_000_000
UNTIL_US = START_US + 60_000_000


class Clock:
    def __init__(self) -> None:
        self.us = START_US

    def __call__(self) -> int:
        return self.us


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def tracer(clock: Clock) -> RecordTracer:
    return RecordTracer(7, lambda topic: [], clock_us=clock)


def traced(tracer: RecordTracer, offset: int, topic: str = "orders", partition: int = 0,
           span: str = "00f067aa0ba902b7") -> TracedRecord:
    record = tracer.track(TRACE, span, topic, partition, offset, UNTIL_US)
    assert record is not None
    return record


def report(tracer: RecordTracer, a: int, b: int, **kw: Any) -> int:
    args: dict[str, Any] = {"topic": "orders", "partition": 0, "stage": "spark.batch",
                            "lane": "spark orders", "detail": "micro-batch 3 planned"}
    args.update(kw)
    return tracer.report(args.pop("topic"), args.pop("partition"), a, b, **args)


def test_the_range_is_half_open_and_per_partition(tracer: RecordTracer) -> None:
    below, first, last, above = (traced(tracer, o) for o in (9, 10, 19, 20))
    other = traced(tracer, 10, partition=1)
    elsewhere = traced(tracer, 10, topic="payments")
    assert report(tracer, 10, 20, t_us=START_US + 5) == 2
    for record in (below, above, other, elsewhere):
        assert record.events == []
    for record in (first, last):
        assert record.events == [{"t_us": START_US + 5, "stage": "spark.batch", "broker": 7,
                                  "detail": "micro-batch 3 planned",
                                  "lane": "spark orders"}]


def test_time_defaults_to_now_and_attrs_ride_along(tracer: RecordTracer,
                                                   clock: Clock) -> None:
    record = traced(tracer, 4)
    clock.us += 1234
    assert report(tracer, 0, 5, stage="sink.write", detail="table orders, batch 3",
                  attrs={"batch_id": 3, "table": "orders", "ms": 1.5, "ok": True}) == 1
    (event,) = record.events
    assert event["t_us"] == START_US + 1234
    assert (event["batch_id"], event["table"], event["ms"], event["ok"]) == \
        (3, "orders", 1.5, True)


def test_a_retried_report_adds_nothing_another_lane_or_stage_does(
        tracer: RecordTracer) -> None:
    record = traced(tracer, 4)
    assert report(tracer, 0, 10) == 1
    assert report(tracer, 4, 5, detail="retried") == 1   # matched, not added again
    assert [e["detail"] for e in record.events] == ["micro-batch 3 planned"]
    report(tracer, 0, 10, lane="spark payments")
    report(tracer, 0, 10, stage="sink.write")
    assert [(e["stage"], e["lane"]) for e in record.events] == [
        ("spark.batch", "spark orders"), ("spark.batch", "spark payments"),
        ("sink.write", "spark orders")]


def test_the_event_cap_holds(tracer: RecordTracer) -> None:
    record = traced(tracer, 0)
    for i in range(MAX_EVENTS + 5):
        report(tracer, 0, 1, lane=f"lane {i}")
    assert len(record.events) == MAX_EVENTS


def test_expired_records_get_nothing(tracer: RecordTracer, clock: Clock) -> None:
    record = traced(tracer, 0)
    clock.us = UNTIL_US + 1
    assert report(tracer, 0, 1) == 0
    assert record.events == []


def test_nothing_traced_costs_one_check(tracer: RecordTracer) -> None:
    assert not tracer.active
    # not even the arguments are looked at: the route checks them itself
    assert report(tracer, 5, 1, stage="nope") == 0
    traced(tracer, 0, topic="payments")
    assert report(tracer, 0, 10) == 0   # nothing traced in this partition


@pytest.mark.parametrize("stage", [
    "broker.append", "spark", "spark.", "Spark.batch", "spark.Batch", "sink.wr ite",
    "client." + "x" * 41, "spark.batch\n", "", "sinkwrite",
])
def test_bad_stage_names_are_refused(tracer: RecordTracer, stage: str) -> None:
    record = traced(tracer, 0)
    with pytest.raises(ValueError, match="stage"):
        report(tracer, 0, 1, stage=stage)
    assert record.events == []


@pytest.mark.parametrize("stage", ["spark.batch", "sink.write", "client.process",
                                   "client." + "x" * 40, "sink.jdbc_v2.commit-1"])
def test_good_stage_names(tracer: RecordTracer, stage: str) -> None:
    traced(tracer, 0)
    assert report(tracer, 0, 1, stage=stage) == 1


@pytest.mark.parametrize(("kw", "a", "b", "named"), [
    ({}, -1, 1, "from_offset"),
    ({}, 0, True, "until_offset"),
    ({}, 5, 4, "until_offset"),
    ({"lane": "x" * (MAX_REPORT_TEXT + 1)}, 0, 1, "lane"),
    ({"lane": ""}, 0, 1, "lane"),
    ({"detail": "x" * (MAX_REPORT_TEXT + 1)}, 0, 1, "detail"),
    ({"detail": None}, 0, 1, "detail"),
    ({"t_us": -1}, 0, 1, "t_us"),
    ({"t_us": 1.5}, 0, 1, "t_us"),
    ({"attrs": {f"a{i}": i for i in range(MAX_REPORT_ATTRS + 1)}}, 0, 1, "attrs"),
    ({"attrs": {"stage": "x"}}, 0, 1, "attrs"),
    ({"attrs": {"bad key": 1}}, 0, 1, "attrs"),
    ({"attrs": {"k": [1]}}, 0, 1, "attrs"),
    ({"attrs": {"k": float("nan")}}, 0, 1, "attrs"),
    ({"attrs": {"k": "x" * (MAX_REPORT_TEXT + 1)}}, 0, 1, "attrs"),
    ({"attrs": [1]}, 0, 1, "attrs"),
])
def test_bad_arguments_are_refused_by_name(tracer: RecordTracer, kw: dict[str, Any],
                                           a: int, b: int, named: str) -> None:
    record = traced(tracer, 0)
    with pytest.raises(ValueError, match=named):
        report(tracer, a, b, **kw)
    assert record.events == []


def test_bounds_are_inclusive(tracer: RecordTracer) -> None:
    record = traced(tracer, 0)
    attrs = {f"a{i}": "x" * MAX_REPORT_TEXT for i in range(MAX_REPORT_ATTRS)}
    assert report(tracer, 0, 1, lane="l" * MAX_REPORT_TEXT, detail="d" * MAX_REPORT_TEXT,
                  attrs=attrs) == 1
    assert len(record.events) == 1
