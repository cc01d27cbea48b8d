"""``_stop_when_reported``: a stopping pipeline stops each query only once Spark has
reported every micro-batch its writer committed, so the summary counts all of them; a
query that never reports is stopped after the grace.  An in-process fake stands for
Spark's StreamingQuery (its ``lastProgress`` advancing on a timer thread as Spark's
stream thread would)."""

from __future__ import annotations

import threading
import time
from typing import Any

from millrace.spark.pipeline.runner import _stop_when_reported, _Tracked


class FakeQuery:
    def __init__(self, reported: int | None) -> None:
        self.isActive = True
        self._reported = reported
        self.reported_when_stopped: int | None = None

    @property
    def lastProgress(self) -> dict[str, Any] | None:
        return None if self._reported is None else {"batchId": self._reported}

    def report(self, batch_id: int) -> None:
        self._reported = batch_id

    def stop(self) -> None:
        self.reported_when_stopped = self._reported
        self.isActive = False


class FakeWriter:
    def __init__(self, committed: list[int]) -> None:
        self.outcomes = {b: {"orders": 100} for b in committed}


def tracked(query: FakeQuery, committed: list[int]) -> _Tracked:
    return _Tracked("p.orders", FakeWriter(committed), query)  # type: ignore[arg-type]


def test_waits_for_the_report_of_the_last_committed_batch() -> None:
    query = FakeQuery(reported=0)
    t = tracked(query, [0, 1])           # batch 1 committed, not reported yet
    threading.Timer(0.3, query.report, (1,)).start()
    _stop_when_reported(t, grace_s=30)
    assert query.reported_when_stopped == 1
    assert not query.isActive


def test_stops_at_once_when_everything_committed_is_reported() -> None:
    query = FakeQuery(reported=3)
    _stop_when_reported(tracked(query, [0, 1, 2, 3]), grace_s=30)
    assert query.reported_when_stopped == 3


def test_a_query_that_never_reports_is_stopped_after_the_grace() -> None:
    query = FakeQuery(reported=None)
    started = time.monotonic()
    _stop_when_reported(tracked(query, [0]), grace_s=0.2)
    assert not query.isActive and query.reported_when_stopped is None
    assert time.monotonic() - started < 10          # bounded, not a timing assertion
