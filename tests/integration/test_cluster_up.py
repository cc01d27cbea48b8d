"""``millrace cluster up`` as a user runs it: a child process that starts ZooKeeper and
three brokers, prints where they are, serves confluent-kafka, stops cleanly on SIGTERM
(no process left behind) and, run again on the same directory, brings the same cluster
back with its data."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from millrace.launcher.broker_process import free_port, port_in_use
from millrace.launcher.zookeeper_process import ZOOKEEPER_JAR

pytestmark = [pytest.mark.integration]

if not ZOOKEEPER_JAR.exists() or shutil.which("java") is None:
    pytest.skip("needs Debian's zookeeper package and java (scripts/system-deps.sh)",
                allow_module_level=True)

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient  # noqa: E402


def free_port_range(count: int) -> int:
    for _ in range(50):
        base = free_port()
        if base + count < 65535 and not any(port_in_use(base + i) for i in range(count)):
            return base
    raise RuntimeError(f"no {count} consecutive free ports")


class ClusterUp:
    """``millrace cluster up --output json`` in a child process."""

    def __init__(self, directory: Path, brokers: int, base_port: int,
                 *extra: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "millrace.cli.main", "cluster", "up", "--brokers",
             str(brokers), "--dir", str(directory), "--base-port", str(base_port),
             "--output", "json", *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # blocks until the cluster is up (or exits)
        if not line:
            self.proc.wait(30)
            raise AssertionError(f"cluster up exited {self.proc.returncode}: "
                                 f"{self.proc.stderr.read() if self.proc.stderr else ''}")
        self.info: dict[str, Any] = json.loads(line)

    def pids(self) -> list[int]:
        return [self.info["zookeeper"]["pid"]] + [b["pid"] for b in self.info["brokers"]]

    def stop(self) -> tuple[int, str]:
        self.proc.send_signal(signal.SIGTERM)
        _, err = self.proc.communicate(timeout=120)
        return self.proc.returncode, err

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def create_topic(bootstrap: str, topic: str) -> None:
    from millrace.client.admin import KafkaAdminClient, NewTopic

    with KafkaAdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=3)]).all()
        deadline = time.monotonic() + 30
        while True:  # leaders are elected asynchronously after the create returns
            result = admin.describe_topics([topic])[topic]
            parts = None if result.exception() else result.result().partitions
            if parts and all(p.leader is not None and len(p.isr) == 3 for p in parts):
                return
            assert time.monotonic() < deadline, parts
            time.sleep(0.2)


def consume(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"g-{time.monotonic_ns()}",
        "auto.offset.reset": "earliest", "enable.auto.commit": False})
    values: list[bytes] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(values) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
    finally:
        consumer.close()
    return values


@pytest.mark.slow
def test_cluster_up_serves_stops_cleanly_and_restarts_with_its_data(tmp_path: Path) -> None:
    directory = tmp_path / "cluster"
    base = free_port_range(3)
    up = ClusterUp(directory, 3, base)
    try:
        bootstrap = up.info["bootstrap_servers"]
        assert bootstrap == ",".join(f"127.0.0.1:{base + i}" for i in range(3))
        assert [b["id"] for b in up.info["brokers"]] == [1, 2, 3]
        create_topic(bootstrap, "events")
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                             "enable.idempotence": True})
        for i in range(20):
            producer.produce("events", f"v{i}".encode(), key=f"k{i}".encode())
        assert producer.flush(30) == 0
        assert sorted(consume(bootstrap, "events", 20)) == sorted(
            f"v{i}".encode() for i in range(20))
        code, err = up.stop()
        assert code == 0, err
        assert "stopping broker 1 (controlled shutdown)" in err
        assert err.rstrip().endswith("stopped"), err
        deadline = time.monotonic() + 10
        while any(alive(p) for p in up.pids()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [p for p in up.pids() if alive(p)] == []
    finally:
        up.kill()

    again = ClusterUp(directory, 3, base)
    try:
        assert again.info["bootstrap_servers"] == bootstrap
        values = consume(bootstrap, "events", 20)
        assert sorted(values) == sorted(f"v{i}".encode() for i in range(20))
        code, err = again.stop()
        assert code == 0, err
    finally:
        again.kill()


def test_cluster_up_names_a_busy_port(tmp_path: Path) -> None:
    import socket

    base = free_port_range(3)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", base + 1))
        busy.listen()
        result = subprocess.run(
            [sys.executable, "-m", "millrace.cli.main", "cluster", "up", "--dir",
             str(tmp_path / "c"), "--base-port", str(base)],
            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"Error: port {base + 1} (for broker 2) is already in use on 127.0.0.1 -- another "
        "cluster still running? Choose others with --base-port / --zookeeper-port"]
    assert not (tmp_path / "c").exists()


def read_properties(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines()
                if line and not line.startswith("#"))


@pytest.mark.slow
def test_cluster_up_with_sasl_ssl_prints_a_working_client_properties(tmp_path: Path) -> None:
    directory = tmp_path / "secure"
    base = free_port_range(1)
    up = ClusterUp(directory, 1, base, "--security", "sasl_ssl")
    try:
        assert up.info["security_protocol"] == "SASL_SSL"
        path = Path(up.info["client_properties"])
        assert path.stat().st_mode & 0o777 == 0o600  # it holds a password
        props = read_properties(path)
        assert props["security.protocol"] == "SASL_SSL"
        assert props["sasl.mechanism"] == "SCRAM-SHA-512"
        producer = confluent_kafka.Producer({**props, "acks": "all"})
        for i in range(5):
            producer.produce("secured", f"s{i}".encode())
        assert producer.flush(30) == 0
        consumer = confluent_kafka.Consumer({**props, "group.id": "g",
                                             "auto.offset.reset": "earliest"})
        try:
            consumer.subscribe(["secured"])
            got: list[bytes] = []
            deadline = time.monotonic() + 60
            while len(got) < 5 and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is None:
                    got.append(msg.value())
        finally:
            consumer.close()
        assert sorted(got) == [f"s{i}".encode() for i in range(5)]
        # the port speaks TLS only: a PLAINTEXT client never gets metadata
        plain = AdminClient({"bootstrap.servers": props[
            "bootstrap.servers"]})
        with pytest.raises(confluent_kafka.KafkaException):
            plain.list_topics(timeout=3)
        code, err = up.stop()
        assert code == 0, err
    finally:
        up.kill()
