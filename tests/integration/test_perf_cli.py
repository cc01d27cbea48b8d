"""``millrace perf produce`` then ``millrace perf consume`` against a real broker, run as a
user would (child processes), checking exit codes and the counts the tools report."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from millrace.testing.broker_process import BrokerProcess

pytestmark = [pytest.mark.integration]


def _cli(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "millrace.cli.main", *args,
                           "--bootstrap-server", broker.bootstrap],
                          capture_output=True, text=True, timeout=120, check=False)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def _json(proc: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(proc.stdout)


def test_produce_then_consume(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "broker") as b:
        assert _cli(b, "topics", "create", "--topic", "perf", "--partitions", "3"
                    ).returncode == 0
        r = _cli(b, "perf", "produce", "--topic", "perf", "--num-records", "20000",
                 "--record-size", "100", "--producer-props", "acks=all", "linger.ms=2",
                 "--output", "json")
        assert r.returncode == 0, r.stderr
        sent = _json(r)
        assert (sent["records_sent"], sent["records_failed"], sent["record_size"]) == \
            (20000, 0, 100)
        assert 0 < sent["p50_latency_ms"] <= sent["p999_latency_ms"] <= sent["max_latency_ms"]

        # a throttled run, text output: the summary line as kafka-producer-perf-test's
        r = _cli(b, "perf", "produce", "--topic", "perf", "--num-records", "1000",
                 "--record-size", "1024", "--throughput", "5000")
        assert r.returncode == 0, r.stderr
        assert re.fullmatch(
            r"1000 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
            r"[\d.]+ ms max latency, [\d.]+ ms 50th, [\d.]+ ms 95th, [\d.]+ ms 99th, "
            r"[\d.]+ ms 99.9th\.\n", r.stdout), r.stdout

        # no group: every partition assigned, read from the beginning
        r = _cli(b, "perf", "consume", "--topic", "perf", "--messages", "21000",
                 "--output", "json")
        assert r.returncode == 0, r.stderr
        got = _json(r)
        assert (got["records"], got["group"], got["timed_out"]) == (21000, None, False)
        assert got["bytes"] == 20000 * 100 + 1000 * 1024
        assert got["rebalance_ms"] == 0

        # with a group: subscribe, the coordinator assigns the three partitions
        r = _cli(b, "perf", "consume", "--topic", "perf", "--messages", "5000",
                 "--group", "perf-readers")
        assert r.returncode == 0, r.stderr
        header, row = r.stdout.splitlines()
        assert header.split(", ")[4] == "data.consumed.in.nMsg"
        assert row.split(", ")[4] == "5000"

        # more than the topic holds: the figures, then one error line and exit 1
        r = _cli(b, "perf", "consume", "--topic", "perf", "--messages", "30000",
                 "--timeout", "1500", "--output", "json")
        assert r.returncode == 1
        assert (_json(r)["records"], _json(r)["timed_out"]) == (21000, True)
        assert r.stderr.startswith("Error: read 21000 of 30000 records")
        assert r.stderr.count("\n") == 1


def test_perf_print_metrics(tmp_path: Path) -> None:
    """--print-metrics: the client's metrics after the totals, as Kafka's perf tools."""
    with BrokerProcess(tmp_path / "broker") as broker:
        check_print_metrics(broker)


def check_print_metrics(broker: BrokerProcess) -> None:
    topic = "perf-metrics"
    assert _cli(broker, "topics", "create", "--topic", topic, "--partitions", "2"
                ).returncode == 0
    r = _cli(broker, "perf", "produce", "--topic", topic, "--num-records", "300",
             "--record-size", "20", "--producer-props", "client.id=perfp", "--print-metrics")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("300 records sent")
    assert lines[2].startswith("Metric Name")
    table = {line.split(" : ")[0].rstrip(): float(line.split(" : ")[1]) for line in lines[3:]}
    assert table["producer-metrics:record-send-total:{client-id=perfp}"] == 300
    assert table[f"producer-topic-metrics:record-send-total:{{client-id=perfp, topic={topic}}}"] \
        == 300

    r = _cli(broker, "perf", "consume", "--topic", topic, "--messages", "300",
             "--consumer-props", "client.id=perfc", "--print-metrics", "--output", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["records"] == 300
    assert doc["metrics"]["consumer-fetch-manager-metrics:records-consumed-total:{client-id=perfc}"] == 300

    r = _cli(broker, "perf", "consume", "--topic", topic, "--messages", "300")
    assert r.returncode == 0, r.stderr
    assert "Metric Name" not in r.stdout  # only with --print-metrics
