"""``millrace demo`` end to end as a user runs it: a child process that starts the
embedded broker, produces order events, runs the Spark pipeline into SQLite and verifies
every row; then a second run on the same data dir that continues the stream."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def demo(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "120"}
    return subprocess.run([sys.executable, "-m", "millrace.cli.main", "demo", *args],
                          capture_output=True, text=True, timeout=timeout, env=env)


def test_demo_runs_verifies_and_continues(tmp_path: Path) -> None:
    data = tmp_path / "demo"
    first = demo("--events", "4000", "--partitions", "3", "--data-dir", str(data))
    assert first.returncode == 0, first.stdout + first.stderr
    out = first.stdout
    assert "verification passed" in out
    for title in ("Throughput", "Orders by status", "Paid revenue by product",
                  "Top product-minutes by paid revenue"):
        assert title in out
    assert "produce" in first.stderr and "batch" in first.stderr
    assert (data / "millrace.db").is_file() and (data / "broker" / "logs").is_dir()

    # the same data dir again: 3,000 more events, the pipeline resumes from its checkpoint
    second = demo("--events", "3000", "--data-dir", str(data), "--output", "json")
    assert second.returncode == 0, second.stdout + second.stderr
    doc = json.loads(second.stdout)
    assert doc["run"] == 2 and doc["events_total"] == 7000
    assert doc["pipeline_input_rows"] == 3000
    assert doc["verification"]["passed"] is True, doc["verification"]
    assert doc["verification"]["orders_actual"] == doc["verification"]["orders_expected"] > 0


def test_a_data_dir_that_lost_track_of_its_topic_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "demo"
    data.mkdir()
    state = {"seed": 42, "topic": "orders", "bootstrap_servers": None,
             "database": f"sqlite:///{data.resolve()}/millrace.db", "partitions": 6,
             "events": 500, "runs": 1}
    (data / "demo.json").write_text(json.dumps(state))
    result = demo("--events", "10", "--data-dir", str(data), timeout=120)
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("Error: topic 'orders' should hold the 500 events") and \
        "--fresh" in last
