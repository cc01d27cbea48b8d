"""Offsets committed inside transactions (TxnOffsetCommit, KIP-98 / KIP-447) in the pure
coordinator: pending until the marker, commit and abort, fencing by group metadata,
replay with and without markers, require_stable, expiry and deletion."""

from __future__ import annotations

from typing import Any

import pytest

from millrace.broker.group import GroupConfig
from millrace.broker.group.group_metadata import GroupState
from millrace.broker.group.records import GroupKey, OffsetAndMetadata, OffsetKey, decode_key
from millrace.protocol import OffsetFetchRequest
from tests.unit.broker.group.groupgen import (
    Harness,
    commit_req,
    fetch_req,
    fetched,
    join_req,
    sync_req,
    txn_commit_req,
)

NONE, UNKNOWN_TOPIC_OR_PARTITION, OFFSET_METADATA_TOO_LARGE, NOT_COORDINATOR = 0, 3, 12, 16
ILLEGAL_GENERATION, INVALID_GROUP_ID, UNKNOWN_MEMBER_ID = 22, 24, 25
INVALID_PRODUCER_EPOCH, INVALID_PRODUCER_ID_MAPPING = 47, 49
FENCED_INSTANCE_ID, UNSTABLE_OFFSET_COMMIT = 82, 88
PID, OTHER_PID = 1000, 2000


def errors(response: Any) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code
            for t in response.topics for p in t.partitions}


def stable_fetch(h: Harness, group: str, topics: dict[str, list[int]] | None,
                 version: int = 7) -> dict[tuple[str, int], tuple[int, int]]:
    """{(topic, partition): (offset, error)} of an OffsetFetch with require_stable."""
    req = fetch_req(group, topics)
    req.require_stable = True
    got = h.fetch(req, version=version)
    return {(t.name, p.partition_index): (p.committed_offset, p.error_code)
            for t in got.topics for p in t.partitions}


def offsets_of(h: Harness, group: str, *tps: tuple[str, int]) -> list[int]:
    topics: dict[str, list[int]] = {}
    for topic, partition in tps:
        topics.setdefault(topic, []).append(partition)
    got = fetched(h.fetch(fetch_req(group, topics)))
    return [got[tp][0] for tp in tps]


# ---------------------------------------------------------------------- pending, commit, abort
def test_transactional_offsets_are_pending_until_the_commit_marker() -> None:
    h = Harness()
    h.commit(commit_req("g", {("t", 0): 5}))
    got = h.txn_commit(txn_commit_req("g", {("t", 0): 10, ("t", 1): 11}, PID))
    assert errors(got) == {("t", 0): NONE, ("t", 1): NONE}
    assert h.batches[0][-1].producer_id == PID           # written as the producer's batch
    assert offsets_of(h, "g", ("t", 0), ("t", 1)) == [5, -1]    # the last committed ones
    assert stable_fetch(h, "g", {"t": [0, 1, 2]}) == {
        ("t", 0): (-1, UNSTABLE_OFFSET_COMMIT), ("t", 1): (-1, UNSTABLE_OFFSET_COMMIT),
        ("t", 2): (-1, NONE)}
    assert h.marker(0, PID, committed=True) == 1
    assert offsets_of(h, "g", ("t", 0), ("t", 1)) == [10, 11]
    assert stable_fetch(h, "g", {"t": [0, 1]}) == {("t", 0): (10, NONE), ("t", 1): (11, NONE)}
    g = h.coord.group("g")
    assert g is not None and g.pending_txn_offsets == {}
    assert h.marker(0, PID, committed=True) == 0          # a second marker: nothing left


def test_the_abort_marker_drops_pending_offsets_and_keeps_the_committed_ones() -> None:
    h = Harness()
    h.commit(commit_req("g", {("t", 0): 5}))
    h.txn_commit(txn_commit_req("g", {("t", 0): 10, ("t", 1): 11}, PID))
    assert h.marker(0, PID, committed=False) == 1
    assert offsets_of(h, "g", ("t", 0), ("t", 1)) == [5, -1]
    assert stable_fetch(h, "g", {"t": [0, 1]}) == {("t", 0): (5, NONE), ("t", 1): (-1, NONE)}


