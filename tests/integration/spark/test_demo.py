"""``millrace demo`` end to end as a user runs it: a child process that starts the
embedded broker, produces order events, runs the Spark pipeline into SQLite and verifies
every row; then a second run on the same data dir that continues the stream.  While it
runs, the broker's /metrics URL it prints answers (/healthz 200, a /metrics page that
prometheus-client's parser reads), and the JSON summary keeps the same URL."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from millrace.launcher.broker_process import free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def demo(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "120"}
    return subprocess.run([sys.executable, "-m", "millrace.cli.main", "demo", *args],
                          capture_output=True, text=True, timeout=timeout, env=env)


def printed_metrics_urls(stderr_line: str) -> list[str]:
    """The /metrics URLs of the demo's "metrics ..." progress line ([] for other lines)."""
    if not stderr_line.startswith("metrics "):
        return []
    return re.findall(r"http://[\w.:]+/metrics", stderr_line)


def scrape(metrics_url: str, auth: tuple[str, str] | None = None) -> set[str]:
    """/healthz must answer 200 and /metrics parse: the metric families' names.  ``auth``:
    (user, password) for a secured cluster's HTTP listener (basic authentication)."""
    health = metrics_url.removesuffix("/metrics") + "/healthz"
    with urllib.request.urlopen(health, timeout=10) as response:
        assert response.status == 200
    request = urllib.request.Request(metrics_url)
    if auth is not None:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    with urllib.request.urlopen(request, timeout=10) as response:
        text = response.read().decode()
    return {family.name for family in text_string_to_metric_families(text)}


def console_brokers(url: str) -> int:
    """How many brokers the demo's web console shows, once it has polled the cluster."""
    deadline = time.monotonic() + 30
    while True:
        with urllib.request.urlopen(url + "api/state", timeout=10) as response:
            state = json.loads(response.read())
        if state["cluster"] is not None:
            return len(state["cluster"]["brokers"])
        assert time.monotonic() < deadline, f"the console never saw the cluster: {state}"
        time.sleep(0.2)


def demo_scraping(*args: str, timeout: float = 600,
                  auth: Callable[[], tuple[str, str]] | None = None
                  ) -> tuple[subprocess.CompletedProcess[str], dict[str, set[str]],
                             dict[str, int]]:
    """``demo`` that, as soon as the demo prints its brokers' metrics URLs and its
    console's (while they serve), scrapes each of them: (the finished run, URL -> its
    metric families, console URL -> the brokers it showed).  ``auth()``, asked once the
    URLs are printed: the credentials a secured cluster's /metrics wants."""
    consoles: dict[str, int] = {}
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "120"}
    scraped: dict[str, set[str]] = {}
    err: list[str] = []
    with tempfile.TemporaryFile("w+") as out, subprocess.Popen(
            [sys.executable, "-m", "millrace.cli.main", "demo", *args], stdout=out,
            stderr=subprocess.PIPE, text=True, env=env) as proc:
        try:
            assert proc.stderr is not None
            for line in proc.stderr:
                err.append(line)
                for url in printed_metrics_urls(line):
                    scraped[url] = scrape(url, None if auth is None else auth())
                if line.startswith("console http://"):
                    console = line.split()[1]
                    consoles[console] = console_brokers(console)
            proc.wait(timeout)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        out.seek(0)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out.read(),
                                           "".join(err)), scraped, consoles


def test_the_scrape_checks_refuse_what_is_not_there() -> None:
    """Negative controls: no URL in another line, nothing served on a free port, a page
    that is not the Prometheus format."""
    assert printed_metrics_urls("broker embedded, logs in /x/metrics") == []
    assert printed_metrics_urls("metrics http://127.0.0.1:5/metrics") == [
        "http://127.0.0.1:5/metrics"]
    with pytest.raises(OSError):
        scrape(f"http://127.0.0.1:{free_port()}/metrics")
    with pytest.raises(ValueError):
        list(text_string_to_metric_families("<html>no</html>\n"))


