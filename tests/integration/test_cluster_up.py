"""``millrace cluster up`` as a user runs it: a child process that starts ZooKeeper and
three brokers, prints where they are, serves confluent-kafka, stops cleanly on SIGTERM
(no process left behind) and, run again on the same directory, brings the same cluster
back with its data.  Every broker serves /metrics on a port of its own: the URLs are
printed and listed in the JSON, each answers /healthz and a /metrics that
prometheus-client's own parser reads, and ``prometheus.yml`` in the cluster dir scrapes
exactly those brokers."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from millrace.launcher.broker_process import free_port, port_in_use
from millrace.launcher.zookeeper_process import ZOOKEEPER_JAR

pytestmark = [pytest.mark.integration]

if not ZOOKEEPER_JAR.exists() or shutil.which("java") is None:
    pytest.skip("needs Debian's zookeeper package and java (scripts/system-deps.sh)",
                allow_module_level=True)

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient  # noqa: E402
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient  # noqa: E402


def free_port_range(count: int) -> int:
    for _ in range(50):
        base = free_port()
        if base + count < 65535 and not any(port_in_use(base + i) for i in range(count)):
            return base
    raise RuntimeError(f"no {count} consecutive free ports")


class ClusterUp:
    """``millrace cluster up --output json`` in a child process."""

    def __init__(self, directory: Path, brokers: int, base_port: int,
                 *extra: str, http_base_port: int | None = None) -> None:
        # the HTTP ports from a free range too, never the default 9644 another run may hold
        http = ["--http-base-port", str(http_base_port or free_port_range(brokers))]
        if "--no-schema-registry" not in extra and "--schema-registry-port" not in extra:
            http += ["--schema-registry-port", str(free_port())]  # never 8081 another holds
        if "--no-console" not in extra and "--console-port" not in extra:
            http += ["--console-port", str(free_port())]          # nor 8080
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "millrace.cli.main", "cluster", "up", "--brokers",
             str(brokers), "--dir", str(directory), "--base-port", str(base_port),
             "--output", "json", *http, *extra],
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
        registry, console = self.info.get("schema_registry"), self.info.get("console")
        return [self.info["zookeeper"]["pid"]] + [b["pid"] for b in self.info["brokers"]] + \
            ([registry["pid"]] if registry else []) + ([console["pid"]] if console else [])

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


def get(url: str, auth: tuple[str, str] | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url)
    if auth is not None:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def scrape(url: str, auth: tuple[str, str] | None = None) -> set[str]:
    """The metric families of a /metrics page, read by prometheus-client's parser."""
    status, text = get(url, auth)
    assert status == 200, text
    return {family.name for family in text_string_to_metric_families(text)}


def scrape_targets(path: Path) -> list[tuple[str, str]]:
    """(target, broker_id label) of each static config in a prometheus.yml, read as text
    (PyYAML is not a dependency)."""
    found: list[tuple[str, str]] = []
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("- targets:"):
            (target,) = json.loads(stripped.removeprefix("- targets:"))
            found.append((target, ""))
        elif stripped.startswith("broker_id:"):
            found[-1] = (found[-1][0], json.loads(stripped.removeprefix("broker_id:")))
    return found


def basic_auth_of(config: Path) -> tuple[str, str] | None:
    """(username, password) of prometheus.yml's basic_auth (its password_file read), if
    it has one."""
    fields = dict(line.strip().split(": ", 1) for line in config.read_text().splitlines()
                  if line.strip().startswith(("username:", "password_file:")))
    if not fields:
        return None
    return fields["username"], Path(fields["password_file"]).read_text()


def check_metrics(info: dict[str, Any], http_base: int) -> None:
    """The brokers' HTTP URLs in cluster up's JSON line: where they were asked to be,
    each serving /healthz and a parseable /metrics (with the credentials prometheus.yml
    names, when it names some), all in prometheus.yml and no more."""
    urls = [b["http"] for b in info["brokers"]]
    assert urls == [f"http://127.0.0.1:{http_base + i}" for i in range(len(urls))]
    assert [b["metrics"] for b in info["brokers"]] == [f"{u}/metrics" for u in urls]
    config = Path(info["prometheus_config"])
    auth = basic_auth_of(config)
    for broker in info["brokers"]:
        assert get(f"{broker['http']}/healthz")[0] == 200
        assert any(name.startswith("kafka_") for name in scrape(broker["metrics"], auth))
    assert config == Path(info["dir"]) / "prometheus.yml"
    assert scrape_targets(config) == [(f"127.0.0.1:{http_base + i}", str(b["id"]))
                                      for i, b in enumerate(info["brokers"])]
    assert "job_name: millrace" in config.read_text()


