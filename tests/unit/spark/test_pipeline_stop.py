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


def test_a_schema_change_that_recurs_after_its_restart_stops_the_run(monkeypatch: Any) -> None:
    """A restart for a newer version must widen the query; if the same version stops it
    again, the run fails instead of restarting forever."""
    import pytest

    from millrace.spark.pipeline import runner
    from millrace.spark.pipeline.config import PipelineConfig, SourceConfig, StateSink

    config = PipelineConfig(
        name="orders",
        source=SourceConfig(bootstrap_servers="127.0.0.1:9", subscribe="orders"),
        value_format="avro", schema_registry_url="http://127.0.0.1:9",
        state_sinks=[StateSink(table="orders", key=["id"])],
        database="sqlite:///unused.db", checkpoint_dir="/tmp/unused-ck")
    pipeline = runner.Pipeline(config, spark=object())  # type: ignore[arg-type]
    attempts: list[int] = []

    def run_once(*args: Any) -> Any:
        attempts.append(1)
        raise runner.SchemaEvolution("orders-value", 2, 7, "orders-0@5", 1)

    monkeypatch.setattr(runner, "_check_reachable", lambda config: None)
    monkeypatch.setattr(pipeline, "_run_once", run_once)
    monkeypatch.setattr(pipeline, "_evolve", lambda evolution: "added coupon")
    with pytest.raises(runner.PipelineError, match="again after a restart"):
        pipeline.run()
    assert len(attempts) == 2  # the first restart was allowed, the second refused