# what Spark's JVM prints on its own (start-up notices, log4j's console, Ivy): it belongs
# in <data dir>/spark.log, never between the demo's progress lines (issue 16 item 7)
JVM_LINES = ("WARNING: Using incubator modules", "Setting default log level",
             "sc.setLogLevel", "NativeCodeLoader", "log4j", " WARN ", "Ivy", ":: loading",
             "SLF4J", "FutureWarning")


def batch_lines(stderr: str) -> dict[str, list[str]]:
    """table -> its progress lines ("  orders batch 0: ...")."""
    found: dict[str, list[str]] = {}
    for line in stderr.splitlines():
        m = re.match(r"  (\w+) batch \d+: ", line)
        if m:
            found.setdefault(m.group(1), []).append(line)
    return found


def test_demo_runs_verifies_and_continues(tmp_path: Path) -> None:
    data = tmp_path / "demo"
    first, scraped, consoles = demo_scraping("--events", "4000", "--partitions", "3",
                                             "--data-dir", str(data))
    assert first.returncode == 0, first.stdout + first.stderr
    # the embedded broker's metrics, printed once and live while the demo ran
    (url,) = scraped
    assert any(name.startswith("kafka_") for name in scraped[url]), scraped
    # and the web console, printed once and showing the broker while the demo ran
    assert list(consoles.values()) == [1], first.stderr
    out = first.stdout
    assert "verification passed" in out
    for title in ("Throughput", "Orders by status", "Paid revenue by product",
                  "Top product-minutes by paid revenue", "Pipeline by table"):
        assert title in out
    assert "produce" in first.stderr and "batch" in first.stderr
    assert (data / "millrace.db").is_file() and (data / "broker" / "logs").is_dir()

    # the JVM's own output is in the log file the demo names, not on the terminal
    spark_log = data.resolve() / "spark.log"
    for line in JVM_LINES:
        assert line not in first.stderr and line not in out, line
    named = [ln for ln in first.stderr.splitlines() if f"Spark's log: {spark_log}" in ln]
    assert len(named) == 1, first.stderr
    logged = spark_log.read_text()
    assert any(line in logged for line in JVM_LINES), logged  # where they went instead

    # the summary counts what the progress lines showed: per table, its micro-batches,
    # the records they read, the rows they upserted
    progress = batch_lines(first.stderr)
    assert set(progress) == {"orders", "revenue_per_minute"}, first.stderr
    summary = out[out.index("Pipeline by table"):].splitlines()
    assert summary[1].split() == ["table", "micro-batches", "records", "read", "rows",
                                  "upserted"]
    for row in summary[2:4]:
        table, batches, read, upserted = row.split()
        assert int(batches) == len(progress[table]), (row, progress[table])
        assert read == "4,000"
        shown = sum(int(m.group(1).replace(",", "")) for ln in progress[table]
                    for m in [re.search(r"([\d,]+) rows upserted", ln)] if m)
        assert upserted == f"{shown:,}", (row, progress[table])
    assert "batches" not in out.replace("micro-batches", "")  # the old ambiguous count

    # the same data dir again: 3,000 more events, the pipeline resumes from its checkpoint
    second, scraped, _ = demo_scraping("--events", "3000", "--data-dir", str(data),
                                    "--output", "json")
    assert second.returncode == 0, second.stdout + second.stderr
    doc = json.loads(second.stdout)
    assert list(scraped) == list(doc["metrics_urls"].values())  # node 0, the embedded one
    assert list(doc["metrics_urls"]) == ["0"]
    assert doc["run"] == 2 and doc["events_total"] == 7000
    assert doc["pipeline_input_rows"] == 3000
    assert doc["pipeline_queries"] == 1 and doc["spark_log"] == str(spark_log)
    progress = batch_lines(second.stderr)
    for table, counts in doc["pipeline_tables"].items():
        assert counts["records_read"] == 3000
        assert counts["micro_batches"] == len(progress[table]) >= 1
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
