"""``millrace demo`` output and exit codes, with the run itself replaced by a fake."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from rich.console import Console

from millrace.cli import demo as demo_cmd
from millrace.cli.main import main
from millrace.demo.fold import Mismatch, Verification
from millrace.demo.run import (
    DemoConfig,
    DemoError,
    DemoListener,
    DemoResult,
    PipelineTable,
)


def fake_result(passed: bool = True) -> DemoResult:
    verification = Verification(3, 3, 2, 2)
    if not passed:
        verification.mismatch_count = 1
        verification.mismatches.append(Mismatch("orders", "o1", "status", "paid", "created"))
    return DemoResult(
        data_dir="/d", bootstrap_servers="127.0.0.1:1", embedded_broker=True, topic="orders",
        partitions=6, database="sqlite:////d/millrace.db", run=1, events_produced=10,
        events_total=10, produce_s=0.5, pipeline_queries=1, pipeline_input_rows=10,
        pipeline_s=2.0,
        pipeline_tables={"orders": PipelineTable(1, 10, 3),
                         "revenue_per_minute": PipelineTable(1, 10, 2)},
        orders_by_status=[("paid", 2), ("created", 1)],
        revenue_by_product=[("scale", 99.5, 2)],
        top_windows=[("2026-01-01 09:00:00", "scale", 54.0, 1)], verification=verification)


def install(monkeypatch: pytest.MonkeyPatch, outcome: DemoResult | Exception
            ) -> list[DemoConfig]:
    seen: list[DemoConfig] = []

    def run_demo(config: DemoConfig, listener: DemoListener) -> DemoResult:
        seen.append(config)
        listener.phase("broker", "embedded")
        listener.phase("produce", "10 events")
        listener.produced(10, 10)
        listener.phase("pipeline", "sqlite")
        listener.batch(SimpleNamespace(  # type: ignore[arg-type]
            query="orders", batch_id=0, input_rows=10, input_rows_per_s=5.0,
            processed_rows_per_s=5.0, lag={"orders-0": 0}, rows_upserted=3, table="orders"))
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    monkeypatch.setattr(demo_cmd, "run_demo", run_demo)
    return seen


def test_summary_and_exit_0_when_verified(monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    seen = install(monkeypatch, fake_result())
    assert main(["demo", "--events", "10", "--data-dir", "/d", "--fresh"]) == 0
    out, err = capsys.readouterr()
    assert seen[0].events == 10 and seen[0].fresh and seen[0].data_dir == Path("/d")
    assert seen[0].bootstrap_servers is None and seen[0].database is None
    assert "verification passed" in out
    for title in ("Throughput", "Orders by status", "Paid revenue by product",
                  "Top product-minutes"):
        assert title in out
    assert "orders batch 0: 10 rows" in err


def test_exit_1_and_the_differences_when_verification_fails(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    install(monkeypatch, fake_result(passed=False))
    assert main(["demo", "--events", "10"]) == 1
    out = capsys.readouterr().out
    assert "verification FAILED" in out
    assert "orders o1: status is 'created', expected 'paid'" in out


def test_json_output(monkeypatch: pytest.MonkeyPatch,
                     capsys: pytest.CaptureFixture[str]) -> None:
    install(monkeypatch, fake_result())
    assert main(["demo", "-o", "json", "-b", "kafka:9092", "--database", "sqlite:///x"]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert doc["verification"]["passed"] is True
    assert doc["produce_rate"] == 20 and doc["pipeline_rate"] == 5
    assert doc["orders_by_status"] == [["paid", 2], ["created", 1]]


def test_a_demo_error_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    install(monkeypatch, DemoError("topic 'orders' already exists; run with --fresh"))
    assert main(["demo"]) == 1
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1] == \
        "Error: topic 'orders' already exists; run with --fresh"


def test_summary_columns_line_up() -> None:
    console = Console(width=200, record=True, highlight=False)
    demo_cmd.print_summary(fake_result(), console)
    lines = console.export_text().splitlines()
    header = lines.index("product  revenue  orders")
    assert lines[header + 1] == "scale      99.50       2"


def test_the_summary_says_what_it_counts() -> None:
    """Issue 16 item 7: "2 batches" summed both tables' sinks of one micro-batch; the
    summary now counts per table what the progress lines show."""
    console = Console(width=200, record=True, highlight=False)
    demo_cmd.print_summary(fake_result(), console)
    text = console.export_text()
    assert "Spark local, trigger available-now, one Spark query feeds both tables" in text
    lines = text.splitlines()
    header = lines.index("table               micro-batches  records read  rows upserted")
    assert lines[header + 1].split() == ["orders", "1", "10", "3"]
    assert lines[header + 2].split() == ["revenue_per_minute", "1", "10", "2"]
    assert " batches" not in text


def test_a_batch_without_rows_has_its_line(capsys: pytest.CaptureFixture[str]) -> None:
    listener = demo_cmd.ConsoleListener(Console(stderr=True, soft_wrap=True))
    listener.batch(SimpleNamespace(  # type: ignore[arg-type]
        query="orders", batch_id=1, input_rows=0, input_rows_per_s=0.0,
        processed_rows_per_s=0.0, lag={"orders-0": 0}, rows_upserted=0, table="orders"))
    assert capsys.readouterr().err == "  orders batch 1: no new rows, lag 0\n"


def test_json_names_the_spark_log_and_the_per_table_counts(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    result = fake_result()
    result.spark_log = "/d/spark.log"
    install(monkeypatch, result)
    assert main(["demo", "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["spark_log"] == "/d/spark.log" and doc["pipeline_queries"] == 1
    assert doc["pipeline_tables"]["orders"] == {"micro_batches": 1, "records_read": 10,
                                                "rows_upserted": 3}


# ---------------------------------------------------------------------- security
CLIENT_FILE = """\
# a secured cluster of one's own
bootstrap.servers=broker1:9093
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.username=alice
sasl.password=alice-secret
ssl.ca.location=/etc/ca.pem
"""


def test_command_config_reaches_the_demo_and_names_its_cluster(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    props = tmp_path / "client.properties"
    props.write_text(CLIENT_FILE)
    seen = install(monkeypatch, fake_result())
    assert main(["demo", "--command-config", str(props), "-o", "json"]) == 0
    config = seen[-1]
    assert config.client_config["sasl.password"] == "alice-secret"
    assert config.client_config["security.protocol"] == "SASL_SSL"
    assert config.bootstrap_servers == "broker1:9093"  # the file's cluster, not an embedded one
    assert "alice-secret" not in repr(config)
    # --bootstrap-server wins; a cluster of the demo's own ignores the file's address
    assert main(["demo", "--command-config", str(props), "-b", "other:9093"]) == 0
    assert seen[-1].bootstrap_servers == "other:9093"
    assert main(["demo", "--command-config", str(props), "--brokers", "3"]) == 0
    assert seen[-1].bootstrap_servers is None and seen[-1].brokers == 3


def test_security_flag_and_an_unreadable_command_config(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        tmp_path: Path) -> None:
    seen = install(monkeypatch, fake_result())
    assert main(["demo", "--brokers", "3", "--security", "sasl_ssl"]) == 0
    assert seen[-1].security == "sasl_ssl" and seen[-1].client_config == {}
    capsys.readouterr()
    assert main(["demo", "--command-config", str(tmp_path / "absent.properties")]) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith(
        f"Error: cannot read --command-config {tmp_path / 'absent.properties'}")


def test_the_summary_says_how_the_clients_connected() -> None:
    result = fake_result()
    result.brokers, result.embedded_broker = 3, True
    result.security_protocol = "SASL_SSL"
    result.client_properties = "/d/cluster/security/client.properties"
    console = Console(width=300, record=True, highlight=False)
    demo_cmd.print_summary(result, console)
    text = console.export_text()
    assert "on embedded 3-broker cluster 127.0.0.1:1 over SASL_SSL;" in text
    assert "client settings (SCRAM user 'client'): /d/cluster/security/client.properties" in text
