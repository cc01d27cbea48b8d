"""``traceReports`` (issue 28): the option's parsing, a batch's offsets from Spark's
offset log, and ``TraceReporter``'s requests -- one POST per broker with every
partition's range, nothing for an empty batch, failures logged once at WARNING and
never raised.  No sockets: the brokers' HTTP side is a fake."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from millrace.common.errors import ConfigError
from millrace.common.topic_partition import TopicPartition
from millrace.spark.options import SourceOptions
from millrace.spark.pipeline import PipelineConfig, SourceConfig, StateSink
from millrace.spark.pipeline.runner import trace_reports
from millrace.spark.trace_reports import REPORT_PATH, TraceReporter, batch_offsets

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "orders"}
A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def test_the_option_is_off_by_default_and_parsed() -> None:
    off = SourceOptions.parse(BASE, streaming=True)
    assert (off.trace_reports, off.trace_reports_name) == (False, "millrace")
    on = SourceOptions.parse({**BASE, "TRACEREPORTS": "true", "traceReportsName": "etl"},
                             streaming=True)
    assert (on.trace_reports, on.trace_reports_name) == (True, "etl")
    with pytest.raises(ConfigError, match="'traceReports'"):
        SourceOptions.parse({**BASE, "traceReports": "yes"}, streaming=True)
    with pytest.raises(ConfigError, match="'traceReportsName'"):
        SourceOptions.parse({**BASE, "traceReportsName": " "}, streaming=True)


def test_a_pipeline_reports_when_its_source_option_says() -> None:
    def config(**options: Any) -> PipelineConfig:
        return PipelineConfig(name="p", source=SourceConfig("h:1", "t", options=options),
                              database="sqlite:///x.db", checkpoint_dir="c",
                              value_schema="a STRING",
                              state_sinks=[StateSink(table="t", key=["a"])])

    assert not trace_reports(config())
    assert not trace_reports(config(traceReports="false"))
    assert trace_reports(config(tracereports="true"))
    assert trace_reports(config(traceReports=True))


def test_the_demo_pipeline_reports(tmp_path: Path) -> None:
    from millrace.demo.run import DemoConfig, pipeline_config

    job = pipeline_config(DemoConfig(tmp_path), "127.0.0.1:5", {})
    assert trace_reports(job)


def offset_log(checkpoint: Path, batch: int, offsets: dict[str, dict[str, int]]) -> None:
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    (checkpoint / "offsets" / str(batch)).write_text(
        "v1\n" + json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": 1}) + "\n"
        + json.dumps(offsets))


def test_batch_offsets_from_the_offset_log(tmp_path: Path) -> None:
    offset_log(tmp_path, 0, {"a": {"0": 10, "1": 4}})
    offset_log(tmp_path, 1, {"a": {"0": 25, "1": 4}, "b": {"0": 3}})
    assert batch_offsets(str(tmp_path), 0) == ({A0: (0, 10), A1: (0, 4)}, True)
    assert batch_offsets(str(tmp_path), 1) == ({A0: (10, 25), A1: (4, 4), B0: (0, 3)},
                                               False)
    assert batch_offsets(f"file://{tmp_path}", 1) == batch_offsets(str(tmp_path), 1)
    assert batch_offsets(str(tmp_path), 2) is None
    assert batch_offsets("s3a://bucket/checkpoints", 1) is None
    (tmp_path / "offsets" / "2").write_text("v1\n{}\nnot json")
    assert batch_offsets(str(tmp_path), 2) is None


class FakeHttp:
    def __init__(self, fail: set[int] | None = None) -> None:
        self.posts: list[tuple[int, str, str, dict[str, Any]]] = []
        self.fail = fail or set()

    def post(self, broker: int, host: str, path: str, body: dict[str, Any]
             ) -> dict[str, Any]:
        self.posts.append((broker, host, path, body))
        if broker in self.fail:
            raise OSError(f"broker {broker} is down\nsecond line")
        return {"broker": broker, "matched": 1}


def reporter(http: FakeHttp) -> TraceReporter:
    r = TraceReporter({"bootstrap.servers": "h:1"}, "spark p")
    nodes = [SimpleNamespace(id=0, host="h0"), SimpleNamespace(id=1, host="h1")]
    r._http = http  # type: ignore[assignment]
    r._admin = SimpleNamespace(  # type: ignore[assignment]
        describe_cluster=lambda: SimpleNamespace(nodes=nodes), close=lambda: None)
    return r


def test_one_post_per_broker_with_every_range() -> None:
    http = FakeHttp()
    r = reporter(http)
    matched = r.report("spark.batch", {A1: (4, 9), A0: (0, 10), B0: (3, 3)}, "d" * 300,
                       t_us=5, attrs={"partitions": 2})
    assert matched == 2
    assert [(b, h, p) for b, h, p, _ in http.posts] == [(0, "h0", REPORT_PATH),
                                                         (1, "h1", REPORT_PATH)]
    body = http.posts[0][3]
    assert body == {"ranges": [
        {"topic": "a", "partition": 0, "from_offset": 0, "until_offset": 10},
        {"topic": "a", "partition": 1, "from_offset": 4, "until_offset": 9}],
        "stage": "spark.batch", "lane": "spark p", "detail": "d" * 200, "t_us": 5,
        "attrs": {"partitions": 2}}


def test_an_empty_batch_sends_nothing() -> None:
    http = FakeHttp()
    assert reporter(http).report("spark.batch", {A0: (7, 7)}, "x") == 0
    assert http.posts == []


def test_failures_are_logged_once_and_never_raised(caplog: pytest.LogCaptureFixture
                                                   ) -> None:
    http = FakeHttp(fail={0})
    r = reporter(http)
    with caplog.at_level(logging.DEBUG, logger="millrace.spark.trace_reports"):
        assert r.report("sink.write", {A0: (0, 1)}, "x") == 1  # broker 1 answered
        assert r.report("sink.write", {A0: (0, 1)}, "x") == 1
    levels = [(rec.levelno, rec.getMessage()) for rec in caplog.records]
    assert [lvl for lvl, _ in levels] == [logging.WARNING, logging.DEBUG]
    assert "to broker 0 failed: broker 0 is down;" in levels[0][1]
    assert "second line" not in levels[0][1]
