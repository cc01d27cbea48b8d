"""Offsets, DescribeGroups/ListGroups/DeleteGroups, and rebuilding state on restart."""

from __future__ import annotations

import pytest

from millrace.broker.group import GroupConfig
from millrace.broker.group.group_metadata import GroupState
from millrace.protocol import OffsetFetchRequest
from tests.unit.broker.group.groupgen import (
    SESSION,
    Harness,
    commit_req,
    fetch_req,
    fetched,
    hb_req,
    join_req,
    leave_req,
    sync_req,
)

NONE, UNKNOWN_TOPIC_OR_PARTITION, OFFSET_METADATA_TOO_LARGE, NOT_COORDINATOR = 0, 3, 12, 16
ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS = 22, 25, 27
NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, FENCED_INSTANCE_ID = 68, 69, 82


def errors(response: object) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code
            for t in response.topics for p in t.partitions}  # type: ignore[attr-defined]


# ---------------------------------------------------------------------- commit / fetch
def test_simple_consumer_commits_without_a_group_and_fetches_back() -> None:
    h = Harness()
    got = h.commit(commit_req("solo", {("t", 0): 42, ("t", 1): 7, ("u", 0): 1},
                              metadata="hello"))
    assert set(errors(got).values()) == {NONE}
    g = h.coord.group("solo")
    assert g is not None and g.state is GroupState.EMPTY and g.protocol_type is None
    offsets = fetched(h.fetch(fetch_req("solo", {"t": [0, 1, 2]})))
    assert offsets == {("t", 0): (42, 3, "hello"), ("t", 1): (7, 3, "hello"),
                       ("t", 2): (-1, -1, "")}
    everything = fetched(h.fetch(fetch_req("solo", None)))     # topics null = all (v2+)
    assert set(everything) == {("t", 0), ("t", 1), ("u", 0)}
    assert fetched(h.fetch(fetch_req("nobody", {"t": [0]}))) == {("t", 0): (-1, -1, "")}
    listed = h.list_groups()
    assert [(g.group_id, g.protocol_type, g.group_state) for g in listed.groups] == [
        ("solo", "", "Empty")]


@pytest.mark.parametrize("version", [1, 2, 5, 7])
def test_fetch_versions_v0_to_v7(version: int) -> None:
    h = Harness()
    h.commit(commit_req("g", {("t", 0): 5}))
    got = h.fetch(fetch_req("g", {"t": [0]}), version=version)
    assert fetched(got)[("t", 0)][0] == 5


def test_fetch_v8_batches_groups() -> None:
    h = Harness(partitions=3)
    h.commit(commit_req("a", {("t", 0): 1}))
    h.commit(commit_req("b", {("t", 0): 2, ("t", 1): 3}))
    req = OffsetFetchRequest(groups=[
        OffsetFetchRequest.OffsetFetchRequestGroup(group_id="a", topics=[
            OffsetFetchRequest.OffsetFetchRequestGroup.OffsetFetchRequestTopics(
                name="t", partition_indexes=[0])]),
        OffsetFetchRequest.OffsetFetchRequestGroup(group_id="b", topics=None)])
    got = h.fetch(req, version=8)
    assert [(g.group_id, g.error_code, [(t.name, [(p.partition_index, p.committed_offset)
                                                   for p in t.partitions]) for t in g.topics])
            for g in got.groups] == [("a", NONE, [("t", [(0, 1)])]),
                                     ("b", NONE, [("t", [(0, 2), (1, 3)])])]


def test_fetch_from_a_partition_not_hosted() -> None:
    h = Harness(partitions=2)
    h.coord.unload(h.coord.partition_for("g"))
    assert h.fetch(fetch_req("g", {"t": [0]}), version=5).error_code == NOT_COORDINATOR
    v1 = h.fetch(fetch_req("g", {"t": [0]}), version=1)
    assert v1.topics[0].partitions[0].error_code == NOT_COORDINATOR


def test_member_commits_are_checked_against_the_generation() -> None:
    h = Harness()
    (a, b), gen = h.stable_group(2)
    assert set(errors(h.commit(commit_req("g", {("t", 0): 1}, gen, a))).values()) == {NONE}
    stale = h.commit(commit_req("g", {("t", 0): 2}, gen - 1, a))
    assert set(errors(stale).values()) == {ILLEGAL_GENERATION}
    ghost = h.commit(commit_req("g", {("t", 0): 2}, gen, "ghost"))
    assert set(errors(ghost).values()) == {UNKNOWN_MEMBER_ID}
    simple = h.commit(commit_req("g", {("t", 0): 2}))     # not a member of a live group
    assert set(errors(simple).values()) == {UNKNOWN_MEMBER_ID}
    fenced = h.commit(commit_req("g", {("t", 0): 2}, gen, a, instance_id="i-x"))
    assert set(errors(fenced).values()) == {UNKNOWN_MEMBER_ID}
    assert fetched(h.fetch(fetch_req("g", {"t": [0]})))[("t", 0)][0] == 1

    h.join(join_req(member_id=a))                           # PreparingRebalance: allowed
    assert set(errors(h.commit(commit_req("g", {("t", 0): 3}, gen, b))).values()) == {NONE}
    b_join = h.join(join_req(member_id=b))                  # CompletingRebalance: not
    during = h.commit(commit_req("g", {("t", 0): 4}, b_join.generation_id, b))
    assert set(errors(during).values()) == {REBALANCE_IN_PROGRESS}


