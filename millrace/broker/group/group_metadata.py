"""One classic consumer group: its state machine, members and committed offsets.

Java counterpart: ``GroupMetadata`` (``ClassicGroup`` in the rewritten coordinator).

States and the moves between them (Kafka's names, as DescribeGroups/ListGroups show them)::

    Empty ──first JoinGroup──▶ PreparingRebalance ──join completes──▶ CompletingRebalance
      ▲                          ▲          │ (no members left)              │ leader's
      └──────────────────────────┼──────────┘                                │ SyncGroup
                                 │                                           ▼ persisted
                                 └──member joins/leaves/expires────────── Stable
    Dead: the group was deleted (its tombstone was replayed); nothing leaves Dead.

PreparingRebalance waits for every known member to send JoinGroup again, bounded by the
largest member rebalance timeout (a group that was Empty first waits
``group.initial.rebalance.delay.ms`` so that a starting fleet of consumers lands in one
generation).  Completing the join bumps the generation, picks the protocol all members
support (most first-choice votes wins) and answers every parked JoinGroup; only the
leader's answer lists the members and their subscriptions.  CompletingRebalance waits for
the leader's SyncGroup carrying every member's assignment.

What is persisted (``GroupValue``) is the outcome of a rebalance: generation, protocol,
leader, members with their assignments.  The rest of this object -- parked requests,
pending member ids, deadlines -- is in-memory machinery and is rebuilt empty on restart.

Offsets: ``offsets`` holds the committed ones, ``offset_positions`` where in
``__consumer_offsets`` each was written (the end offset of its batch; -1 unknown), and
``pending_txn_offsets`` the offsets transactional producers committed (TxnOffsetCommit,
KIP-98) per producer id, invisible until the producer's COMMIT marker moves them into
``offsets`` -- unless a later write already holds that partition (Kafka compares the
positions, so compaction of the topic cannot resurrect an older commit).

Owned by the event-loop thread (through ``GroupCoordinator``).
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass
from enum import Enum

from millrace.broker.group.member import MemberMetadata
from millrace.broker.group.records import GroupValue, MemberRecord, OffsetAndMetadata

REBALANCE_HISTORY = 50   # rebalances remembered per group


@dataclass(frozen=True, slots=True)
class RebalanceEvent:
    """One move into PreparingRebalance: when, from which generation and state, with how
    many members (after the change that caused it), and why."""

    time_ms: int
    generation: int
    from_state: str
    members: int
    reason: str

    def to_json(self) -> dict[str, object]:
        return {"t": self.time_ms, "generation": self.generation, "state": self.from_state,
                "members": self.members, "reason": self.reason}


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class IllegalGroupStateError(RuntimeError):
    """A transition the state machine does not allow: a coordinator bug."""


class GroupMetadata:
    def __init__(self, group_id: str, partition: int, now_ms: int | None = None) -> None:
        self.group_id = group_id
        self.partition = partition
        self.state = GroupState.EMPTY
        self.state_timestamp_ms: int | None = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        self.static_members: dict[str, str] = {}      # group.instance.id -> member id
        self.pending_members: dict[str, int] = {}     # MEMBER_ID_REQUIRED ids -> deadline
        self.pending_sync: set[str] = set()           # joined, no SyncGroup seen yet
        self.sync_deadline_ms: int | None = None
        self.join_deadline_ms: int | None = None
        self.initial_join = False                     # waiting out the initial delay
        self.initial_remaining_ms = 0
        self.new_member_added = False
        self.offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
        self.offset_positions: dict[tuple[str, int], int] = {}
        # producer id -> {(topic, partition): (position, offset)} awaiting its marker
        self.pending_txn_offsets: dict[int, dict[tuple[str, int],
                                                 tuple[int, OffsetAndMetadata]]] = {}
        # why the group rebalanced, newest last (KIP-800); in memory: a coordinator that
        # takes the group over starts its own history
        self.rebalances: deque[RebalanceEvent] = deque(maxlen=REBALANCE_HISTORY)

    def record_rebalance(self, now_ms: int, reason: str) -> None:
        """The group is about to leave ``state`` for PreparingRebalance because of
        ``reason``."""
        self.rebalances.append(RebalanceEvent(now_ms, self.generation_id, self.state.value,
                                              len(self.members), reason))

    def __repr__(self) -> str:
        return (f"GroupMetadata({self.group_id!r}, {self.state.value}, "
                f"generation={self.generation_id}, members={list(self.members)})")

    # ------------------------------------------------------------------ state
    def is_(self, *states: GroupState) -> bool:
        return self.state in states

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise IllegalGroupStateError(
                f"group {self.group_id}: {self.state.value} -> {state.value} is not allowed")
        self.state = state
        self.state_timestamp_ms = now_ms

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    # ------------------------------------------------------------------ members
    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: MemberMetadata) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        iid = member.group_instance_id
        if iid is not None and self.static_members.get(iid) == member_id:
            del self.static_members[iid]
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def replace_static_member(self, instance_id: str, old_id: str,
                              new_id: str) -> MemberMetadata:
        """Move the static member ``instance_id`` from ``old_id`` to ``new_id``.

        The caller answers whatever the old id had parked (FENCED_INSTANCE_ID)."""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return member

    def has_all_members_joined(self) -> bool:
        return (all(m.awaiting_join for m in self.members.values())
                and not self.pending_members)

    def not_yet_rejoined(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def elect_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick a member that did; False if none did."""
        leader = self.members.get(self.leader_id or "")
        if leader is not None and leader.awaiting_join:
            return True
        for member in self.members.values():
            if member.awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # ------------------------------------------------------------------ protocols
    def candidate_protocols(self) -> set[str]:
        sets = [set(m.protocol_names()) for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports_protocols(self, protocol_type: str, names: list[str],
                           rejoining: str | None = None) -> bool:
        """Whether a member with these protocols may join (``rejoining``: its old id)."""
        if not self.members:
            return bool(protocol_type) and bool(names)
        if protocol_type != self.protocol_type:
            return False
        others = [m for m in self.members.values() if m.member_id != rejoining]
        if not others:
            return bool(names)
        common = set.intersection(*(set(m.protocol_names()) for m in others))
        return bool(common.intersection(names))

    def select_protocol(self) -> str:
        """The candidate most members list first among the candidates (ties: leader's order)."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise IllegalGroupStateError(f"group {self.group_id}: no common protocol")
        votes = Counter(m.vote(candidates) for m in self.members.values())
        leader = self.members.get(self.leader_id or "") or next(iter(self.members.values()))
        order = {name: i for i, name in enumerate(leader.protocol_names())}
        return min(candidates, key=lambda name: (-votes[name], order.get(name, 1 << 30), name))

    # ------------------------------------------------------------------ offsets
    def has_pending_txn_offset(self, topic_partition: tuple[str, int]) -> bool:
        """A transactional producer committed this partition and has not ended yet."""
        return any(topic_partition in pending
                   for pending in self.pending_txn_offsets.values())

    def has_offsets(self) -> bool:
        """Kafka's ``hasOffsets``: committed or pending offsets keep an Empty group alive."""
        return bool(self.offsets or self.pending_txn_offsets)

    def pending_txn_partitions(self) -> set[tuple[str, int]]:
        return {tp for pending in self.pending_txn_offsets.values() for tp in pending}

    # ------------------------------------------------------------------ persistence
    def to_record(self, assignments: dict[str, bytes] | None = None) -> GroupValue:
        """The persisted form; ``assignments`` (the leader's SyncGroup) replaces the
        members' current assignments, members it leaves out get an empty one."""
        members = [MemberRecord(
            m.member_id, m.group_instance_id, m.client_id, m.client_host,
            m.rebalance_timeout_ms, m.session_timeout_ms, m.metadata(self.protocol_name),
            m.assignment if assignments is None else assignments.get(m.member_id, b""))
            for m in self.members.values()]
        return GroupValue(self.protocol_type or "", self.generation_id, self.protocol_name,
                          self.leader_id, self.state_timestamp_ms, members)

    def install(self, value: GroupValue) -> None:
        """Take the persisted outcome of a rebalance as this group's state (load path)."""
        self.generation_id = value.generation
        self.protocol_type = value.protocol_type or None
        self.protocol_name = value.protocol
        self.state_timestamp_ms = value.current_state_timestamp
        old = self.members
        self.members = {}
        self.static_members = {}
        self.leader_id = None
        for rec in value.members:
            # A live member keeps its in-memory state (parked requests, deadlines, all the
            # protocols it offered); the record's facts win where they differ.
            member = old.get(rec.member_id) or MemberMetadata(
                rec.member_id, rec.group_instance_id, rec.client_id, rec.client_host,
                rec.rebalance_timeout, rec.session_timeout, value.protocol_type, [])
            if member.metadata(value.protocol) != rec.subscription or (
                    value.protocol not in member.protocol_names()):
                member.protocols = [(value.protocol or "", rec.subscription)]
            member.group_instance_id = rec.group_instance_id
            member.client_id, member.client_host = rec.client_id, rec.client_host
            member.rebalance_timeout_ms = rec.rebalance_timeout
            member.session_timeout_ms = rec.session_timeout
            member.assignment = rec.assignment
            self.add(member)
        self.protocol_type = value.protocol_type or None
        self.leader_id = value.leader if value.leader in self.members else (
            next(iter(self.members), None))
        self.state = GroupState.STABLE if self.members else GroupState.EMPTY
