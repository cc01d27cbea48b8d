"""``millrace leader-election`` and ``cluster describe`` against a real three-broker
``LocalCluster``: a preferred leader that came back after a restart gets its leadership
back on request, a second request finds nothing to do, and describe names every broker and
the controller."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from millrace.client.admin import ElectionType, KafkaAdminClient, NewTopic, TopicPartition
from millrace.common.errors import ElectionNotNeededError
from millrace.launcher.local_cluster import LocalCluster
from millrace.launcher.zookeeper_process import ZOOKEEPER_JAR

pytestmark = [pytest.mark.integration, pytest.mark.slow]

if not ZOOKEEPER_JAR.exists() or shutil.which("java") is None:
    pytest.skip("needs Debian's zookeeper package and java (scripts/system-deps.sh)",
                allow_module_level=True)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    # no automatic rebalance: only the request under test may move leadership back
    with LocalCluster(tmp_path / "cluster", 3,
                      overrides={"auto.leader.rebalance.enable": "false"}) as c:
        yield c


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "millrace.cli.main", *args],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})


def leader_and_isr(admin: KafkaAdminClient, topic: str) -> tuple[int | None, list[int]]:
    result = admin.describe_topics([topic])[topic]
    if result.exception():
        return None, []
    p = result.result().partitions[0]
    return (p.leader.id if p.leader else None), sorted(n.id for n in p.isr)


def wait_for(what: str, check: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_preferred_leader_gets_leadership_back(cluster: LocalCluster) -> None:
    with KafkaAdminClient(bootstrap_servers=cluster.bootstrap) as admin:
        admin.create_topics([NewTopic("t", replica_assignment={0: [1, 2, 3]})]).all()
        wait_for("leader 1 with the full ISR",
                 lambda: leader_and_isr(admin, "t") == (1, [1, 2, 3]))
        cluster.stop_broker(1)  # controlled shutdown: leadership moves to 2
        wait_for("a new leader", lambda: leader_and_isr(admin, "t")[0] in (2, 3))
        cluster.restart_broker(1)
        wait_for("broker 1 back in the ISR", lambda: leader_and_isr(admin, "t")[1] == [1, 2, 3])
        assert leader_and_isr(admin, "t")[0] != 1

        done = cli("leader-election", "--bootstrap-server", cluster.broker(3).bootstrap,
                   "--election-type", "preferred", "--topic", "t", "--partition", "0")
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout == ("Successfully completed leader election (PREFERRED) for "
                               "partitions t-0\n")
        wait_for("leader 1 again", lambda: leader_and_isr(admin, "t")[0] == 1, timeout=20)

        again = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("t", 0)])
        assert isinstance(again.errors()[TopicPartition("t", 0)], ElectionNotNeededError)

    described = cli("cluster", "describe", "--bootstrap-server", cluster.bootstrap)
    assert described.returncode == 0, described.stderr
    lines = described.stdout.splitlines()
    assert lines[0].startswith("Cluster ID: ") and lines[0] != "Cluster ID: -"
    controller = lines[1]
    assert controller.startswith("Controller: ") and controller != "Controller: -"
    rows = [line.split() for line in lines[4:]]
    assert [(r[0], r[1], r[2]) for r in rows] == [
        (str(i), "127.0.0.1", str(cluster.broker(i).port)) for i in (1, 2, 3)]
