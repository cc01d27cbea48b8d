"""The demo's bookkeeping without a broker: the state file, --fresh, the summaries."""

from __future__ import annotations

from pathlib import Path

import pytest

from millrace.demo.fold import fold, iso_ms
from millrace.demo.orders import EPOCH_MS, OrderEventGenerator
from millrace.demo.run import (
    DemoConfig,
    DemoError,
    DemoState,
    _check_state,
    reset_data_dir,
    summarize,
)


def test_state_round_trips_and_a_foreign_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "demo.json"
    assert DemoState.load(path) is None
    state = DemoState(42, "orders", None, "sqlite:////x/millrace.db", 6, events=1000, runs=1)
    state.save(path)
    assert DemoState.load(path) == state
    path.write_text('{"something": "else"}')
    with pytest.raises(DemoError, match="--fresh"):
        DemoState.load(path)


def test_a_data_dir_from_another_setup_is_refused(tmp_path: Path) -> None:
    config = DemoConfig(tmp_path, seed=42)
    state = DemoState(42, "orders", None, config.database_url, 6)
    _check_state(state, config, tmp_path / "demo.json")
    other = DemoConfig(tmp_path, seed=42, bootstrap_servers="kafka:9092")
    with pytest.raises(DemoError, match="bootstrap_servers=None"):
        _check_state(state, other, tmp_path / "demo.json")


def test_default_database_is_sqlite_in_the_data_dir(tmp_path: Path) -> None:
    assert DemoConfig(tmp_path).database_url == f"sqlite:///{tmp_path.resolve()}/millrace.db"
    assert DemoConfig(tmp_path, database="postgresql://h/db").database_url == "postgresql://h/db"


def test_fresh_deletes_only_the_demos_own_entries(tmp_path: Path) -> None:
    (tmp_path / "broker" / "logs").mkdir(parents=True)
    (tmp_path / "broker" / "logs" / "00.log").write_bytes(b"x")
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "millrace.db").write_bytes(b"x")
    (tmp_path / "demo.json").write_text("{}")
    (tmp_path / "notes.txt").write_text("mine")
    reset_data_dir(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    reset_data_dir(tmp_path / "absent")  # nothing there: nothing to do


def test_summaries_of_the_tables_as_written() -> None:
    tables = fold(OrderEventGenerator(1).take(5_000))
    orders = [(e.order_id, e.customer, e.product, e.quantity, e.price, e.status,
               iso_ms(e.event_time_ms)) for e in tables.orders.values()]
    revenue = [(iso_ms(s), iso_ms(s + 60_000), p, a.revenue, a.orders)
               for (s, p), a in tables.revenue.items()]
    by_status, by_product, top = summarize(orders, revenue, top=3)
    assert sum(n for _, n in by_status) == len(tables.orders)
    assert [n for _, n in by_status] == sorted((n for _, n in by_status), reverse=True)
    paid_events = sum(a.orders for a in tables.revenue.values())
    assert sum(n for _, _, n in by_product) == paid_events
    assert len(top) == 3 and top[0][2] == round(max(a.revenue for a in tables.revenue.values()),
                                                2)
    assert top[0][0] >= iso_ms(EPOCH_MS)


def test_a_java_stack_in_an_error_is_cut_to_one_short_line() -> None:
    from millrace.demo.run import _first_words

    text = "sink query failed: Py4JJavaError: boom\n" + "\tat org.apache.X(X.scala:1)\n" * 500
    short = _first_words(text)
    assert "\n" not in short and len(short) <= 304 and short.endswith(" ...")
    assert short.startswith("sink query failed: Py4JJavaError: boom at org.apache.X")
    assert _first_words("short one") == "short one"


def test_a_data_dir_of_a_plaintext_run_is_refused_for_a_secured_one(tmp_path: Path) -> None:
    config = DemoConfig(tmp_path, brokers=3)
    state = DemoState(42, "orders", None, config.database_url, 6, brokers=3)
    state.save(tmp_path / "demo.json")
    loaded = DemoState.load(tmp_path / "demo.json")
    assert loaded is not None and loaded.security == "none"
    _check_state(loaded, config, tmp_path / "demo.json")
    secured = DemoConfig(tmp_path, brokers=3, security="sasl_ssl")
    with pytest.raises(DemoError, match="security='none', not 'sasl_ssl'"):
        _check_state(loaded, secured, tmp_path / "demo.json")


def test_security_needs_the_demos_own_cluster(tmp_path: Path) -> None:
    from millrace.demo.run import run_demo

    with pytest.raises(DemoError, match="--security sasl_ssl secures the demo's own cluster: "
                                        "use it with --brokers 3"):
        run_demo(DemoConfig(tmp_path, security="sasl_ssl"))
    with pytest.raises(DemoError, match="--security tls: one of none, sasl_ssl"):
        run_demo(DemoConfig(tmp_path, brokers=3, security="tls"))
    assert not (tmp_path / "demo.json").exists()


def test_client_settings_reach_the_pipeline_source_and_stay_hidden(tmp_path: Path) -> None:
    from millrace.demo.run import _client_settings, pipeline_config

    client = {"bootstrap.servers": "elsewhere:1", "security.protocol": "SASL_SSL",
              "sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": "pw-123"}
    config = DemoConfig(tmp_path, client_config=client)
    assert "pw-123" not in repr(config)
    settings = _client_settings(config, None)
    assert "bootstrap.servers" not in settings and settings["sasl.password"] == "pw-123"
    job = pipeline_config(config, "127.0.0.1:5", settings)
    assert job.source.bootstrap_servers == "127.0.0.1:5"
    assert job.source.options["kafka.security.protocol"] == "SASL_SSL"
    assert job.source.options["kafka.sasl.password"] == "pw-123"
    assert job.source.client_config()["bootstrap.servers"] == "127.0.0.1:5"
    assert "pw-123" not in repr(job)
