"""The short profile of the fault harness, inside the normal test command.

Each test runs one scenario of ``millrace.testing.faults`` on a real cluster (ZooKeeper
from Debian's package, three ``millrace broker`` processes) with a fixed seed and a few
faults, then checks the history against the replicas' files on disk:

* the normal scenarios (leader kills; network partitions; the whole ISR killed with
  unclean election off) must show no anomaly at all;
* the negative controls (``acks=1`` with lagging followers; unclean election; a build
  that acknowledges before appending) must be *reported* as losing acknowledged
  records -- if the checker missed them, a green run would mean nothing.

The long profile, every scenario over and over with fresh seeds, is
``scripts/faults.sh --minutes N --seed S``; its figures are in ``docs/reliability.md``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from millrace.testing.faults.runner import SCENARIOS, RunResult, run_scenario

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def run(name: str, tmp_path: Path, faults: int, seed: int = 11) -> RunResult:
    result = run_scenario(SCENARIOS[name], seed, tmp_path / name, faults=faults,
                          log=lambda *_: None)
    assert result.error is None, f"{name}: the run itself broke: {result.error}"
    assert result.faults_injected == faults
    return result


def explain(r: RunResult) -> str:
    return f"{r.scenario} seed {r.seed}: {r.report.summary()} (history in {r.directory})"


# long profile (scripts/faults.sh runs every scenario): CI keeps the targeted leader kills
# of tests/integration/cluster (test_cluster_failover.py: every acknowledged record after a
# kill -9 of the leader, in order, the replicas' files alike; the millrace and third-party
# clients through a leader kill) and the harness's other scenarios and controls below
@pytest.mark.long
def test_leader_kills_lose_nothing(tmp_path: Path) -> None:
    r = run("leader-kills", tmp_path, faults=3)
    assert r.report.ok, explain(r)
    assert r.report.acknowledged > 0 and r.report.committed_records >= r.report.acknowledged
    writers = {op.producer for op in r.history.sends if op.outcome == "ok"}
    assert writers == {"confluent-0", "millrace-1"}  # both clients had records acked
    assert r.history.commits and r.history.final_assignment


@pytest.mark.long  # CI keeps tests/faults/test_network_partitions.py's targeted cases
def test_network_partitions_lose_nothing(tmp_path: Path) -> None:
    r = run("network", tmp_path, faults=2, seed=3)
    assert r.report.ok, explain(r)
    assert {f.kind for f in r.history.faults} <= {"partition-leader", "partition-follower",
                                                  "partition-zookeeper"}


def test_killing_the_whole_isr_with_clean_election_loses_nothing(tmp_path: Path) -> None:
    r = run("clean-election-only", tmp_path, faults=1)
    assert r.report.ok, explain(r)


@pytest.mark.parametrize("control", ["control-acks1", "control-unclean",
                                     "control-ack-before-append"])
def test_negative_controls_are_caught(control: str, tmp_path: Path) -> None:
    assert SCENARIOS[control].negative_control
    r = run(control, tmp_path, faults=1)
    assert r.report.lost, f"the checker missed the control's loss: {explain(r)}"
    assert r.passed  # for a control, passing means being caught