def test_the_metrics_checkers_refuse_what_is_not_there(tmp_path: Path) -> None:
    """Negative controls: a page that is not the Prometheus format, a port nobody serves,
    a prometheus.yml with another target."""
    with pytest.raises(ValueError):
        list(text_string_to_metric_families("<html>not metrics</html>\n"))
    with pytest.raises(OSError):
        get(f"http://127.0.0.1:{free_port()}/healthz")
    yml = tmp_path / "prometheus.yml"
    yml.write_text('    static_configs:\n      - targets: ["127.0.0.1:1"]\n'
                   '        labels:\n          broker_id: "1"\n')
    assert scrape_targets(yml) == [("127.0.0.1:1", "1")]
    assert scrape_targets(yml) != [("127.0.0.1:2", "1")]


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
    http_base = free_port_range(3)
    up = ClusterUp(directory, 3, base, http_base_port=http_base)
    try:
        bootstrap = up.info["bootstrap_servers"]
        assert bootstrap == ",".join(f"127.0.0.1:{base + i}" for i in range(3))
        assert [b["id"] for b in up.info["brokers"]] == [1, 2, 3]
        check_metrics(up.info, http_base)
        create_topic(bootstrap, "events")
        registry_url = up.info["schema_registry"]["url"]
        with SchemaRegistryClient({"url": registry_url}) as registry:
            schema_id = registry.register_schema("events-value", Schema('"string"', "AVRO"))
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                             "enable.idempotence": True})
        for i in range(20):
            producer.produce("events", f"v{i}".encode(), key=f"k{i}".encode())
        assert producer.flush(30) == 0
        assert sorted(consume(bootstrap, "events", 20)) == sorted(
            f"v{i}".encode() for i in range(20))
        # the web console runs beside the cluster and sees it
        console_state = up.info["console"]["url"] + "api/state"

        def console_sees_events() -> bool:
            with urllib.request.urlopen(console_state, timeout=10) as response:
                state = json.loads(response.read())
            return (len(state["cluster"]["brokers"]) == 3
                    and any(t["name"] == "events" and t["messages"] == 20
                            for t in state["topics"]))
        deadline = time.monotonic() + 60
        while not console_sees_events():
            assert time.monotonic() < deadline, "the console never showed topic events"
            time.sleep(0.5)
        code, err = up.stop()
        assert code == 0, err
        assert err.index("stopping console") < err.index("stopping broker 1")
        assert "stopping broker 1 (controlled shutdown)" in err
        assert err.index("stopping schema registry") < err.index("stopping broker 1")
        assert err.rstrip().endswith("stopped"), err
        deadline = time.monotonic() + 10
        while any(alive(p) for p in up.pids()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [p for p in up.pids() if alive(p)] == []
    finally:
        up.kill()

    again = ClusterUp(directory, 3, base, http_base_port=http_base)
    try:
        assert again.info["bootstrap_servers"] == bootstrap
        check_metrics(again.info, http_base)  # the same URLs, prometheus.yml still right
        with SchemaRegistryClient({"url": again.info["schema_registry"]["url"]}) as registry:
            assert registry.get_latest_version("events-value").schema_id == schema_id
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


def test_cluster_up_names_a_busy_http_port(tmp_path: Path) -> None:
    import socket

    base, http_base = free_port_range(3), free_port_range(3)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", http_base + 2))
        busy.listen()
        result = subprocess.run(
            [sys.executable, "-m", "millrace.cli.main", "cluster", "up", "--dir",
             str(tmp_path / "c"), "--base-port", str(base), "--http-base-port",
             str(http_base)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"Error: port {http_base + 2} (for broker 3's HTTP listener) is already in use on "
        "127.0.0.1 -- another cluster still running? Choose others with --http-base-port "
        "(or --no-http)"]
    assert not (tmp_path / "c").exists()


@pytest.mark.slow
def test_cluster_up_prints_the_metrics_urls_and_the_scrape_config(tmp_path: Path) -> None:
    """The human output: each broker's /metrics URL and where prometheus.yml is."""
    directory = tmp_path / "c"
    base, http_base, console_port = free_port_range(1), free_port_range(1), free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "millrace.cli.main", "cluster", "up", "--brokers", "1",
         "--dir", str(directory), "--base-port", str(base), "--http-base-port",
         str(http_base), "--console-port", str(console_port)], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stdout is not None
        lines: list[str] = []
        while not lines or not lines[-1].startswith("Ctrl-C"):
            line = proc.stdout.readline()
            assert line, proc.communicate(timeout=30)
            lines.append(line.rstrip("\n"))
        url = f"http://127.0.0.1:{http_base}/metrics"
        (broker,) = [ln for ln in lines if ln.startswith("broker 1 ")]
        assert broker == (f"broker 1 127.0.0.1:{base} (log {directory.resolve()}/broker-1/"
                          f"broker.log, metrics {url})")
        config = directory.resolve() / "prometheus.yml"
        assert f"Prometheus scrape config: {config}" in lines
        assert scrape_targets(config) == [(f"127.0.0.1:{http_base}", "1")]
        assert any(name.startswith("kafka_") for name in scrape(url))
        assert (f"console http://127.0.0.1:{console_port}/ (log {directory.resolve()}/"
                "console/console.log)") in lines
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


@pytest.mark.slow
def test_cluster_up_without_http(tmp_path: Path) -> None:
    directory = tmp_path / "c"
    up = ClusterUp(directory, 1, free_port_range(1), "--no-http")
    try:
        assert up.info["prometheus_config"] is None
        assert [(b["http"], b["metrics"]) for b in up.info["brokers"]] == [(None, None)]
        assert not (directory / "prometheus.yml").exists()
        assert "/metrics" not in (directory / "broker-1" / "broker.log").read_text()
        code, err = up.stop()
        assert code == 0, err
    finally:
        up.kill()


def read_properties(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines()
                if line and not line.startswith("#"))


@pytest.mark.slow
def test_cluster_up_with_sasl_ssl_prints_a_working_client_properties(tmp_path: Path) -> None:
    directory = tmp_path / "secure"
    base = free_port_range(1)
    http_base = free_port_range(1)
    up = ClusterUp(directory, 1, base, "--security", "sasl_ssl", http_base_port=http_base)
    try:
        assert up.info["security_protocol"] == "SASL_SSL"
        # plain HTTP on loopback beside the TLS port, behind basic credentials: admin's,
        # from the password file prometheus.yml names (0600); the probes stay open
        check_metrics(up.info, http_base)
        metrics_url = up.info["brokers"][0]["metrics"]
        config = Path(up.info["prometheus_config"])
        auth = basic_auth_of(config)
        assert auth is not None and auth[0] == "admin"
        password_file = Path(config.read_text().split("password_file: ")[1].split()[0])
        assert password_file.stat().st_mode & 0o777 == 0o600
        assert get(metrics_url)[0] == 401
        assert get(metrics_url, (auth[0], "wrong"))[0] == 401
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
        # the registry asks the cluster's SCRAM users for basic credentials
        registry = up.info["schema_registry"]
        assert registry["basic_auth"]
        user_info = f"{props['sasl.username']}:{props['sasl.password']}"
        with SchemaRegistryClient({"url": registry["url"],
                                   "basic.auth.user.info": user_info}) as client:
            assert client.register_schema("secured-value", Schema('"string"', "AVRO")) >= 1
        assert get(registry["url"] + "/subjects")[0] == 401
        # the port speaks TLS only: a PLAINTEXT client never gets metadata
        plain = AdminClient({"bootstrap.servers": props[
            "bootstrap.servers"]})
        with pytest.raises(confluent_kafka.KafkaException):
            plain.list_topics(timeout=3)
        code, err = up.stop()
        assert code == 0, err
    finally:
        up.kill()