def test_markers_of_other_producers_and_other_partitions_change_nothing() -> None:
    h = Harness(partitions=4)
    home = h.coord.partition_for("g")
    elsewhere = (home + 1) % 4
    h.txn_commit(txn_commit_req("g", {("t", 0): 10}, PID))
    h.txn_commit(txn_commit_req("g", {("t", 1): 20}, OTHER_PID))
    assert h.marker(home, 999, committed=True) == 0       # unknown producer
    assert h.marker(elsewhere, PID, committed=True) == 0  # not this group's partition
    assert offsets_of(h, "g", ("t", 0), ("t", 1)) == [-1, -1]
    assert h.marker(home, OTHER_PID, committed=True) == 1
    assert offsets_of(h, "g", ("t", 0), ("t", 1)) == [-1, 20]
    assert stable_fetch(h, "g", {"t": [0, 1]}) == {
        ("t", 0): (-1, UNSTABLE_OFFSET_COMMIT), ("t", 1): (20, NONE)}
    assert h.marker(home, PID, committed=True) == 1
    assert offsets_of(h, "g", ("t", 0), ("t", 1)) == [10, 20]


def test_a_later_plain_commit_is_not_replaced_by_an_earlier_transaction() -> None:
    # Kafka compares where the writes sit in the log: the transaction's record (position
    # 1) is older than the plain commit (position 2), so committing it changes nothing.
    h = Harness()
    h.txn_commit(txn_commit_req("g", {("t", 0): 10, ("t", 1): 11}, PID))
    h.commit(commit_req("g", {("t", 0): 50}))
    h.marker(0, PID, committed=True)
    assert offsets_of(h, "g", ("t", 0), ("t", 1)) == [50, 11]
    h.restart()                                            # the log says the same
    assert offsets_of(h, "g", ("t", 0), ("t", 1)) == [50, 11]


def test_a_plain_commit_replayed_late_does_not_undo_a_later_committed_transaction() -> None:
    h = Harness()
    h.txn_commit(txn_commit_req("g", {("t", 0): 10}, PID))
    h.marker(0, PID, committed=True)
    # A plain commit written before the transaction (position 0) whose replay comes
    # late (the service replays plain commits once the ISR has them).
    late = h.coord.offset_record("g", "t", 0, OffsetAndMetadata(5))
    assert late.value is not None
    h.coord.replay(late.key, late.value, offset=0)
    assert offsets_of(h, "g", ("t", 0)) == [10]
    h.coord.replay(late.key, late.value, offset=9)        # one written after it wins
    assert offsets_of(h, "g", ("t", 0)) == [5]


def test_fetch_all_topics_and_v8_with_require_stable() -> None:
    h = Harness()
    h.commit(commit_req("g", {("t", 0): 5, ("u", 0): 6}))
    h.txn_commit(txn_commit_req("g", {("t", 0): 10, ("v", 0): 1}, PID))
    # topics null: the committed partitions; the one a transaction holds is unstable
    assert stable_fetch(h, "g", None) == {("t", 0): (-1, UNSTABLE_OFFSET_COMMIT),
                                          ("u", 0): (6, NONE)}
    req = OffsetFetchRequest(require_stable=True, groups=[
        OffsetFetchRequest.OffsetFetchRequestGroup(group_id="g", topics=[
            OffsetFetchRequest.OffsetFetchRequestGroup.OffsetFetchRequestTopics(
                name="t", partition_indexes=[0])])])
    got = h.fetch(req, version=8).groups[0].topics[0].partitions[0]
    assert (got.committed_offset, got.error_code) == (-1, UNSTABLE_OFFSET_COMMIT)
    req.require_stable = False
    got = h.fetch(req, version=8).groups[0].topics[0].partitions[0]
    assert (got.committed_offset, got.error_code) == (5, NONE)


