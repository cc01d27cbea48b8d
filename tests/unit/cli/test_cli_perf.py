"""``millrace perf``: argument checks and output, with the perf runs replaced by fakes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from millrace.cli.main import main
from millrace.client import perf
from millrace.client.perf import ConsumerPerfResult, LatencyHistogram, ProducerPerfResult


class FakeProducerPerformance:
    calls: list[tuple[dict[str, Any], str, int, int, dict[str, Any]]] = []
    failed = 0

    def __init__(self, config: dict[str, Any], topic: str, num_records: int,
                 record_size: int, **kw: Any) -> None:
        self.calls.append((config, topic, num_records, record_size, kw))
        self.topic, self.num, self.size = topic, num_records, record_size

    def run(self) -> ProducerPerfResult:
        h = LatencyHistogram()
        h.record_all([2000] * (self.num - self.failed))
        return ProducerPerfResult.from_histogram(
            self.topic, h, self.failed, self.size, 1.0,
            "NotEnoughReplicasError: x" if self.failed else None)


class FakeConsumerPerformance:
    calls: list[tuple[dict[str, Any], str, int, dict[str, Any]]] = []
    found = -1  # -1: all

    def __init__(self, config: dict[str, Any], topic: str, num_records: int,
                 **kw: Any) -> None:
        self.calls.append((config, topic, num_records, kw))
        self.topic, self.num, self.group = topic, num_records, kw.get("group")

    def run(self) -> ConsumerPerfResult:
        got = self.num if self.found < 0 else self.found
        return ConsumerPerfResult.build(self.topic, self.group, self.num, got, got * 100,
                                        1_700_000_000_000, 1000.0, 0.0, got < self.num)


@pytest.fixture(autouse=True)
def fakes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(perf, "ProducerPerformance", FakeProducerPerformance)
    monkeypatch.setattr(perf, "ConsumerPerformance", FakeConsumerPerformance)
    FakeProducerPerformance.calls, FakeProducerPerformance.failed = [], 0
    FakeConsumerPerformance.calls, FakeConsumerPerformance.found = [], -1
    monkeypatch.delenv("MILLRACE_BOOTSTRAP", raising=False)


PRODUCE = ["perf", "produce", "--topic", "t", "--num-records", "10", "--record-size", "100"]
CONSUME = ["perf", "consume", "--topic", "t", "--messages", "10"]


def test_produce_configs_and_summary(capsys: pytest.CaptureFixture[str], tmp_path: Any) -> None:
    props = tmp_path / "p.properties"
    props.write_text("acks=0\nlinger.ms=7\nbootstrap.servers=h1:1\n")
    assert main([*PRODUCE, "--producer.config", str(props),
                 "--producer-props", "acks=1", "batch.size=1000", "--throughput", "50"]) == 0
    [(config, topic, n, size, kw)] = FakeProducerPerformance.calls
    # the file, then --producer-props, and its bootstrap.servers (no --bootstrap-server)
    assert config == {"acks": "1", "linger.ms": "7", "batch.size": "1000",
                      "bootstrap.servers": "h1:1"}
    assert (topic, n, size, kw["throughput"], kw["reporting_interval_ms"]) == \
        ("t", 10, 100, 50.0, 5000)
    out = capsys.readouterr().out
    assert out.startswith("10 records sent, 10.0 records/sec") and "2.00 ms 99.9th." in out


def test_produce_json_and_failures(capsys: pytest.CaptureFixture[str]) -> None:
    FakeProducerPerformance.failed = 3
    assert main([*PRODUCE, "--bootstrap-server", "b:9", "--output", "json"]) == 1
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert (doc["records_sent"], doc["records_failed"]) == (7, 3)
    assert err == "Error: 3 of 10 records failed; first: NotEnoughReplicasError: x\n"
    assert FakeProducerPerformance.calls[0][0] == {"bootstrap.servers": "b:9"}


@pytest.mark.parametrize("args, message", [
    (["--num-records", "-1"], "--num-records cannot be negative"),
    (["--record-size", "-5"], "--record-size cannot be negative"),
    (["--throughput", "0"], "--throughput must be positive"),
    (["--reporting-interval", "0"], "--reporting-interval must be positive"),
    (["--producer-props", "acks"], "--producer-props expects key=value"),
])
def test_produce_argument_errors(args: list[str], message: str,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*PRODUCE, *args]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"Error: {message}") and err.count("\n") == 1
    assert FakeProducerPerformance.calls == []


def test_consume_table_and_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*CONSUME, "--group", "g", "--timeout", "2000", "--consumer-props",
                 "max.poll.records=10", "-b", "b:9"]) == 0
    [(config, topic, n, kw)] = FakeConsumerPerformance.calls
    assert config == {"max.poll.records": "10", "bootstrap.servers": "b:9"}
    assert (topic, n, kw["group"], kw["timeout_ms"], kw["from_latest"]) == \
        ("t", 10, "g", 2000, False)
    header, row = capsys.readouterr().out.splitlines()
    assert header.startswith("start.time, end.time, data.consumed.in.MB")
    assert row.split(", ")[4:6] == ["10", "10.0000"]
    assert main([*CONSUME, "--hide-header"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1


def test_consume_timeout_is_an_error_after_the_figures(
        capsys: pytest.CaptureFixture[str]) -> None:
    FakeConsumerPerformance.found = 4
    assert main([*CONSUME, "--output", "json"]) == 1
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert (doc["records"], doc["expected_records"], doc["timed_out"]) == (4, 10, True)
    assert err == "Error: read 4 of 10 records: no record came for 10000 ms (--timeout)\n"


@pytest.mark.parametrize("args, message", [
    (["--messages", "-2"], "--messages cannot be negative"),
    (["--timeout", "0"], "--timeout must be positive"),
])
def test_consume_argument_errors(args: list[str], message: str,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*CONSUME, *args]) == 1
    assert capsys.readouterr().err.startswith(f"Error: {message}")