def test_commit_with_a_generation_to_an_unknown_group_is_illegal() -> None:
    h = Harness()
    got = h.commit(commit_req("nogroup", {("t", 0): 1}, 3, "m"))
    assert set(errors(got).values()) == {ILLEGAL_GENERATION}
    assert h.coord.group("nogroup") is None


def test_a_commit_counts_as_a_heartbeat() -> None:
    h = Harness()
    (a,), gen = h.stable_group(1)
    h.advance(SESSION - 1)
    h.commit(commit_req("g", {("t", 0): 1}, gen, a))
    h.advance(SESSION - 1)
    assert h.heartbeat(hb_req("g", gen, a)).error_code == NONE


def test_commit_static_member_fenced() -> None:
    h = Harness()
    a = h.join(join_req(instance_id="i-a"))
    h.sync(sync_req("g", 1, a.member_id, {a.member_id: b""}))
    h.join(join_req(instance_id="i-a"))                     # replaced
    got = h.commit(commit_req("g", {("t", 0): 1}, 1, a.member_id, instance_id="i-a"))
    assert set(errors(got).values()) == {FENCED_INSTANCE_ID}


def test_commit_per_partition_errors() -> None:
    h = Harness()
    got = h.commit(commit_req("g", {("t", 0): 1, ("t", 1): 2, ("gone", 0): 3},
                              metadata="x" * 5000), unknown=frozenset({("gone", 0)}))
    assert errors(got) == {("t", 0): OFFSET_METADATA_TOO_LARGE,
                           ("t", 1): OFFSET_METADATA_TOO_LARGE,
                           ("gone", 0): UNKNOWN_TOPIC_OR_PARTITION}
    assert h.log[0] == []


def test_failed_write_turns_the_commit_into_an_error() -> None:
    h = Harness()
    result = h.coord.commit_offsets(commit_req("g", {("t", 0): 1}), 7, h.now, frozenset())
    assert result.records and result.on_failure is not None
    answer = result.on_failure(15)                           # nothing was replayed
    assert set(errors(answer).values()) == {15}
    assert h.coord.group("g") is None


def test_failed_write_of_the_assignment_sends_the_group_back_to_rebalance() -> None:
    h = Harness()
    (a, b), gen = h.stable_group(2)
    h.join(join_req(member_id=a))
    h.join(join_req(member_id=b))
    h.answers.clear()
    parked = h.sync(sync_req("g", gen + 1, b))
    result = h.coord.sync_group(sync_req("g", gen + 1, a, {a: b"A", b: b"B"}), 3, h.now)
    assert result.on_failure is not None and result.on_failure(15) is None
    h.versions[result.waiter or 0] = 3
    h.collect()
    assert h.answer(parked).error_code == 15
    assert h.answers.pop(result.waiter or 0).error_code == 15
    g = h.coord.group("g")
    assert g is not None and g.state is GroupState.PREPARING_REBALANCE


def test_commit_with_retention_expires_on_its_own_timestamp() -> None:
    h = Harness(GroupConfig(min_session_timeout_ms=10, initial_rebalance_delay_ms=0,
                            offsets_retention_check_interval_ms=1000))
    h.commit(commit_req("g", {("t", 0): 1}, retention_ms=5000), version=2)
    h.commit(commit_req("g", {("t", 1): 1}), version=7)
    h.restart()                         # expire timestamps survive: v1 value on disk
    h.advance(5000)
    assert fetched(h.fetch(fetch_req("g", None))) == {("t", 1): (1, 3, "")}


def test_offsets_of_an_empty_group_expire_and_the_group_goes_away() -> None:
    h = Harness(GroupConfig(min_session_timeout_ms=10, initial_rebalance_delay_ms=0,
                            offsets_retention_ms=60_000,
                            offsets_retention_check_interval_ms=10_000))
    (a,), gen = h.stable_group(1)
    h.commit(commit_req("g", {("t", 0): 9}, gen, a))
    h.advance(50_000)                   # Stable: its offsets are kept however old
    h.heartbeat(hb_req("g", gen, a))
    h.leave(leave_req("g", (a, None)))  # Empty from now on
    h.advance(50_000)
    assert fetched(h.fetch(fetch_req("g", None))) == {("t", 0): (9, 3, "")}
    h.advance(10_000)
    assert h.coord.group("g") is None
    h.restart()
    assert h.coord.group("g") is None