# ---------------------------------------------------------------------- validation, KIP-447
def test_a_group_that_does_not_exist_is_created_empty() -> None:
    h = Harness()
    got = h.txn_commit(txn_commit_req("fresh", {("t", 0): 3}, PID), version=0)
    assert errors(got) == {("t", 0): NONE}
    g = h.coord.group("fresh")
    assert g is not None and g.state is GroupState.EMPTY and g.generation_id == 0
    # With group metadata naming a member, a group nobody joined has no such member.
    got = h.txn_commit(txn_commit_req("other", {("t", 0): 3}, PID, generation=1,
                                      member_id="m"))
    assert errors(got) == {("t", 0): UNKNOWN_MEMBER_ID}
    assert h.coord.group("other") is None


def test_kip_447_fences_stale_generations_unknown_members_and_replaced_instances() -> None:
    h = Harness()
    first = h.join(join_req("g", instance_id="i1"))
    member, generation = first.member_id, first.generation_id
    h.sync(sync_req("g", generation, member, {member: b"a"}, instance_id="i1"))
    cases = {
        (generation, member, "i1"): NONE,
        (generation, member, None): NONE,
        (generation - 1, member, "i1"): ILLEGAL_GENERATION,
        (generation, "ghost", None): UNKNOWN_MEMBER_ID,
        (generation, "ghost", "i1"): FENCED_INSTANCE_ID,
        (generation, member, "i9"): UNKNOWN_MEMBER_ID,
        (-1, member, None): ILLEGAL_GENERATION,   # a member id names a member: check all
    }
    for (gen, mid, iid), expected in cases.items():
        got = h.txn_commit(txn_commit_req("g", {("t", 0): 1}, PID, generation=gen,
                                          member_id=mid, instance_id=iid))
        assert errors(got) == {("t", 0): expected}, (gen, mid, iid)
    # Before v3 there is no group metadata: a producer may commit for a live group.
    got = h.txn_commit(txn_commit_req("g", {("t", 0): 1}, PID, generation=99,
                                      member_id="ghost"), version=2)
    assert errors(got) == {("t", 0): NONE}
    # v3 with generation -1 and no member: allowed only while the group is Empty.
    got = h.txn_commit(txn_commit_req("g", {("t", 0): 1}, PID))
    assert errors(got) == {("t", 0): NONE}


@pytest.mark.parametrize(("req", "expected"), [
    (txn_commit_req("", {("t", 0): 1}, PID), INVALID_GROUP_ID),
    (txn_commit_req("g", {("t", 0): 1}, -1), INVALID_PRODUCER_ID_MAPPING),
    (txn_commit_req("g", {("t", 0): 1}, PID, epoch=-1), INVALID_PRODUCER_EPOCH),
    (txn_commit_req("g", {("t", 0): 1}, PID, metadata="x" * 5000), OFFSET_METADATA_TOO_LARGE),
])
def test_bad_requests_get_error_codes_and_write_nothing(req: Any, expected: int) -> None:
    h = Harness()
    got = h.txn_commit(req)
    assert errors(got) == {("t", 0): expected}
    assert h.log[0] == []


def test_unknown_partitions_and_a_partition_not_hosted() -> None:
    h = Harness(partitions=2)
    got = h.txn_commit(txn_commit_req("g", {("t", 0): 1, ("t", 9): 2}, PID),
                       unknown=frozenset({("t", 9)}))
    assert errors(got) == {("t", 0): NONE, ("t", 9): UNKNOWN_TOPIC_OR_PARTITION}
    h.coord.unload(h.coord.partition_for("g"))
    got = h.txn_commit(txn_commit_req("g", {("t", 0): 1}, PID))
    assert errors(got) == {("t", 0): NOT_COORDINATOR}


