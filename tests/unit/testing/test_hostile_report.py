"""The security scenario's verdict on synthetic attempts and replicas: an answer is
``denied`` only when every slot holds the expected authorization error; any slot without
error (or JoinGroup's MEMBER_ID_REQUIRED, which hands out a member id) is an unauthorized
success; a hostile record in any replica fails the verdict even if every answer was a
denial."""

from __future__ import annotations

from millrace.common.errors import Errors
from millrace.testing.faults.hostile import (
    HOSTILE_MARK,
    KINDS,
    Attempt,
    classify,
    security_report,
)
from millrace.testing.faults.replica_logs import ReplicaLog

T29, G30, C31 = (Errors.TOPIC_AUTHORIZATION_FAILED, Errors.GROUP_AUTHORIZATION_FAILED,
                 Errors.CLUSTER_AUTHORIZATION_FAILED)


def test_denied_only_when_every_slot_is_the_expected_error() -> None:
    assert classify("produce", [T29, T29, T29]) == "denied"
    assert classify("produce", [T29, 0, T29]) == "succeeded"
    assert classify("fetch", [Errors.NOT_LEADER_OR_FOLLOWER, T29]) == "refused"
    assert classify("join-group", [G30]) == "denied"
    assert classify("join-group", [Errors.MEMBER_ID_REQUIRED]) == "succeeded"
    assert classify("join-group", [Errors.NOT_COORDINATOR]) == "refused"
    assert classify("create-acls", [C31]) == "denied"
    assert classify("create-acls", [Errors.SECURITY_DISABLED]) == "refused"
    assert classify("offset-commit", [T29]) == "refused"  # the group is checked first: 30
    assert classify("bad-sasl", [Errors.SASL_AUTHENTICATION_FAILED]) == "denied"
    assert classify("produce", []) == "refused"
    # records or a high watermark in a partition answered 29: data leaked all the same
    assert classify("replica-fetch", [T29, T29], leaked=True) == "succeeded"


def replica(broker: int, *values: bytes) -> ReplicaLog:
    r = ReplicaLog(broker, "faults", 0, 0, len(values), len(values))
    r.records = list(enumerate(values))
    return r


def test_report_counts_by_kind_and_fails_on_a_success() -> None:
    attempts = [Attempt(1.0, "mallory", "produce", 1, "denied", [T29] * 3),
                Attempt(1.1, "mallory", "fetch", 2, "succeeded", [0, 6, 6],
                        "5 records returned"),
                Attempt(1.2, "trudy", "join-group", 3, "refused", [Errors.NOT_COORDINATOR]),
                Attempt(1.3, "client", "bad-sasl", 1, "denied",
                        [Errors.SASL_AUTHENTICATION_FAILED]),
                Attempt(1.4, "trudy", "create-acls", 2, "failed", [], "ConnectionError")]
    clean = {("faults", 0): {1: replica(1, b"confluent-0:000000001")}}
    report = security_report(attempts, clean, authorizer=True)
    assert set(report.kinds) == set(KINDS)
    assert report.total("attempts") == 5 and report.total("denied") == 2
    assert report.unauthorized_successes == 1 and report.auth_failures == 1
    assert report.kinds["join-group"].codes == {"NOT_COORDINATOR": 1}
    assert report.kinds["create-acls"].failed == 1
    assert not report.ok
    assert report.unauthorized == ["fetch by mallory on broker 2 at t=1.1s: codes ['NONE', "
                                   "'NOT_LEADER_OR_FOLLOWER', 'NOT_LEADER_OR_FOLLOWER'] "
                                   "5 records returned"]
    assert report.to_json()["unauthorized_successes"] == 1


def test_all_denied_is_ok_but_a_hostile_record_or_effect_is_not() -> None:
    denied = [Attempt(0.5, "mallory", "produce", 1, "denied", [T29])]
    clean = {("faults", 0): {1: replica(1, b"confluent-0:000000001")}}
    assert security_report(denied, clean, authorizer=True).ok
    value = HOSTILE_MARK + b"mallory:7#0"
    dirty = {("faults", 0): {1: replica(1, b"confluent-0:000000001", value),
                             2: replica(2, b"confluent-0:000000001", value)}}
    report = security_report(denied, dirty, authorizer=True)
    assert not report.ok
    assert report.hostile_records == [f"faults-0@1 {value!r} on brokers [1, 2]"]
    effect = security_report(denied, clean, authorizer=True,
                             effects=["the decoy topic faults-decoy was deleted"])
    assert not effect.ok