# ---------------------------------------------------------------------- admin
def test_describe_groups() -> None:
    h = Harness()
    (a, b), _gen = h.stable_group(2)
    got = h.describe("g", "nobody").groups
    assert (got[0].group_state, got[0].protocol_type, got[0].protocol_data) == (
        "Stable", "consumer", "range")
    assert {(m.member_id, m.client_id, m.client_host, m.member_metadata, m.member_assignment)
            for m in got[0].members} == {(a, "client", "/10.0.0.1", b"sub", b"a0"),
                                         (b, "client", "/10.0.0.1", b"sub", b"a1")}
    assert (got[1].error_code, got[1].group_state) == (NONE, "Dead")
    assert h.describe("nobody", version=6).groups[0].error_code == GROUP_ID_NOT_FOUND
    h.join(join_req(member_id=a))
    during = h.describe("g").groups[0]
    assert during.group_state == "PreparingRebalance" and during.protocol_data == ""
    assert {m.member_assignment for m in during.members} == {b""}


def test_list_groups_filters_by_state_and_type() -> None:
    h = Harness(partitions=4)
    h.stable_group(1, group="busy")
    h.commit(commit_req("idle", {("t", 0): 1}))
    names = lambda r: sorted(g.group_id for g in r.groups)  # noqa: E731
    assert names(h.list_groups()) == ["busy", "idle"]
    assert names(h.list_groups(["stable"])) == ["busy"]
    assert names(h.list_groups(["Empty", "Dead"])) == ["idle"]
    assert [g.group_type for g in h.list_groups(version=5).groups] == ["classic", "classic"]
    from millrace.protocol import ListGroupsRequest
    consumer_only = h.coord.list_groups(ListGroupsRequest(types_filter=["consumer"]), 5, h.now)
    assert consumer_only.response.groups == []


def test_delete_groups() -> None:
    h = Harness(partitions=3)
    h.stable_group(1, group="busy")
    h.commit(commit_req("idle", {("t", 0): 1, ("t", 1): 2}))
    got = h.delete("busy", "idle", "nobody")
    assert [(r.group_id, r.error_code) for r in got.results] == [
        ("busy", NON_EMPTY_GROUP), ("idle", NONE), ("nobody", GROUP_ID_NOT_FOUND)]
    assert h.coord.group("idle") is None
    assert fetched(h.fetch(fetch_req("idle", None))) == {}
    h.restart()
    assert h.coord.group("idle") is None and h.coord.group("busy") is not None


# ---------------------------------------------------------------------- restart
def test_restart_rebuilds_offsets_and_group_metadata_from_the_log() -> None:
    h = Harness(partitions=5)
    (a, b), gen = h.stable_group(2, assign={0: b"A", 1: b"B"})
    h.commit(commit_req("g", {("t", 0): 10, ("t", 1): 11}, gen, a, metadata="m"))
    h.commit(commit_req("solo", {("x", 3): 99}))
    s = h.join(join_req(instance_id="i-s", group="static"))
    h.sync(sync_req("static", 1, s.member_id, {s.member_id: b"S"}))
    before = {gid: (g.state, g.generation_id, g.protocol_type, g.protocol_name, g.leader_id,
                    [(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                      m.session_timeout_ms, m.rebalance_timeout_ms, m.metadata(g.protocol_name),
                      m.assignment) for m in g.members.values()], dict(g.offsets))
              for gid, g in h.coord.groups.items()}

    h.restart()
    after = {gid: (g.state, g.generation_id, g.protocol_type, g.protocol_name, g.leader_id,
                   [(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                     m.session_timeout_ms, m.rebalance_timeout_ms, m.metadata(g.protocol_name),
                     m.assignment) for m in g.members.values()], dict(g.offsets))
             for gid, g in h.coord.groups.items()}
    assert after == before
    assert before["g"][0] is GroupState.STABLE and before["g"][1] == gen
    # The members carry on where they were.
    assert h.heartbeat(hb_req("g", gen, b)).error_code == NONE
    assert h.sync(sync_req("g", gen, b)).assignment == b"B"
    assert h.heartbeat(hb_req("static", 1, s.member_id, "i-s")).error_code == NONE
    # ... and a member that stays silent after the restart is still timed out.
    h.advance(SESSION)
    assert not h.coord.group("g").has(a)  # type: ignore[union-attr]
