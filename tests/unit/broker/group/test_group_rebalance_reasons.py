"""KIP-800: the coordinator keeps why each rebalance began (what it saw, with the client's
own reason from JoinGroup v8+ / LeaveGroup v5+), in ``GroupMetadata.rebalances``, which
the coordinator's HTTP view and the console show."""

from __future__ import annotations

from millrace.broker.group.group_metadata import GroupMetadata, GroupState
from tests.unit.broker.group.groupgen import SESSION, Harness, hb_req, join_req, leave_req


def group(h: Harness) -> GroupMetadata:
    g = h.coord.group("g")
    assert g is not None
    return g


def test_a_new_member_records_the_join_with_the_clients_reason() -> None:
    h = Harness()
    (_a,), gen = h.stable_group(1)
    before = len(group(h).rebalances)
    h.new_member(version=9, reason="scaling out to 2 pods")
    assert group(h).state is GroupState.PREPARING_REBALANCE
    assert len(group(h).rebalances) == before + 1
    event = group(h).rebalances[-1]
    assert (event.generation, event.from_state, event.members) == (gen, "Stable", 2)
    assert event.reason.startswith("adding new member client-")
    assert event.reason.endswith("; client reason: scaling out to 2 pods")
    assert event.to_json()["reason"] == event.reason


def test_before_v8_there_is_no_client_reason_only_the_coordinators() -> None:
    h = Harness()
    h.stable_group(1)
    h.new_member(version=7, reason="ignored: v7 has no reason field")
    assert "client reason" not in group(h).rebalances[-1].reason


def test_a_leave_records_the_members_reason() -> None:
    h = Harness()
    (_a, b), gen = h.stable_group(2)
    h.leave(leave_req("g", (b, None), reason="the pod is shutting down"), version=5)
    event = group(h).rebalances[-1]
    assert event.reason == (f"removing member {b} (client client) on LeaveGroup; "
                            "client reason: the pod is shutting down")
    assert (event.generation, event.members) == (gen, 1)


def test_a_session_expiry_says_so() -> None:
    h = Harness()
    (a, b), gen = h.stable_group(2)
    h.advance(SESSION - 1)
    assert h.heartbeat(hb_req("g", gen, a)).error_code == 0
    h.advance(1)
    event = group(h).rebalances[-1]
    assert event.reason.startswith(f"removing member {b} (client client) on heartbeat "
                                   "expiration")


def test_a_join_that_changes_nothing_records_no_rebalance() -> None:
    h = Harness()
    (a, b), gen = h.stable_group(2)
    before = list(group(h).rebalances)
    follower = b if group(h).leader_id == a else a
    again = h.join(join_req(member_id=follower))     # a follower resending, nothing new
    assert again.generation_id == gen
    assert list(group(h).rebalances) == before
    assert group(h).state is GroupState.STABLE


def test_the_history_is_bounded() -> None:
    g = GroupMetadata("g", 0, now_ms=0)
    for i in range(200):
        g.record_rebalance(i, f"reason {i}")
    assert len(g.rebalances) == g.rebalances.maxlen
    assert g.rebalances[-1].reason == "reason 199"


def test_a_clients_reason_is_one_bounded_line() -> None:
    h = Harness()
    (a,), _ = h.stable_group(1)
    h.leave(leave_req("g", (a, None), reason="line one\nline two " + "x" * 10_000), version=5)
    reason = group(h).rebalances[-1].reason
    assert "\n" not in reason
    assert reason.endswith("; client reason: line one line two " + "x" * 238 + "...")
