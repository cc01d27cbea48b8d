"""Broker start-up and configuration, with the real `millrace broker` process."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from millrace.testing.broker_process import BrokerProcess, free_port

pytestmark = [pytest.mark.integration]


def _run_broker(*overrides: str) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, "-m", "millrace.cli.main", "broker"]
    for o in overrides:
        args += ["--override", o]
    return subprocess.run(args, capture_output=True, text=True, timeout=30, check=False)


@pytest.mark.parametrize(("override", "named"), [
    ("bogus.key=1", "bogus.key"),
    ("num.partitions=abc", "num.partitions"),
    ("num.partitions=0", "num.partitions"),
    ("log.message.timestamp.type=Sometimes", "log.message.timestamp.type"),
    ("listeners=PLAINTEXT://127.0.0.1:notaport", "listeners"),
])
def test_bad_config_refuses_to_start_naming_the_key(tmp_path: Path, override: str,
                                                    named: str) -> None:
    proc = _run_broker(f"log.dirs={tmp_path}", override)
    assert proc.returncode == 2
    assert named in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(("overrides", "named"), [
    (("listeners=SSL://127.0.0.1:0", "security.inter.broker.protocol=SSL",
      "ssl.keystore.type=JKS", "ssl.keystore.location=/nonexistent/broker.jks"),
     "ssl.keystore"),
    (("listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
      "sasl.enabled.mechanisms=PLAIN", 'sasl.jaas.config=PlainLoginModule required a="b"'),
     "sasl.jaas.config"),
    (("listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",),
     "sasl.enabled.mechanisms"),  # Kafka's default GSSAPI is not supported
    (("listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
      "sasl.enabled.mechanisms=PLAIN"), "jaas"),  # PLAIN without users
])
def test_bad_security_config_refuses_to_start_naming_it(
        tmp_path: Path, overrides: tuple[str, ...], named: str) -> None:
    proc = _run_broker(f"log.dirs={tmp_path / 'logs'}", *overrides)
    assert proc.returncode == 2, proc.stderr
    assert named in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "logs").exists()  # refused before touching the log dirs


def test_properties_file_and_unknown_key_in_it(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text(f"log.dirs={tmp_path}/logs\nlisteners=PLAINTEXT://127.0.0.1:{free_port()}\n"
                     "# a comment\nnot.a.kafka.setting = 5\n")
    proc = subprocess.run([sys.executable, "-m", "millrace.cli.main", "broker", "--config",
                           str(props)], capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 2 and "not.a.kafka.setting" in proc.stderr


def test_topic_overrides_persist_across_restart_and_clean_shutdown(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    port = free_port()
    overrides = {"log.dirs": str(logs)}
    with BrokerProcess(tmp_path / "run1", port=port, overrides=overrides) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("kept", 2, 1, config={"retention.ms": "123456"})])[
            "kept"].result(15)
        res = ConfigResource(ConfigResource.Type.TOPIC, "kept", incremental_configs=[
            ConfigEntry("cleanup.policy", "compact",
                        incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([res])[res].result(15)
    assert b.proc is not None and b.proc.returncode == 0
    assert (logs / ".kafka_cleanshutdown").exists()
    with BrokerProcess(tmp_path / "run2", port=port, overrides=overrides) as b2:
        admin = AdminClient({"bootstrap.servers": b2.bootstrap})
        res = ConfigResource(ConfigResource.Type.TOPIC, "kept")
        configs = admin.describe_configs([res])[res].result(15)
        assert configs["cleanup.policy"].value == "compact"
        assert configs["retention.ms"].value == "123456"
        assert len(admin.list_topics(timeout=10).topics["kept"].partitions) == 2
    assert "no clean shutdown marker" not in b2.logs().split("starting millrace broker")[-1]


def test_retention_deletes_old_segments(tmp_path: Path) -> None:
    overrides = {"log.retention.check.interval.ms": "500", "log.segment.bytes": "2000",
                 "log.retention.bytes": "4000"}
    with BrokerProcess(tmp_path, overrides=overrides) as b:
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
        for _ in range(200):
            p.produce("shrinking", value=b"x" * 100)
            p.flush(10)
        part = tmp_path / "logs" / "shrinking-0"
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            segments = sorted(part.glob("*.log"))
            if segments and segments[0].name != "0".zfill(20) + ".log":
                break
            time.sleep(0.2)
        segments = sorted(part.glob("*.log"))
        assert segments[0].name != "0".zfill(20) + ".log", "no segment was deleted"
        total = sum(s.stat().st_size for s in segments)
        assert total <= 4000 + 2000 + 200  # retained bytes plus the active segment
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "ret"})
        try:
            lo, hi = c.get_watermark_offsets(TopicPartition("shrinking", 0), timeout=10)
        finally:
            c.close()
        assert hi == 200 and lo > 0


def test_a_taken_port_fails_in_one_line_before_the_log_dir_is_touched(tmp_path: Path) -> None:
    """Issue 16 item 4: a second broker on a taken port used to log 53 lines and create
    every __consumer_offsets directory before failing.  It now binds first: one error
    line naming the listener and the socket error, exit status 1, nothing on disk."""
    import socket
    logs = tmp_path / "logs"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = _run_broker(f"log.dirs={logs}", f"listeners=PLAINTEXT://127.0.0.1:{port}")
    assert proc.returncode == 1, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert f"cannot listen on PLAINTEXT://127.0.0.1:{port}" in lines[0]
    assert "in use" in lines[0].lower()
    assert not logs.exists() or not any(logs.iterdir())


def test_broker_help_describes_the_command_and_its_log_levels() -> None:
    proc = subprocess.run([sys.executable, "-m", "millrace.cli.main", "broker", "--help"],
                          capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 0
    assert "Run a millrace broker" in proc.stdout
    assert "{debug,info,warning,error}" in proc.stdout
    bad = subprocess.run([sys.executable, "-m", "millrace.cli.main", "broker", "--log-level",
                          "loud"], capture_output=True, text=True, timeout=30, check=False)
    assert bad.returncode == 2 and "invalid choice: 'loud'" in bad.stderr


def test_a_first_start_logs_the_offsets_topic_in_one_line(tmp_path: Path) -> None:
    """Issue 16 item 5: one line for the created __consumer_offsets, not one per
    partition (the per-partition lines are at DEBUG)."""
    with BrokerProcess(tmp_path, overrides={"offsets.topic.num.partitions": "50"}) as b:
        text = b.logs()
    assert text.count("created topic __consumer_offsets with 50 partition(s)") == 1
    assert "created log __consumer_offsets-" not in text
