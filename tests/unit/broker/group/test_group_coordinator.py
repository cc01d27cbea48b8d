"""The pure group coordinator, driven step by step with explicit time (no sleeps)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from millrace.broker.group import GroupConfig
from millrace.broker.group.group_metadata import GroupState
from tests.unit.broker.group.groupgen import (
    CONFIG,
    REBALANCE,
    SESSION,
    Harness,
    Pending,
    hb_req,
    join_req,
    leave_req,
    sync_req,
)

NONE, ILLEGAL_GENERATION, INCONSISTENT_GROUP_PROTOCOL, INVALID_GROUP_ID = 0, 22, 23, 24
UNKNOWN_MEMBER_ID, INVALID_SESSION_TIMEOUT, REBALANCE_IN_PROGRESS = 25, 26, 27
NOT_COORDINATOR, MEMBER_ID_REQUIRED, GROUP_MAX_SIZE_REACHED, FENCED_INSTANCE_ID = 16, 79, 81, 82


def state(h: Harness, group: str = "g") -> GroupState:
    g = h.coord.group(group)
    assert g is not None
    return g.state


# ---------------------------------------------------------------------- one member
def test_member_id_required_then_join_then_sync_makes_the_group_stable() -> None:
    h = Harness()
    first = h.join(join_req(), version=4)
    assert first.error_code == MEMBER_ID_REQUIRED
    assert first.member_id.startswith("client-") and first.generation_id == -1
    joined = h.join(join_req(member_id=first.member_id), version=4)
    assert joined.error_code == NONE
    assert (joined.generation_id, joined.leader, joined.member_id) == (
        1, first.member_id, first.member_id)
    assert joined.protocol_name == "range"
    assert [(m.member_id, m.metadata) for m in joined.members] == [(first.member_id, b"sub")]
    assert state(h) is GroupState.COMPLETING_REBALANCE
    assert h.log[0] == []                      # nothing persisted before the assignment

    synced = h.sync(sync_req("g", 1, first.member_id, {first.member_id: b"tp-0"}))
    assert synced.error_code == NONE and synced.assignment == b"tp-0"
    assert state(h) is GroupState.STABLE
    assert len(h.log[0]) == 1                  # the group record with the assignment
    assert h.heartbeat(hb_req("g", 1, first.member_id)).error_code == NONE


def test_join_before_v4_admits_the_member_on_its_first_request() -> None:
    h = Harness()
    joined = h.join(join_req(), version=3)
    assert joined.error_code == NONE and joined.member_id.startswith("client-")
    assert joined.generation_id == 1


def test_static_member_gets_no_member_id_required() -> None:
    h = Harness()
    joined = h.join(join_req(instance_id="i-1"), version=5)
    assert joined.error_code == NONE
    assert joined.members[0].group_instance_id == "i-1"


@pytest.mark.parametrize("version", [0, 1, 4, 6, 7, 9])
def test_join_answers_fit_every_version(version: int) -> None:
    h = Harness()
    if version >= 4:
        joined = h.new_member(version=version)
    else:
        joined = h.join(join_req(), version=version)
    assert joined.error_code == NONE and joined.generation_id == 1
    assert joined.protocol_name == "range"
    assert joined.protocol_type == ("consumer" if version >= 7 else None)
    error = h.join(join_req(member_id="nobody"), version=version)
    assert error.error_code == UNKNOWN_MEMBER_ID
    assert error.protocol_name == ("" if version < 7 else None)


def test_join_v0_bounds_the_rebalance_by_the_session_timeout() -> None:
    h = Harness()
    a = h.join(join_req(session=5_000, rebalance=99_999), version=0)
    assert h.coord.group("g").members[a.member_id].rebalance_timeout_ms == 5_000  # type: ignore[union-attr]


def test_join_validation_errors() -> None:
    h = Harness()
    assert h.join(join_req(group="")).error_code == INVALID_GROUP_ID
    assert h.join(join_req(session=5)).error_code == INVALID_SESSION_TIMEOUT
    assert h.join(join_req(session=600_001)).error_code == INVALID_SESSION_TIMEOUT
    assert h.join(join_req(protocols=())).error_code == INCONSISTENT_GROUP_PROTOCOL
    assert h.join(join_req(protocol_type="")).error_code == INCONSISTENT_GROUP_PROTOCOL
    assert h.join(join_req(member_id="ghost")).error_code == UNKNOWN_MEMBER_ID
    h.new_member()
    other = h.join(join_req(protocols=(("roundrobin", b""),)), version=3)
    assert other.error_code == INCONSISTENT_GROUP_PROTOCOL
    assert h.join(join_req(protocol_type="connect"), version=3).error_code == (
        INCONSISTENT_GROUP_PROTOCOL)


def test_not_coordinator_for_partitions_not_hosted() -> None:
    h = Harness(partitions=2)
    h.coord.unload(h.coord.partition_for("g"))
    assert h.join(join_req()).error_code == NOT_COORDINATOR
    assert h.heartbeat(hb_req("g", 1, "m")).error_code == NOT_COORDINATOR
    h.coord.begin_loading([h.coord.partition_for("g")])
    assert h.join(join_req()).error_code == 14      # COORDINATOR_LOAD_IN_PROGRESS


def test_group_max_size() -> None:
    h = Harness(GroupConfig(min_session_timeout_ms=10, initial_rebalance_delay_ms=0,
                            max_size=1))
    h.new_member()
    assert h.join(join_req()).error_code == GROUP_MAX_SIZE_REACHED


# ---------------------------------------------------------------------- two members
def test_second_member_triggers_a_rebalance_both_get_the_same_generation() -> None:
    h = Harness()
    (a,), gen = h.stable_group(1)
    b_pending = h.new_member()
    assert isinstance(b_pending, Pending)
    assert state(h) is GroupState.PREPARING_REBALANCE
    assert h.heartbeat(hb_req("g", gen, a)).error_code == REBALANCE_IN_PROGRESS
    a_join = h.join(join_req(member_id=a))       # the last one in completes everyone
    b_join = h.answer(b_pending)
    assert a_join.generation_id == b_join.generation_id == gen + 1
    assert a_join.leader == b_join.leader == a
    assert sorted(m.member_id for m in a_join.members) == sorted([a, b_join.member_id])
    assert b_join.members == []                  # followers do not see the member list
    b = b_join.member_id

    assert h.heartbeat(hb_req("g", gen + 1, b)).error_code == NONE   # CompletingRebalance
    b_sync = h.sync(sync_req("g", gen + 1, b))
    assert h.parked(b_sync)
    a_sync = h.sync(sync_req("g", gen + 1, a, {a: b"A", b: b"B"}))
    assert a_sync.assignment == b"A"
    assert h.answer(b_sync).assignment == b"B"
    assert state(h) is GroupState.STABLE
    late = h.sync(sync_req("g", gen + 1, b))     # Stable: answered from memory
    assert late.assignment == b"B"


def test_sync_errors() -> None:
    h = Harness()
    (a, b), gen = h.stable_group(2)
    assert h.sync(sync_req("g", gen - 1, a)).error_code == ILLEGAL_GENERATION
    assert h.sync(sync_req("g", gen, "ghost")).error_code == UNKNOWN_MEMBER_ID
    assert h.sync(sync_req("nogroup", gen, a)).error_code == UNKNOWN_MEMBER_ID
    assert h.sync(sync_req("", gen, a)).error_code == INVALID_GROUP_ID
    wrong = sync_req("g", gen, a)
    wrong.protocol_name = "roundrobin"
    assert h.sync(wrong, version=5).error_code == INCONSISTENT_GROUP_PROTOCOL
    h.join(join_req(member_id=a))                # leader rejoins: PreparingRebalance
    assert h.sync(sync_req("g", gen, b)).error_code == REBALANCE_IN_PROGRESS


def test_a_rejoin_during_completing_rebalance_sends_followers_back() -> None:
    h = Harness()
    (a, b), _gen = h.stable_group(2)
    h.join(join_req(member_id=a))
    b_join = h.join(join_req(member_id=b))
    h.answers.clear()
    gen2 = b_join.generation_id
    parked = h.sync(sync_req("g", gen2, b))
    changed = h.join(join_req(member_id=b, protocols=(("range", b"new"),)))
    assert h.answer(parked).error_code == REBALANCE_IN_PROGRESS
    assert isinstance(changed, Pending) and state(h) is GroupState.PREPARING_REBALANCE


def test_same_join_resent_in_completing_rebalance_repeats_the_answer() -> None:
    h = Harness()
    (a, b), _gen = h.stable_group(2)
    h.join(join_req(member_id=a))
    b_join = h.join(join_req(member_id=b))
    again = h.join(join_req(member_id=b))
    assert (again.generation_id, again.leader, again.members) == (
        b_join.generation_id, b_join.leader, [])
    assert state(h) is GroupState.COMPLETING_REBALANCE


def test_protocol_is_chosen_by_votes_among_protocols_all_members_support() -> None:
    h = Harness(GroupConfig(min_session_timeout_ms=10, initial_rebalance_delay_ms=1000))
    prefs = [(("range", b"r"), ("roundrobin", b"rr")),
             (("roundrobin", b"rr"), ("range", b"r")),
             (("roundrobin", b"rr"), ("sticky", b"s"), ("range", b"r"))]
    pending = [h.join(join_req(protocols=p), version=3) for p in prefs]
    h.advance(1000)             # others came during the initial delay: one more delay
    assert all(h.parked(p) for p in pending)
    h.advance(1000)
    answers = [h.answer(p) for p in pending]
    assert {a.protocol_name for a in answers} == {"roundrobin"}
    leader = next(a for a in answers if a.members)
    assert {m.metadata for m in leader.members} == {b"rr"}


# ---------------------------------------------------------------------- timers
def test_initial_rebalance_delay_collects_a_starting_fleet_into_one_generation() -> None:
    h = Harness(GroupConfig(min_session_timeout_ms=10, initial_rebalance_delay_ms=3000))
    a = h.join(join_req(rebalance=10_000), version=3)
    h.advance(1000)
    b = h.join(join_req(rebalance=10_000), version=3)
    h.advance(1999)
    assert h.parked(a) and h.parked(b)
    h.advance(1)                    # t=3000: a new member came, so wait another delay
    assert h.parked(a) and h.parked(b)
    h.advance(3000)                 # t=6000: nobody new: complete
    ja, jb = h.answer(a), h.answer(b)
    assert ja.generation_id == jb.generation_id == 1


def test_initial_rebalance_delay_is_capped_by_the_rebalance_timeout() -> None:
    h = Harness(GroupConfig(min_session_timeout_ms=10, initial_rebalance_delay_ms=3000))
    first = h.join(join_req(rebalance=5000), version=3)
    for _ in range(4):
        h.advance(1500)
        h.join(join_req(rebalance=5000), version=3)
    # 3000 ms + at most (5000 - 3000) ms of extensions
    h.advance(2000)
    assert h.answer(first).generation_id == 1
    assert len(h.coord.group("g").members) == 5  # type: ignore[union-attr]


def test_session_expiry_removes_the_member_and_triggers_a_rebalance() -> None:
    h = Harness()
    (a, b), gen = h.stable_group(2)
    h.advance(SESSION - 1)
    assert h.heartbeat(hb_req("g", gen, a)).error_code == NONE
    h.advance(1)                                  # b's session ends now
    assert not h.coord.group("g").has(b)          # type: ignore[union-attr]
    assert state(h) is GroupState.PREPARING_REBALANCE
    assert h.heartbeat(hb_req("g", gen, a)).error_code == REBALANCE_IN_PROGRESS
    assert h.heartbeat(hb_req("g", gen, b)).error_code == UNKNOWN_MEMBER_ID
    again = h.join(join_req(member_id=a))
    assert again.generation_id == gen + 1 and [m.member_id for m in again.members] == [a]


def test_rebalance_timeout_removes_members_that_do_not_rejoin() -> None:
    h = Harness()
    (a, b), gen = h.stable_group(2)
    a_join = h.join(join_req(member_id=a))       # the leader rejoins: rebalance
    h.advance(REBALANCE // 2)
    h.heartbeat(hb_req("g", gen, b))             # alive, but does not rejoin
    h.advance(REBALANCE // 2)
    got = h.answer(a_join)
    assert got.generation_id == gen + 1 and [m.member_id for m in got.members] == [a]
    assert h.heartbeat(hb_req("g", gen, b)).error_code == UNKNOWN_MEMBER_ID


def test_members_that_never_sync_are_removed_after_the_rebalance_timeout() -> None:
    h = Harness()
    (a, b), gen = h.stable_group(2)
    h.join(join_req(member_id=a))
    h.join(join_req(member_id=b))
    parked = h.sync(sync_req("g", gen + 1, b))   # the leader never sends its SyncGroup
    for _ in range(3):
        h.advance(REBALANCE // 4)
        assert h.heartbeat(hb_req("g", gen + 1, a)).error_code == NONE
    h.advance(REBALANCE // 4)
    assert h.answer(parked).error_code == REBALANCE_IN_PROGRESS
    assert not h.coord.group("g").has(a)          # type: ignore[union-attr]
    assert state(h) is GroupState.PREPARING_REBALANCE


def test_pending_member_id_expires() -> None:
    h = Harness()
    first = h.join(join_req(session=1000), version=4)
    h.advance(1000)
    late = h.join(join_req(member_id=first.member_id, session=1000), version=4)
    assert late.error_code == UNKNOWN_MEMBER_ID


def test_heartbeat_errors() -> None:
    h = Harness()
    (a,), gen = h.stable_group(1)
    assert h.heartbeat(hb_req("g", gen, "ghost")).error_code == UNKNOWN_MEMBER_ID
    assert h.heartbeat(hb_req("g", gen + 1, a)).error_code == ILLEGAL_GENERATION
    assert h.heartbeat(hb_req("other", gen, a)).error_code == UNKNOWN_MEMBER_ID
    assert h.heartbeat(hb_req("", gen, a)).error_code == INVALID_GROUP_ID


# ---------------------------------------------------------------------- leaving
def test_leave_v0_and_the_last_member_leaving_empties_the_group() -> None:
    h = Harness()
    (a,), gen = h.stable_group(1)
    assert h.leave(leave_req("g", ("ghost", None)), version=0).error_code == UNKNOWN_MEMBER_ID
    assert h.leave(leave_req("g", (a, None)), version=0).error_code == NONE
    g = h.coord.group("g")
    assert g is not None and g.state is GroupState.EMPTY and g.generation_id == gen + 1
    h.restart()                                   # the Empty state was persisted
    g = h.coord.group("g")
    assert g is not None and g.state is GroupState.EMPTY and g.generation_id == gen + 1


def test_leave_v3_reports_per_member_errors_and_rebalances() -> None:
    h = Harness()
    (a, b, c), _gen = h.stable_group(3)
    got = h.leave(leave_req("g", (b, None), ("ghost", None), (c, "not-static")), version=3)
    assert got.error_code == NONE
    assert [(m.member_id, m.error_code) for m in got.members] == [
        (b, NONE), ("ghost", UNKNOWN_MEMBER_ID), (c, UNKNOWN_MEMBER_ID)]
    assert state(h) is GroupState.PREPARING_REBALANCE
    assert h.leave(leave_req("nogroup", (a, None)), version=3).members[0].error_code == (
        UNKNOWN_MEMBER_ID)


def test_leaving_while_others_rejoin_completes_the_rebalance() -> None:
    h = Harness()
    (a, b), gen = h.stable_group(2)
    a_join = h.join(join_req(member_id=a))
    h.leave(leave_req("g", (b, None)))
    assert h.answer(a_join).generation_id == gen + 1


# ---------------------------------------------------------------------- static members
def test_static_member_rejoining_a_stable_group_takes_over_without_rebalance() -> None:
    h = Harness()
    a = h.join(join_req(instance_id="i-a"))
    h.sync(sync_req("g", 1, a.member_id, {a.member_id: b"A"}, instance_id="i-a"))
    log_size = len(h.log[0])
    again = h.join(join_req(instance_id="i-a"), version=5)   # restarted, id forgotten
    assert again.error_code == NONE and again.member_id != a.member_id
    assert again.generation_id == 1 and again.leader == a.member_id   # old leader id < v9
    assert again.members == [] and state(h) is GroupState.STABLE
    assert len(h.log[0]) == log_size + 1         # the new member id was persisted
    assert h.heartbeat(hb_req("g", 1, a.member_id, "i-a")).error_code == FENCED_INSTANCE_ID
    assert h.heartbeat(hb_req("g", 1, again.member_id, "i-a")).error_code == NONE
    assert h.sync(sync_req("g", 1, again.member_id, instance_id="i-a")).assignment == b"A"
    v9 = h.join(join_req(instance_id="i-a"), version=9)
    assert v9.skip_assignment and v9.leader == v9.member_id and len(v9.members) == 1
    h.restart()
    assert h.coord.group("g").static_members == {"i-a": v9.member_id}  # type: ignore[union-attr]


def test_replaced_static_member_parked_join_is_fenced() -> None:
    h = Harness()
    a = h.join(join_req(instance_id="i-a"))
    c_pending = h.new_member()
    h.join(join_req(member_id=a.member_id, instance_id="i-a"))
    c = h.answer(c_pending)
    h.sync(sync_req("g", 2, a.member_id, {a.member_id: b"A", c.member_id: b"C"}))
    h.sync(sync_req("g", 2, c.member_id))
    parked_old = h.join(join_req(member_id=a.member_id, instance_id="i-a"))  # rebalance
    assert h.parked(parked_old)
    a2 = h.join(join_req(instance_id="i-a"))     # the instance restarted: new member id
    assert h.answer(parked_old).error_code == FENCED_INSTANCE_ID
    assert h.parked(a2)
    c_again = h.join(join_req(member_id=c.member_id))
    a2_join = h.answer(a2)
    assert a2_join.generation_id == c_again.generation_id == 3
    assert a2_join.member_id != a.member_id
    assert sorted(m.member_id for m in a2_join.members) == sorted([a2_join.member_id,
                                                                    c.member_id])


def test_static_members_keep_their_seat_across_the_rebalance_timeout() -> None:
    h = Harness()
    a = h.join(join_req(instance_id="i-a", session=60_000))
    h.sync(sync_req("g", 1, a.member_id, {a.member_id: b"A"}))
    b = h.join(join_req(instance_id="i-b", session=60_000))
    h.advance(REBALANCE)                          # a never rejoins, but is static
    got = h.answer(b)
    assert got.generation_id == 2
    assert h.coord.group("g").has(a.member_id)    # type: ignore[union-attr]
    h.advance(60_000)                             # its session does end it
    assert not h.coord.group("g").has(a.member_id)  # type: ignore[union-attr]


def test_leave_by_instance_id() -> None:
    h = Harness()
    h.join(join_req(instance_id="i-a"))
    got = h.leave(leave_req("g", ("", "i-a"), ("", "i-zz")), version=3)
    assert [m.error_code for m in got.members] == [NONE, UNKNOWN_MEMBER_ID]


# ---------------------------------------------------------------------- invariants
def settle(h: Harness, outstanding: list[Any]) -> list[Any]:
    """Play the clients until the join phase completes: whoever is not parked rejoins."""
    latest = {}
    for _ in range(20):
        still = []
        for x in outstanding:
            if h.parked(x):
                still.append(x)
                continue
            a = h.answer(x) if isinstance(x, Pending) else x
            latest[a.member_id] = a
        outstanding = still
        g = h.coord.group("g")
        assert g is not None
        if g.state is not GroupState.PREPARING_REBALANCE and not outstanding:
            return [latest[m] for m in g.members]
        outstanding += [h.join(join_req(member_id=m.member_id))
                        for m in g.members.values() if not m.awaiting_join]
    raise AssertionError("the rebalance did not settle")


@pytest.mark.parametrize("seed", range(8))
def test_each_member_gets_exactly_what_the_leader_assigned(seed: int) -> None:
    """Random joins, leaves and silent members; after each completed rebalance every live
    member of the generation holds exactly the leader's share for it, the shares are
    disjoint, and generations only increase."""
    rng = random.Random(seed)
    h = Harness()
    partitions = [f"t-{i}".encode() for i in range(12)]
    members: list[str] = []
    last_generation = 0
    for _round in range(12):
        op = rng.choice(["join", "leave", "expire"]) if members else "join"
        if op == "leave":
            h.leave(leave_req("g", (members.pop(rng.randrange(len(members))), None)))
        elif op == "expire":
            quiet = members.pop(rng.randrange(len(members)))
            h.advance(SESSION // 2)
            for m in members:
                h.heartbeat(hb_req("g", last_generation, m))
            h.advance(SESSION // 2)
            assert not h.coord.group("g").has(quiet)  # type: ignore[union-attr]
        joining: list[Any] = [h.new_member() for _ in range(rng.randint(
            1 if op == "join" else 0, 3))]
        answers = settle(h, joining)
        if not answers:
            assert state(h) is GroupState.EMPTY
            members = []
            continue
        generations = {a.generation_id for a in answers}
        assert len(generations) == 1 and generations.pop() > last_generation
        last_generation = answers[0].generation_id
        members = [a.member_id for a in answers]
        leader = [a for a in answers if a.members]
        assert len(leader) == 1 and sorted(m.member_id for m in leader[0].members) == sorted(
            members)
        shares = {m: b",".join(partitions[i::len(members)]) for i, m in enumerate(members)}
        syncs = {m: h.sync(sync_req("g", last_generation, m,
                                    shares if m == leader[0].member_id else None))
                 for m in members}
        got = {m: (h.answer(s) if isinstance(s, Pending) else s).assignment
               for m, s in syncs.items()}
        assert got == shares
        owned = [p for share in got.values() for p in share.split(b",") if p]
        assert len(owned) == len(set(owned)) == len(partitions)
        assert state(h) is GroupState.STABLE


def test_unloading_answers_parked_requests_not_coordinator() -> None:
    h = Harness()
    (a, _b), _gen = h.stable_group(2)
    parked = h.join(join_req(member_id=a))
    h.coord.unload(0)
    h.collect()
    assert h.answer(parked).error_code == NOT_COORDINATOR
    assert h.coord.group("g") is None


def test_next_deadline() -> None:
    h = Harness()
    (_a,), _gen = h.stable_group(1)
    assert h.coord.next_deadline_ms() == h.now + SESSION


def test_config_defaults_follow_kafka() -> None:
    assert (GroupConfig().min_session_timeout_ms, GroupConfig().max_session_timeout_ms,
            GroupConfig().initial_rebalance_delay_ms) == (6000, 1_800_000, 3000)
    assert CONFIG.initial_rebalance_delay_ms == 0


def test_a_sole_member_may_switch_protocols_but_not_protocol_type() -> None:
    h = Harness()
    (a,), gen = h.stable_group(1)
    assert h.join(join_req(member_id=a, protocol_type="connect")).error_code == (
        INCONSISTENT_GROUP_PROTOCOL)
    switched = h.join(join_req(member_id=a, protocols=(("roundrobin", b"x"),)))
    assert switched.generation_id == gen + 1 and switched.protocol_name == "roundrobin"


def test_static_member_rejoining_with_other_protocols_causes_a_rebalance() -> None:
    h = Harness()
    a = h.join(join_req(instance_id="i-a", protocols=(("range", b""), ("roundrobin", b""))))
    h.sync(sync_req("g", 1, a.member_id, {a.member_id: b"A"}))
    again = h.join(join_req(instance_id="i-a", protocols=(("roundrobin", b""),)))
    assert again.generation_id == 2 and again.protocol_name == "roundrobin"
    assert again.member_id != a.member_id