# ---------------------------------------------------------------------- replay / failover
def test_an_open_transaction_stays_pending_across_a_restart_and_completes_after() -> None:
    h = Harness()
    h.commit(commit_req("g", {("t", 0): 5}))
    h.txn_commit(txn_commit_req("g", {("t", 0): 10}, PID))
    h.txn_commit(txn_commit_req("g", {("t", 1): 20}, OTHER_PID))
    h.restart()                                      # coordinator failover mid-transaction
    assert offsets_of(h, "g", ("t", 0), ("t", 1)) == [5, -1]
    assert stable_fetch(h, "g", {"t": [0, 1]}) == {
        ("t", 0): (-1, UNSTABLE_OFFSET_COMMIT), ("t", 1): (-1, UNSTABLE_OFFSET_COMMIT)}
    assert h.marker(0, PID, committed=True) == 1
    assert h.marker(0, OTHER_PID, committed=False) == 1
    assert offsets_of(h, "g", ("t", 0), ("t", 1)) == [10, -1]


def test_replay_applies_the_markers_it_meets_in_the_log() -> None:
    h = Harness()
    h.txn_commit(txn_commit_req("a", {("t", 0): 10}, PID))
    h.marker(0, PID, committed=True)
    h.txn_commit(txn_commit_req("b", {("t", 0): 20}, OTHER_PID))
    h.marker(0, OTHER_PID, committed=False)
    h.txn_commit(txn_commit_req("a", {("t", 0): 30}, PID))     # the next transaction: open
    h.restart()
    assert offsets_of(h, "a", ("t", 0)) == [10]
    assert offsets_of(h, "b", ("t", 0)) == [-1]
    a = h.coord.group("a")
    assert a is not None and {pid: {tp: v.offset for tp, (_, v) in p.items()}
                              for pid, p in a.pending_txn_offsets.items()} == {
        PID: {("t", 0): 30}}
    b = h.coord.group("b")
    assert b is not None and b.pending_txn_offsets == {}


def test_a_failed_write_drops_only_its_own_pending_offsets() -> None:
    h = Harness()
    h.txn_commit(txn_commit_req("g", {("t", 0): 10}, PID))            # ends at 1
    h.txn_commit(txn_commit_req("g", {("t", 1): 11}, PID))            # ends at 2
    h.coord.fail_txn_offsets(PID, "g", 2)
    h.marker(0, PID, committed=True)
    assert offsets_of(h, "g", ("t", 0), ("t", 1)) == [10, -1]


# ---------------------------------------------------------------------- expiry, deletion
def test_expiry_keeps_offsets_a_transaction_is_committing_and_their_group() -> None:
    config = GroupConfig(min_session_timeout_ms=10, initial_rebalance_delay_ms=0,
                         offsets_retention_ms=1000, offsets_retention_check_interval_ms=100)
    h = Harness(config)
    h.commit(commit_req("g", {("t", 0): 5, ("t", 1): 6}))
    h.txn_commit(txn_commit_req("g", {("t", 0): 10, ("u", 0): 1}, PID))
    h.advance(5000)
    h.advance(200)
    g = h.coord.group("g")
    assert g is not None                               # open transaction: not deleted
    assert set(g.offsets) == {("t", 0)}                 # ("t", 1) expired
    h.marker(0, PID, committed=True)
    assert offsets_of(h, "g", ("t", 0), ("u", 0)) == [10, 1]


def test_deleting_a_group_tombstones_pending_offsets_and_a_late_commit_adds_nothing() -> None:
    h = Harness()
    h.commit(commit_req("g", {("t", 0): 5}))
    h.txn_commit(txn_commit_req("g", {("t", 0): 10, ("u", 0): 1}, PID))
    got = h.delete("g")
    assert got.results[0].error_code == NONE
    assert [(decode_key(k), v) for k, v in h.log[0][-3:]] == [
        (OffsetKey("g", "t", 0), None), (OffsetKey("g", "u", 0), None), (GroupKey("g"), None)]
    assert h.coord.group("g") is None
    assert h.marker(0, PID, committed=True) == 0
    assert h.coord.group("g") is None
    h.restart()
    assert h.coord.group("g") is None
