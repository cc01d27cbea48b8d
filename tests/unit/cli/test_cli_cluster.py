"""``millrace cluster up`` before it starts anything: its broker configs and the checks that
turn what would fail half-way (no ZooKeeper, a busy port, a bad count) into one line.
The ports are taken by fakes: no socket is opened."""

from __future__ import annotations

import pytest

from millrace.cli import cluster as cluster_cmd
from millrace.cli.common import CommandError
from millrace.cli.main import main
from millrace.launcher import broker_process, zookeeper_process


@pytest.fixture
def ports(monkeypatch: pytest.MonkeyPatch) -> set[int]:
    """Busy ports (empty: every port is free); ZooKeeper installed."""
    busy: set[int] = set()
    monkeypatch.setattr(broker_process, "port_in_use", lambda port, host="127.0.0.1":
                        port in busy)
    monkeypatch.setattr(zookeeper_process, "zookeeper_missing", lambda: None)
    return busy


def test_internal_topics_are_replicated_on_at_most_the_brokers_there_are() -> None:
    assert cluster_cmd.up_overrides(1, {}) == {
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1"}
    assert cluster_cmd.up_overrides(5, {"offsets.topic.replication.factor": "2",
                                        "min.insync.replicas": "2"}) == {
        "offsets.topic.replication.factor": "2",
        "transaction.state.log.replication.factor": "3",
        "min.insync.replicas": "2"}


def test_free_ports_pass(ports: set[int]) -> None:
    cluster_cmd.check_up_arguments(3, 9092, 2181)


@pytest.mark.parametrize(("busy", "message"), [
    (9093, "port 9093 (for broker 2) is already in use on 127.0.0.1 -- another cluster still "
           "running? Choose others with --base-port / --zookeeper-port"),
    (2181, "port 2181 (for ZooKeeper) is already in use on 127.0.0.1 -- another cluster "
           "still running? Choose others with --base-port / --zookeeper-port"),
])
def test_a_busy_port_is_named(ports: set[int], busy: int, message: str) -> None:
    ports.add(busy)
    with pytest.raises(CommandError) as e:
        cluster_cmd.check_up_arguments(3, 9092, 2181)
    assert str(e.value) == message


def test_bad_counts_and_ports(ports: set[int]) -> None:
    with pytest.raises(CommandError, match=r"^--brokers must be at least 1, got 0$"):
        cluster_cmd.check_up_arguments(0, 9092, None)
    with pytest.raises(CommandError, match=r"^ports 65534\.\.65536 are not all valid TCP ports$"):
        cluster_cmd.check_up_arguments(3, 65534, None)
    with pytest.raises(CommandError,
                       match=r"^--zookeeper-port 9093 is one of the brokers' ports 9092\.\.9094$"):
        cluster_cmd.check_up_arguments(3, 9092, 9093)


def test_missing_zookeeper_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(zookeeper_process.shutil, "which", lambda name: "/usr/bin/java")
    monkeypatch.setattr(zookeeper_process, "ZOOKEEPER_JAR",
                        zookeeper_process.Path("/nonexistent/zookeeper.jar"))
    assert main(["cluster", "up", "--dir", "/nonexistent/cluster"]) == 1
    assert capsys.readouterr().err == (
        "Error: ZooKeeper is not installed (/nonexistent/zookeeper.jar is missing): install "
        "it with scripts/system-deps.sh zookeeper\n")


def test_missing_java_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zookeeper_process.shutil, "which", lambda name: None)
    assert zookeeper_process.zookeeper_missing() == (
        "java is not installed (ZooKeeper needs it): install both with "
        "scripts/system-deps.sh java zookeeper")
