"""The README's "Security" section, run as a reader would run it: the openssl recipe makes
the CA and the broker certificate, the brokers' SCRAM user goes into ZooKeeper before the
broker starts, the broker runs with the section's listener settings (SASL_SSL only:
CLIENT and REPLICATION), and then every command and client example runs against it --
millrace's CLI and library, kcat, confluent-kafka, kafka-python, aiokafka and Spark.

The text runs verbatim except for where things are: ``/etc/millrace/`` becomes the test's
directory, ``broker1.example.com:9093/9094`` and ``0.0.0.0:9093/9094`` its two loopback
ports, ``zk1:2181`` its ZooKeeper.  The first block (``cluster up`` in the foreground, the
demo) is run by tests/integration/test_cluster_up.py and
tests/integration/spark/test_demo_cluster.py instead.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from millrace.common.config import parse_properties
from millrace.launcher.zookeeper_process import ZOOKEEPER_JAR, ZooKeeperProcess
from millrace.testing.broker_process import BrokerProcess, free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]

if not ZOOKEEPER_JAR.exists() or shutil.which("java") is None:
    pytest.skip("needs Debian's zookeeper package and java (scripts/system-deps.sh)",
                allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
TIMEOUT_S = 120


@dataclass
class Block:
    language: str
    text: str
    line: int

    def commands(self) -> list[str]:
        lines = self.text.replace("\\\n", " ").splitlines()
        return [c for c in lines if c.strip() and not c.lstrip().startswith("#")]


def security_blocks() -> list[Block]:
    text = README.read_text()
    start = text.index("\n## Security\n")
    end = text.index("\n## ", start + 1)
    return [Block(m.group(1), m.group(2), text.count("\n", 0, start + m.start()) + 1)
            for m in re.finditer(r"^```(\w*)\n(.*?)^```$", text[start:end], re.S | re.M)]


class Reader:
    """A working directory (with ``.venv/bin/millrace``) where the README's paths,
    host names and ports are this test's."""

    def __init__(self, cwd: Path, zookeeper: str) -> None:
        self.cwd = cwd
        self.client_port, self.replication_port = free_port(), free_port()
        self.zookeeper = zookeeper
        self.env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
        millrace = cwd / ".venv" / "bin" / "millrace"
        millrace.parent.mkdir(parents=True)
        millrace.write_text(f'#!/bin/sh\nexec {sys.executable} -m millrace.cli.main "$@"\n')
        millrace.chmod(0o755)

    def local(self, text: str) -> str:
        for port, mine in (("9093", self.client_port), ("9094", self.replication_port)):
            for host in ("broker1.example.com", "0.0.0.0"):
                text = text.replace(f"{host}:{port}", f"127.0.0.1:{mine}")
        return (text.replace("/etc/millrace/", f"{self.cwd}/")
                .replace("zk1:2181", self.zookeeper))

    def sh(self, command: str) -> subprocess.CompletedProcess[str]:
        return self._run(["bash", "-c", self.local(command)])

    def python(self, code: str) -> subprocess.CompletedProcess[str]:
        return self._run([sys.executable, "-c", self.local(code)])

    def _run(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(argv, cwd=self.cwd, env=self.env, capture_output=True,
                                  text=True, timeout=TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(argv, -1, "", f"hung for {TIMEOUT_S} s")


def ok(what: str, proc: subprocess.CompletedProcess[str], quiet: bool = False) -> str:
    """The example exited 0 and (unless it writes files only) printed something."""
    assert proc.returncode == 0 and (quiet or proc.stdout.strip() or proc.stderr.strip()), (
        f"{what}: exit {proc.returncode}\n{proc.stdout}{proc.stderr}")
    return proc.stdout


@pytest.fixture(scope="module")
def blocks() -> dict[str, Block]:
    """The section's blocks by role, in README order."""
    found = security_blocks()
    roles = ["dev", "openssl", "server", "users", "client-properties", "cli", "millrace",
             "others", "spark"]
    assert [b.language for b in found] == ["sh", "sh", "properties", "sh", "properties",
                                           "sh", "python", "python", "python"], found
    return dict(zip(roles, found))


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory, blocks: dict[str, Block]
            ) -> Iterator[tuple[Reader, BrokerProcess]]:
    """The section up to the broker: certificates, the brokers' user, the broker."""
    zk_dir: Path = tmp_path_factory.mktemp("zookeeper")
    with ZooKeeperProcess(zk_dir) as zk:
        reader = Reader(tmp_path_factory.mktemp("reader"), zk.connect_string)
        for command in blocks["openssl"].commands():
            ok(f"$ {command}", reader.sh(command), quiet=command.startswith("cat "))
        zookeeper_command, *_ = blocks["users"].commands()
        assert "--zookeeper" in zookeeper_command
        ok(f"$ {zookeeper_command}", reader.sh(zookeeper_command))
        settings = parse_properties(reader.local(blocks["server"].text))
        overrides = {**settings, "broker.id": "1",
                     "zookeeper.connect": reader.zookeeper + "/millrace",
                     "offsets.topic.replication.factor": "1",
                     "transaction.state.log.replication.factor": "1",
                     # the only broker has nobody to hand leadership to when it stops
                     "controlled.shutdown.max.retries": "1",
                     "controlled.shutdown.retry.backoff.ms": "200"}
        broker = BrokerProcess(tmp_path_factory.mktemp("broker"), reader.client_port,
                               overrides)
        with broker:
            yield reader, broker
        assert broker.proc is not None and broker.proc.returncode == 0, broker.logs()


def test_users_commands_and_clients_of_the_security_section(
        secured: tuple[Reader, BrokerProcess], blocks: dict[str, Block]) -> None:
    reader, broker = secured
    _, *user_commands = blocks["users"].commands()
    for command in user_commands:
        out = ok(f"$ {command}", reader.sh(command), quiet=command.startswith("printf "))
    assert "alice" in out and "SCRAM-SHA-512" in out  # the --describe

    (reader.cwd / "client.properties").write_text(
        reader.local(blocks["client-properties"].text))
    outputs = []
    for command in blocks["cli"].commands():
        if command.startswith("kcat") and shutil.which("kcat") is None:
            continue
        outputs.append(ok(f"$ {command}", reader.sh(command)))
    assert outputs[2].split() == ["1", "2", "3", "4", "5"]  # millrace consume
    if len(outputs) > 3:
        assert outputs[3].split() == ["1", "2", "3", "4", "5"]  # kcat

    out = ok("the millrace example", reader.python(blocks["millrace"].text))
    assert "3 partitions in payments" in out
    out = ok("the other clients' example", reader.python(blocks["others"].text))
    assert "confluent-kafka: 0 left unsent" in out
    assert "kafka-python: RecordMetadata(topic='payments'" in out
    assert "aiokafka: RecordMetadata(topic='payments'" in out
    # everything ran as a SCRAM or PLAIN user over TLS; nobody failed to authenticate
    logs = broker.logs()
    assert "authentication of" not in logs and "TLS handshake with" not in logs


def test_a_wrong_password_is_refused_at_once(secured: tuple[Reader, BrokerProcess],
                                             blocks: dict[str, Block]) -> None:
    reader, _ = secured
    wrong = reader.local(blocks["client-properties"].text).replace("alice-secret", "nope")
    (reader.cwd / "wrong.properties").write_text(wrong)
    proc = reader.sh(".venv/bin/millrace topics describe -b broker1.example.com:9093 "
                     "--command-config wrong.properties")
    assert proc.returncode == 1
    assert proc.stderr.strip().startswith("Error: SASL_AUTHENTICATION_FAILED"), proc.stderr


def test_the_spark_example(secured: tuple[Reader, BrokerProcess],
                           blocks: dict[str, Block]) -> None:
    pytest.importorskip("pyspark")
    reader, _ = secured
    out = ok("the Spark example", reader.python(blocks["spark"].text))
    assert re.search(r"^\d+ records in payments$", out, re.M), out
