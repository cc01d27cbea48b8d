"""Helpers for the group coordinator tests: request builders and a step harness.

``Harness`` drives a pure ``GroupCoordinator`` exactly as ``GroupCoordinatorService``
does -- take a step at an explicit ``now``, append its records to an in-memory
``__consumer_offsets``, replay them, collect the parked answers that became ready -- and
checks that every response it sees encodes and decodes at the request's version.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from millrace.broker.group import CoordinatorResult, GroupConfig, GroupCoordinator
from millrace.broker.group.records import LoggedBatch
from millrace.protocol import (
    API,
    ApiKey,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
    TxnOffsetCommitRequest,
)

CONFIG = GroupConfig(min_session_timeout_ms=10, max_session_timeout_ms=600_000,
                     initial_rebalance_delay_ms=0)
T0 = 1_700_000_000_000
SESSION = 10_000
REBALANCE = 30_000

_RESPONSE_KEY = {
    "JoinGroupResponse": ApiKey.JOIN_GROUP, "SyncGroupResponse": ApiKey.SYNC_GROUP,
    "HeartbeatResponse": ApiKey.HEARTBEAT, "LeaveGroupResponse": ApiKey.LEAVE_GROUP,
    "OffsetCommitResponse": ApiKey.OFFSET_COMMIT, "OffsetFetchResponse": ApiKey.OFFSET_FETCH,
    "DescribeGroupsResponse": ApiKey.DESCRIBE_GROUPS, "ListGroupsResponse": ApiKey.LIST_GROUPS,
    "DeleteGroupsResponse": ApiKey.DELETE_GROUPS,
    "TxnOffsetCommitResponse": ApiKey.TXN_OFFSET_COMMIT,
}


def wire_check(response: Any, version: int) -> Any:
    """Encode ``response`` at ``version`` and decode it back (fails on illegal values)."""
    codec = API[_RESPONSE_KEY[type(response).__name__]].response
    return codec.decode(codec.encode(response, version), version)


def join_req(group: str = "g", member_id: str = "", *, session: int = SESSION,
             rebalance: int = REBALANCE, protocols: tuple[tuple[str, bytes], ...] = (
                 ("range", b"sub"),), instance_id: str | None = None,
             protocol_type: str = "consumer", reason: str | None = None) -> Any:
    return JoinGroupRequest(
        group_id=group, session_timeout_ms=session, rebalance_timeout_ms=rebalance,
        member_id=member_id, group_instance_id=instance_id, protocol_type=protocol_type,
        reason=reason,
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name=n, metadata=m)
                   for n, m in protocols])


def sync_req(group: str, generation: int, member_id: str,
             assignments: dict[str, bytes] | None = None,
             instance_id: str | None = None) -> Any:
    return SyncGroupRequest(
        group_id=group, generation_id=generation, member_id=member_id,
        group_instance_id=instance_id,
        assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
                     for m, a in (assignments or {}).items()])


def hb_req(group: str, generation: int, member_id: str, instance_id: str | None = None) -> Any:
    return HeartbeatRequest(group_id=group, generation_id=generation, member_id=member_id,
                            group_instance_id=instance_id)


def leave_req(group: str, *members: tuple[str, str | None],
              reason: str | None = None) -> Any:
    return LeaveGroupRequest(
        group_id=group, member_id=members[0][0] if members else "",
        members=[LeaveGroupRequest.MemberIdentity(member_id=m, group_instance_id=i,
                                                  reason=reason)
                 for m, i in members])


def commit_req(group: str, offsets: dict[tuple[str, int], int], generation: int = -1,
               member_id: str = "", metadata: str | None = "", instance_id: str | None = None,
               retention_ms: int = -1) -> Any:
    topics: dict[str, list[Any]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(
            OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                partition_index=partition, committed_offset=offset,
                committed_leader_epoch=3, committed_metadata=metadata))
    return OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
        group_instance_id=instance_id, retention_time_ms=retention_ms,
        topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=ps)
                for t, ps in topics.items()])


def txn_commit_req(group: str, offsets: dict[tuple[str, int], int], producer_id: int = 7,
                   epoch: int = 0, generation: int = -1, member_id: str = "",
                   instance_id: str | None = None, metadata: str | None = "") -> Any:
    topics: dict[str, list[Any]] = {}
    part_cls = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(part_cls(
            partition_index=partition, committed_offset=offset, committed_leader_epoch=3,
            committed_metadata=metadata))
    return TxnOffsetCommitRequest(
        transactional_id="txn", group_id=group, producer_id=producer_id,
        producer_epoch=epoch, generation_id=generation, member_id=member_id,
        group_instance_id=instance_id,
        topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=t, partitions=ps)
                for t, ps in topics.items()])


def fetch_req(group: str, topics: dict[str, list[int]] | None) -> Any:
    return OffsetFetchRequest(group_id=group, topics=None if topics is None else [
        OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
        for t, ps in topics.items()])


def fetched(response: Any) -> dict[tuple[str, int], tuple[int, int, str | None]]:
    """{(topic, partition): (offset, leader epoch, metadata)} of a v2-7 OffsetFetch answer."""
    return {(t.name, p.partition_index): (p.committed_offset, p.committed_leader_epoch,
                                          p.metadata)
            for t in response.topics for p in t.partitions}


@dataclass
class Pending:
    """A parked request: its token and version; ``answer`` once completed."""

    token: int
    version: int


class Harness:
    def __init__(self, config: GroupConfig = CONFIG, partitions: int = 1) -> None:
        self.config = config
        self.partitions = partitions
        self.now = T0
        self.log: dict[int, list[tuple[bytes, bytes | None]]] = {p: [] for p in range(partitions)}
        # the same records as batches, with producer ids and markers; end offsets count
        # one per record and one per marker
        self.batches: dict[int, list[LoggedBatch]] = {p: [] for p in range(partitions)}
        self.ends: dict[int, int] = {p: 0 for p in range(partitions)}
        self.answers: dict[int, Any] = {}
        self.versions: dict[int, int] = {}
        self.coord = self.fresh()

    def fresh(self) -> GroupCoordinator:
        """A new coordinator rebuilt from this harness's log (a broker restart)."""
        coord = GroupCoordinator(self.config, self.partitions)
        for p in range(self.partitions):
            coord.load_batches(p, list(self.batches[p]), self.now)
        return coord

    def restart(self) -> None:
        self.coord = self.fresh()
        self.answers.clear()

    def advance(self, ms: int) -> Any:
        self.now += ms
        return self.step(self.coord.poll(self.now), 0)

    def step(self, result: CoordinatorResult, version: int) -> Any:
        if result.waiter is not None:
            self.versions[result.waiter] = version
        producer_id = -1 if result.producer is None else result.producer[0]
        by_partition: dict[int, list[tuple[bytes | None, bytes | None]]] = {}
        for rec in result.records:
            self.log[rec.partition].append((rec.key, rec.value))
            by_partition.setdefault(rec.partition, []).append((rec.key, rec.value))
        for partition, records in by_partition.items():
            self.ends[partition] += len(records)
            end = self.ends[partition]
            self.batches[partition].append(LoggedBatch(end, producer_id, None, records))
            for key, value in records:
                assert key is not None
                self.coord.replay(key, value, end, producer_id)
        self.collect()
        if result.response is not None:
            return wire_check(result.response, version)
        if result.waiter is not None:
            if result.waiter in self.answers:   # completed by its own records' replay
                return self.answers.pop(result.waiter)
            return Pending(result.waiter, version)
        return None

    def collect(self) -> None:
        for token, response in self.coord.take_completions():
            self.answers[token] = wire_check(response, self.versions.get(token, 0))

    def answer(self, pending: Any) -> Any:
        """The answer of a parked request (fails if it is still parked)."""
        assert isinstance(pending, Pending), pending
        assert pending.token in self.answers, "request is still parked"
        return self.answers.pop(pending.token)

    def parked(self, pending: Any) -> bool:
        return isinstance(pending, Pending) and pending.token not in self.answers

    # -------------------------------------------------------------- requests
    def join(self, req: Any, version: int = 5, client_id: str = "client") -> Any:
        return self.step(self.coord.join_group(req, version, client_id, "/10.0.0.1",
                                               self.now), version)

    def sync(self, req: Any, version: int = 3) -> Any:
        return self.step(self.coord.sync_group(req, version, self.now), version)

    def heartbeat(self, req: Any, version: int = 3) -> Any:
        return self.step(self.coord.heartbeat(req, version, self.now), version)

    def leave(self, req: Any, version: int = 3) -> Any:
        return self.step(self.coord.leave_group(req, version, self.now), version)

    def commit(self, req: Any, version: int = 7,
               unknown: frozenset[tuple[str, int]] = frozenset()) -> Any:
        return self.step(self.coord.commit_offsets(req, version, self.now, unknown), version)

    def txn_commit(self, req: Any, version: int = 3,
                   unknown: frozenset[tuple[str, int]] = frozenset()) -> Any:
        return self.step(self.coord.txn_commit_offsets(req, version, self.now, unknown),
                         version)

    def marker(self, partition: int, producer_id: int, committed: bool) -> int:
        """The transaction coordinator's marker lands on ``partition`` (and replicates)."""
        self.ends[partition] += 1
        self.batches[partition].append(LoggedBatch(self.ends[partition], producer_id,
                                                   committed, []))
        return self.coord.replay_end_txn_marker(partition, producer_id, committed)

    def fetch(self, req: Any, version: int = 5) -> Any:
        return self.step(self.coord.fetch_offsets(req, version, self.now), version)

    def describe(self, *groups: str, version: int = 5) -> Any:
        return self.step(self.coord.describe_groups(
            DescribeGroupsRequest(groups=list(groups)), version, self.now), version)

    def list_groups(self, states: list[str] | None = None, version: int = 4) -> Any:
        return self.step(self.coord.list_groups(
            ListGroupsRequest(states_filter=states or []), version, self.now), version)

    def delete(self, *groups: str, version: int = 2) -> Any:
        return self.step(self.coord.delete_groups(
            DeleteGroupsRequest(groups_names=list(groups)), version, self.now), version)

    # -------------------------------------------------------------- flows
    def new_member(self, group: str = "g", version: int = 5, **kw: Any) -> Any:
        """JoinGroup as a v4+ dynamic client does: MEMBER_ID_REQUIRED, then rejoin."""
        first = self.join(join_req(group, **kw), version)
        assert first.error_code == 79, first
        assert first.member_id.startswith("client-")
        return self.join(join_req(group, first.member_id, **kw), version)

    def stable_group(self, n: int, group: str = "g",
                     assign: dict[int, bytes] | None = None) -> tuple[list[str], int]:
        """n dynamic members joined and synced; returns (member ids, generation)."""
        pendings = [self.new_member(group) for _ in range(n)]
        # The first completes alone (delay 0); the rest made it rebalance: everyone rejoins.
        first = pendings[0] if not isinstance(pendings[0], Pending) else self.answer(pendings[0])
        if n > 1:
            pendings = [self.join(join_req(group, first.member_id)), *pendings[1:]]
        answers = [p if not isinstance(p, Pending) else self.answer(p) for p in pendings]
        generation = answers[0].generation_id
        ids = [a.member_id for a in answers]
        leader = answers[0].leader
        assignments = {m: (assign or {}).get(i, f"a{i}".encode()) for i, m in enumerate(ids)}
        syncs = [self.sync(sync_req(group, generation, m,
                                    assignments if m == leader else None)) for m in ids]
        for m, s in zip(ids, syncs):
            got = self.answer(s) if isinstance(s, Pending) else s
            assert got.error_code == 0 and got.assignment == assignments[m], got
        return ids, generation
