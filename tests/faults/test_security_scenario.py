"""The security scenario of the fault harness, short profile: a three-broker SASL_SSL
cluster, the acks=all workload running as ``User:client`` with exactly the ACLs it needs,
and hostile clients -- users without ACLs, wrong passwords -- hammering every broker for
20 seconds (``millrace.testing.faults.hostile``).

* With the authorizer, every hostile attempt must come back denied with the error Kafka
  3.9 answers (29 / 30 / 31 / 58), from every broker -- leader or not, coordinator or
  not, topic existing or not -- with no record appended, no topic deleted, no ACL made;
  and the workload must lose nothing.
* The negative control runs the same clients against the same cluster without the
  authorizer: there the checker must report unauthorized successes of every kind that
  nothing checks, hostile records in the log and the decoy topic gone -- if it did not,
  a clean security run would prove nothing.

The long run (``scripts/faults.sh --scenario security --seconds 180``) and its figures are
in ``docs/reliability.md``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from millrace.testing.faults.hostile import KINDS
from millrace.testing.faults.runner import SCENARIOS, RunResult, run_scenario

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SECONDS = 20.0


def run(name: str, tmp_path: Path, seed: int = 5) -> RunResult:
    result = run_scenario(SCENARIOS[name], seed, tmp_path / name, seconds=SECONDS,
                          log=lambda *_: None)
    assert result.error is None, f"{name}: the run itself broke: {result.error}"
    assert result.security is not None
    return result


def explain(r: RunResult) -> str:
    return f"{r.scenario} seed {r.seed}: {r.summary()} (history in {r.directory})"


@pytest.mark.long  # scripts/faults.sh --scenario security --scenario control-no-authorizer
def test_hostile_clients_are_denied_everything_and_the_workload_loses_nothing(
        tmp_path: Path) -> None:
    r = run("security", tmp_path)
    sec = r.security
    assert sec is not None
    assert r.report.ok, explain(r)  # no lost, duplicated, phantom ... record
    assert sec.ok, explain(r)  # no unauthorized success, hostile record or effect
    assert sec.unauthorized_successes == 0 and not sec.hostile_records and not sec.effects
    for kind in KINDS:
        tally = sec.kinds[kind]
        assert tally.attempts >= 3, (kind, explain(r))
        # authorization comes before leadership, coordination and existence: every
        # broker answers the authorization error, never NOT_LEADER or NOT_COORDINATOR
        assert tally.refused == 0, (kind, tally.codes, explain(r))
        assert tally.denied >= tally.attempts - 1, (kind, explain(r))
    assert sec.auth_failures > 0
    # the workload, as the client user with its ACLs, was served
    writers = {op.producer for op in r.history.sends if op.outcome == "ok"}
    assert writers == {"confluent-0", "millrace-1"}, explain(r)
    assert r.history.commits and r.report.acknowledged > 0
    assert set(sec.rss) == {1, 2, 3}
    assert r.passed


@pytest.mark.long  # scripts/faults.sh --scenario security --scenario control-no-authorizer
def test_without_the_authorizer_the_checker_catches_the_hostile_clients(
        tmp_path: Path) -> None:
    assert SCENARIOS["control-no-authorizer"].negative_control
    r = run("control-no-authorizer", tmp_path)
    sec = r.security
    assert sec is not None
    assert not sec.ok and r.passed, f"the checker missed the control: {explain(r)}"
    # nothing checks these without an authorizer: each kind got through somewhere
    for kind in ("produce", "fetch", "replica-fetch", "find-coord", "join-group",
                 "delete-topics"):
        assert sec.kinds[kind].succeeded > 0, (kind, explain(r))
    assert sec.hostile_records, explain(r)
    assert any("faults-decoy was deleted" in e for e in sec.effects), explain(r)
    # the bad passwords are refused by authentication, authorizer or not
    assert sec.kinds["bad-sasl"].succeeded == 0 and sec.auth_failures > 0
    # and the workload checker sees the hostile records as phantoms
    assert r.report.phantom and not r.report.lost, explain(r)
