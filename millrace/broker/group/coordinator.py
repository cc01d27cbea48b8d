"""The classic group coordinator: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and timers.

Java counterpart: ``GroupCoordinator`` (Kafka's classic ``core`` coordinator; the classic
half of the rewritten ``GroupMetadataManager``).  Pure and synchronous: no I/O, no
clock, no threads -- see ``group_metadata_manager`` for the step/replay contract and
``group_metadata`` for the state machine.

A rebalance, step by step:

1. JoinGroup from a member without id (v4+, dynamic): a fresh id ``<client_id>-<uuid4>``
   is parked as pending and returned with MEMBER_ID_REQUIRED; the client rejoins with it.
2. JoinGroup admits or updates the member and parks its request; the group moves to
   PreparingRebalance.  The join completes when every member has rejoined (or, for a
   group that was Empty, when the initial delay -- extended while new members keep
   arriving, capped by the rebalance timeout -- has passed), or at the rebalance timeout,
   when dynamic members that did not rejoin are dropped.  Completing bumps the generation
   and answers every parked JoinGroup; the leader's answer lists all members.
3. SyncGroup: followers park; the leader's assignment becomes a group record.  Replaying
   that record (after it is durable) hands each parked member its assignment: Stable.
   Members that never send SyncGroup are dropped after the rebalance timeout.
4. Heartbeats keep a member's session; in PreparingRebalance they answer
   REBALANCE_IN_PROGRESS so members rejoin.  A member silent for its session timeout is
   removed (members with a parked JoinGroup/SyncGroup are waiting on us, not silent).

Static members (``group.instance.id``, KIP-345) keep their seat across restarts: a
JoinGroup with a known instance id and no member id replaces the old member id (whose
parked requests, and later requests, get FENCED_INSTANCE_ID); in a Stable group whose
protocol would not change this is persisted without a rebalance.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from millrace.broker.group import admin, offsets
from millrace.broker.group.group_metadata import GroupMetadata, GroupState
from millrace.broker.group.group_metadata_manager import (
    CoordinatorResult,
    GroupMetadataManager,
    OffsetsRecord,
)
from millrace.broker.group.member import MemberMetadata, Waiter
from millrace.broker.group.records import GroupValue
from millrace.broker.group.responses import (
    JoinMember,
    heartbeat_response,
    join_error,
    join_response,
    leave_response,
    sync_error,
    sync_response,
)
from millrace.common.errors import Errors

log = logging.getLogger(__name__)

PREPARING = GroupState.PREPARING_REBALANCE
COMPLETING = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
EMPTY = GroupState.EMPTY
DEAD = GroupState.DEAD


class GroupCoordinator(GroupMetadataManager):
    """All groups of the ``__consumer_offsets`` partitions this broker hosts."""

    # ================================================================== JoinGroup
    def join_group(self, body: Any, version: int, client_id: str, client_host: str,
                   now_ms: int) -> CoordinatorResult:
        self._tick(now_ms)
        member_id = body.member_id or ""
        err = self._check(body.group_id)
        if not err and not (self.config.min_session_timeout_ms <= body.session_timeout_ms
                            <= self.config.max_session_timeout_ms):
            err = Errors.INVALID_SESSION_TIMEOUT
        if err:
            return CoordinatorResult(response=join_error(version, err, member_id))
        req = _JoinRequest(body, version, client_id, client_host)
        group = self.groups.get(body.group_id)
        if not member_id:
            return self._finish(self._join_new_member(group, req, now_ms))
        if group is None:
            return CoordinatorResult(response=join_error(version, Errors.UNKNOWN_MEMBER_ID,
                                                         member_id))
        return self._finish(self._join_known_member(group, member_id, req, now_ms))

    def _join_new_member(self, group: GroupMetadata | None, req: _JoinRequest,
                         now_ms: int) -> CoordinatorResult:
        if group is None:
            if not (req.protocol_type and req.protocols):
                return req.error(Errors.INCONSISTENT_GROUP_PROTOCOL)
            group = GroupMetadata(req.group_id, self.partition_for(req.group_id), now_ms)
            self.groups[req.group_id] = group
        if group.is_(DEAD):
            return req.error(Errors.COORDINATOR_NOT_AVAILABLE)
        old_id = group.static_member_id(req.instance_id)   # a static member coming back?
        if not group.supports_protocols(req.protocol_type, req.names, rejoining=old_id):
            return req.error(Errors.INCONSISTENT_GROUP_PROTOCOL)
        new_id = f"{req.client_id}-{uuid.uuid4()}"
        if req.instance_id is not None and old_id is not None:
            return self._replace_static_member(group, req.instance_id, old_id, new_id, req,
                                               now_ms)
        if len(group.members) + len(group.pending_members) >= self.config.max_size:
            return req.error(Errors.GROUP_MAX_SIZE_REACHED)
        if req.instance_id is None and req.version >= 4:
            # KIP-394: hand out the id first, admit the member when it comes back with it.
            group.pending_members[new_id] = now_ms + req.session_timeout_ms
            return req.error(Errors.MEMBER_ID_REQUIRED, new_id)
        return self._add_member_and_rebalance(group, new_id, req, now_ms)

    def _join_known_member(self, group: GroupMetadata, member_id: str, req: _JoinRequest,
                           now_ms: int) -> CoordinatorResult:
        if group.is_(DEAD):
            return req.error(Errors.COORDINATOR_NOT_AVAILABLE, member_id)
        if not group.supports_protocols(req.protocol_type, req.names, rejoining=member_id):
            return req.error(Errors.INCONSISTENT_GROUP_PROTOCOL, member_id)
        if member_id in group.pending_members:
            del group.pending_members[member_id]
            return self._add_member_and_rebalance(group, member_id, req, now_ms)
        err = self.validate_member(group, member_id, req.instance_id)
        if err:
            return req.error(err, member_id)
        member = group.members[member_id]
        if group.is_(PREPARING):
            return self._update_member_and_rebalance(group, member, req, now_ms)
        if group.is_(COMPLETING) and member.matches(req.protocols):
            # A resend (the first answer was lost): repeat this generation's answer.
            return CoordinatorResult(response=self._join_answer(group, member, req.version))
        if group.is_(STABLE) and not group.is_leader(member_id) and member.matches(
                req.protocols):
            # Nothing changed for a follower: let it SyncGroup into the current generation.
            return CoordinatorResult(response=self._join_answer(group, member, req.version))
        return self._update_member_and_rebalance(group, member, req, now_ms)

    def _add_member_and_rebalance(self, group: GroupMetadata, member_id: str,
                                  req: _JoinRequest, now_ms: int) -> CoordinatorResult:
        member = MemberMetadata(member_id, req.instance_id, req.client_id, req.client_host,
                                req.rebalance_timeout_ms, req.session_timeout_ms,
                                req.protocol_type, req.protocols, is_new=True,
                                joined_at_ms=now_ms)
        token = self._park_join(member, req.version)
        if group.is_(PREPARING) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member)
        self._maybe_prepare_rebalance(group, now_ms, _with_client_reason(
            f"adding new member {member_id} (client {req.client_id}, host {req.client_host}"
            f"{_instance(req.instance_id)})", req.reason))
        return CoordinatorResult(self._maybe_complete_join(group, now_ms), waiter=token)

    def _update_member_and_rebalance(self, group: GroupMetadata, member: MemberMetadata,
                                     req: _JoinRequest, now_ms: int) -> CoordinatorResult:
        member.protocols = req.protocols
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        token = self._park_join(member, req.version)
        self._maybe_prepare_rebalance(group, now_ms, _with_client_reason(
            f"updating metadata for member {member.member_id} (client {member.client_id}) "
            f"during {group.state.value}", req.reason))
        return CoordinatorResult(self._maybe_complete_join(group, now_ms), waiter=token)

    def _park_join(self, member: MemberMetadata, version: int) -> int:
        if member.join_waiter is not None:  # a resend superseded the parked request
            self._complete(member.join_waiter.token, join_error(
                member.join_waiter.version, Errors.REBALANCE_IN_PROGRESS, member.member_id))
        member.join_waiter = Waiter(self._new_token(), version)
        return member.join_waiter.token

    def _replace_static_member(self, group: GroupMetadata, instance_id: str, old_id: str,
                               new_id: str, req: _JoinRequest,
                               now_ms: int) -> CoordinatorResult:
        old_leader = group.leader_id
        member = group.members[old_id]
        self._fail_waiters(member, Errors.FENCED_INSTANCE_ID)
        saved = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms,
                 member.client_id, member.client_host)
        group.replace_static_member(instance_id, old_id, new_id)
        member.protocols = req.protocols
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        member.client_id, member.client_host = req.client_id, req.client_host
        self.touch(member, now_ms)
        if group.is_(STABLE) and group.select_protocol() == group.protocol_name:
            # The assignment stays valid: persist the new id, no rebalance.
            skip = group.is_leader(new_id) and req.version >= 9
            response = join_response(
                req.version, generation=group.generation_id, protocol_type=group.protocol_type,
                protocol_name=group.protocol_name, member_id=new_id,
                # Before v9 the old leader id is returned so that a replaced leader does
                # not compute an assignment a Stable group would never distribute.
                leader=(new_id if skip else old_leader) or "",
                members=self._member_list(group) if skip else [], skip_assignment=skip)

            def revert(error: int) -> Any:
                if group.static_member_id(instance_id) == new_id:
                    group.replace_static_member(instance_id, new_id, old_id)
                    (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms,
                     member.client_id, member.client_host) = saved
                return join_error(req.version, error)

            return CoordinatorResult([self.group_record(group)], response, on_failure=revert)
        token = self._park_join(member, req.version)
        if group.is_(STABLE, COMPLETING):
            self._prepare_rebalance(group, now_ms, _with_client_reason(
                f"static member {instance_id} rejoined as {new_id} (was {old_id}) with "
                "changed protocols", req.reason))
        return CoordinatorResult(self._maybe_complete_join(group, now_ms), waiter=token)

    # ------------------------------------------------------------------ rebalance
    def _maybe_prepare_rebalance(self, group: GroupMetadata, now_ms: int,
                                 reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, now_ms, reason)

    def _prepare_rebalance(self, group: GroupMetadata, now_ms: int, reason: str) -> None:
        """Into PreparingRebalance; ``reason`` (KIP-800: what the coordinator saw, with
        the client's own reason when it gave one) is logged, as Kafka does, and kept in
        the group's rebalance history (``GroupMetadata.rebalances``)."""
        log.info("Preparing to rebalance group %s in state %s with old generation %d "
                 "(reason: %s)", group.group_id, group.state.value, group.generation_id,
                 reason)
        group.record_rebalance(now_ms, reason)
        if group.is_(COMPLETING):
            self._reset_and_propagate_sync(group, Errors.REBALANCE_IN_PROGRESS)
        group.pending_sync.clear()
        group.sync_deadline_ms = None
        if group.is_(EMPTY):
            delay = self.config.initial_rebalance_delay_ms
            group.initial_join = True
            group.initial_remaining_ms = max(group.rebalance_timeout_ms() - delay, 0)
            group.new_member_added = False
            group.join_deadline_ms = now_ms + delay
        else:
            group.initial_join = False
            group.join_deadline_ms = now_ms + group.rebalance_timeout_ms()
        group.transition_to(PREPARING, now_ms)

    def _reset_and_propagate_sync(self, group: GroupMetadata, error: int) -> None:
        for member in group.members.values():
            member.assignment = b""
            if member.sync_waiter is not None:
                self._complete(member.sync_waiter.token, sync_error(error))
                member.sync_waiter = None
                # It could not heartbeat while parked: its session restarts now.
                self.touch(member, self._clock_ms)

    def _maybe_complete_join(self, group: GroupMetadata, now_ms: int) -> list[OffsetsRecord]:
        if not group.is_(PREPARING) or group.join_deadline_ms is None:
            return []
        if group.initial_join:
            # Only time ends the initial delay; each new member extends it, up to the
            # rebalance timeout, so a starting fleet of consumers joins one generation.
            while now_ms >= group.join_deadline_ms:
                if not (group.new_member_added and group.initial_remaining_ms > 0):
                    return self._complete_join(group, now_ms)
                group.new_member_added = False
                step = min(self.config.initial_rebalance_delay_ms, group.initial_remaining_ms)
                group.initial_remaining_ms -= step
                group.join_deadline_ms = now_ms + step
            return []
        if group.has_all_members_joined() or now_ms >= group.join_deadline_ms:
            return self._complete_join(group, now_ms)
        return []

    def _complete_join(self, group: GroupMetadata, now_ms: int) -> list[OffsetsRecord]:
        # Dynamic members that did not rejoin in time are out; static ones keep their seat
        # until their session times out.
        for member in group.not_yet_rejoined():
            if not member.is_static:
                self._remove_member(group, member)
        if group.members and not group.elect_joined_leader():
            # Only silent static members: wait another rebalance timeout for them.
            group.initial_join = False
            group.join_deadline_ms = now_ms + group.rebalance_timeout_ms()
            return []
        group.join_deadline_ms = None
        group.generation_id += 1
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            group.transition_to(EMPTY, now_ms)
            return [self.group_record(group)]
        group.protocol_name = group.select_protocol()
        group.transition_to(COMPLETING, now_ms)
        for member in group.members.values():
            if member.join_waiter is not None:
                self._complete(member.join_waiter.token,
                               self._join_answer(group, member, member.join_waiter.version))
                member.join_waiter = None
                member.is_new = False
                self.touch(member, now_ms)
        group.pending_sync = set(group.members)
        group.sync_deadline_ms = now_ms + group.rebalance_timeout_ms()
        return []

    def _join_answer(self, group: GroupMetadata, member: MemberMetadata, version: int) -> Any:
        leader = group.is_leader(member.member_id)
        return join_response(
            version, generation=group.generation_id, protocol_type=group.protocol_type,
            protocol_name=group.protocol_name, leader=group.leader_id or "",
            member_id=member.member_id, members=self._member_list(group) if leader else [])

    @staticmethod
    def _member_list(group: GroupMetadata) -> list[JoinMember]:
        return [(m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
                for m in group.members.values()]

    def _remove_member(self, group: GroupMetadata, member: MemberMetadata) -> None:
        self._fail_waiters(member, Errors.UNKNOWN_MEMBER_ID)
        group.remove(member.member_id)

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata,
                                        now_ms: int, reason: str) -> list[OffsetsRecord]:
        self._remove_member(group, member)
        if group.is_(STABLE, COMPLETING):
            self._prepare_rebalance(group, now_ms, reason)
        return self._maybe_complete_join(group, now_ms)

    # ================================================================== SyncGroup
    def sync_group(self, body: Any, version: int, now_ms: int) -> CoordinatorResult:
        self._tick(now_ms)
        group, err = self._member_group(body.group_id)
        instance_id = body.group_instance_id if version >= 3 else None
        if group is not None:
            err = self.validate_member(group, body.member_id, instance_id)
            if not err and body.generation_id != group.generation_id:
                err = Errors.ILLEGAL_GENERATION
            if not err and version >= 5 and (
                    (body.protocol_type is not None
                     and body.protocol_type != group.protocol_type)
                    or (body.protocol_name is not None
                        and body.protocol_name != group.protocol_name)):
                err = Errors.INCONSISTENT_GROUP_PROTOCOL
            if not err and group.is_(PREPARING):
                err = Errors.REBALANCE_IN_PROGRESS
        if err or group is None:
            return CoordinatorResult(response=sync_error(err or Errors.UNKNOWN_MEMBER_ID))
        member = group.members[body.member_id]
        group.pending_sync.discard(member.member_id)
        self.touch(member, now_ms)
        if group.is_(STABLE):
            return CoordinatorResult(response=sync_response(
                version, protocol_type=group.protocol_type, protocol_name=group.protocol_name,
                assignment=member.assignment))
        # CompletingRebalance: park; the leader's assignment is persisted first.
        if member.sync_waiter is not None:
            self._complete(member.sync_waiter.token, sync_error(Errors.REBALANCE_IN_PROGRESS))
        token = self._new_token()
        member.sync_waiter = Waiter(token, version)
        if not group.is_leader(member.member_id):
            return CoordinatorResult(waiter=token)
        assignments = {a.member_id: bytes(a.assignment) for a in body.assignments}
        generation = group.generation_id

        def failed(error: int) -> None:
            if group.is_(COMPLETING) and group.generation_id == generation:
                self._reset_and_propagate_sync(group, error)
                self._prepare_rebalance(group, self._clock_ms,
                                        f"storing the assignment of generation {generation} "
                                        f"failed (error code {error})")

        return CoordinatorResult([self.group_record(group, assignments)], waiter=token,
                                 on_failure=failed)

    def _apply_group_value(self, group_id: str, value: GroupValue | None) -> None:
        group = self.groups.get(group_id)
        if (value is not None and group is not None and group.is_(COMPLETING)
                and value.generation == group.generation_id):
            # The leader's assignment is durable: hand every member its share.
            for rec in value.members:
                member = group.members.get(rec.member_id)
                if member is not None:
                    member.assignment = rec.assignment
            group.transition_to(STABLE, self._clock_ms)
            for member in group.members.values():
                if member.sync_waiter is not None:
                    self._complete(member.sync_waiter.token, sync_response(
                        member.sync_waiter.version, protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name, assignment=member.assignment))
                    member.sync_waiter = None
                    self.touch(member, self._clock_ms)
            return
        if (value is not None and group is not None
                and (group.is_(PREPARING, COMPLETING)
                     or value.generation < group.generation_id)):
            return  # the group has moved on since this record was written
        super()._apply_group_value(group_id, value)

    # ================================================================== Heartbeat
    def heartbeat(self, body: Any, version: int, now_ms: int) -> CoordinatorResult:
        self._tick(now_ms)
        group, err = self._member_group(body.group_id)
        if group is not None:
            instance_id = body.group_instance_id if version >= 3 else None
            err = self.validate_member(group, body.member_id, instance_id)
            if not err and body.generation_id != group.generation_id:
                err = Errors.ILLEGAL_GENERATION
            if not err:
                self.touch(group.members[body.member_id], now_ms)
                if group.is_(PREPARING):
                    err = Errors.REBALANCE_IN_PROGRESS
        return CoordinatorResult(response=heartbeat_response(err))

    # ================================================================== LeaveGroup
    def leave_group(self, body: Any, version: int, now_ms: int) -> CoordinatorResult:
        self._tick(now_ms)
        if version < 3:
            leaving: list[tuple[str, str | None, str | None]] = [(body.member_id, None, None)]
        else:
            leaving = [(m.member_id, m.group_instance_id, m.reason if version >= 5 else None)
                       for m in body.members]
        group, err = self._member_group(body.group_id)
        if err and err != Errors.UNKNOWN_MEMBER_ID:
            return CoordinatorResult(response=leave_response(version, err, []))
        records: list[OffsetsRecord] = []
        outcomes = []
        for member_id, instance_id, reason in leaving:
            if group is None:
                outcomes.append((member_id, instance_id, int(Errors.UNKNOWN_MEMBER_ID)))
                continue
            e, recs = self._leave_one(group, member_id, instance_id, reason, now_ms)
            records += recs
            outcomes.append((member_id, instance_id, e))
        return CoordinatorResult(records, leave_response(version, Errors.NONE, outcomes))

    def _leave_one(self, group: GroupMetadata, member_id: str, instance_id: str | None,
                   reason: str | None, now_ms: int) -> tuple[int, list[OffsetsRecord]]:
        if not member_id and instance_id is not None:   # by instance id (admin removal)
            member_id = group.static_member_id(instance_id) or ""
            if not member_id:
                return Errors.UNKNOWN_MEMBER_ID, []
        elif member_id in group.pending_members:
            del group.pending_members[member_id]
            return Errors.NONE, self._maybe_complete_join(group, now_ms)
        err = self.validate_member(group, member_id, instance_id)
        if err:
            return err, []
        member = group.members[member_id]
        return Errors.NONE, self._remove_member_and_update_group(
            group, member, now_ms, _with_client_reason(
                f"removing member {member_id} (client {member.client_id}) on LeaveGroup",
                reason))

    # ================================================================== timers
    def poll(self, now_ms: int) -> CoordinatorResult:
        """Fire every deadline that passed: pending member ids, sessions, rebalance and
        sync timeouts, offset expiration.  Answers it completes go to the completions."""
        self._tick(now_ms)
        records: list[OffsetsRecord] = []
        for group in list(self.groups.values()):
            if group.partition in self.hosted:
                records += self._fire_timers(group, now_ms)
        due = self._next_offsets_expiry_ms
        if due is not None and now_ms >= due:
            self._next_offsets_expiry_ms = now_ms + self.config.offsets_retention_check_interval_ms
            records += offsets.expire_offsets(self, now_ms)
        return CoordinatorResult(records)

    def _fire_timers(self, group: GroupMetadata, now_ms: int) -> list[OffsetsRecord]:
        records: list[OffsetsRecord] = []
        for member_id, deadline in list(group.pending_members.items()):
            if now_ms >= deadline:
                del group.pending_members[member_id]
        for member in list(group.members.values()):
            if member.member_id in group.members and self._session_expired(member, now_ms):
                records += self._remove_member_and_update_group(
                    group, member, now_ms,
                    f"removing member {member.member_id} (client {member.client_id}) on "
                    f"heartbeat expiration (session timeout {member.session_timeout_ms} ms)")
        if group.sync_deadline_ms is not None and now_ms >= group.sync_deadline_ms:
            group.sync_deadline_ms = None
            if group.is_(COMPLETING, STABLE) and group.pending_sync:
                # Joined but never synced: out, and the rest rebalance without them.
                silent_ids = sorted(group.pending_sync)
                for member_id in silent_ids:
                    silent = group.members.get(member_id)
                    if silent is not None:
                        self._remove_member(group, silent)
                self._prepare_rebalance(group, now_ms,
                                        f"removing {', '.join(silent_ids)} on pending sync "
                                        "request expiration")
        records += self._maybe_complete_join(group, now_ms)
        return records

    def _session_expired(self, member: MemberMetadata, now_ms: int) -> bool:
        if member.awaiting_join:   # parked in a rebalance, bounded by its timeout
            return member.is_new and (
                now_ms >= member.joined_at_ms + self.config.new_member_join_timeout_ms)
        if member.awaiting_sync:
            return False
        if member.heartbeat_deadline_ms is None:
            self.touch(member, now_ms)
            return False
        return now_ms >= member.heartbeat_deadline_ms

    def next_deadline_ms(self) -> int | None:
        """The earliest time ``poll`` has something to do (None: nothing scheduled)."""
        times = [t for g in self.groups.values() for t in (
            g.join_deadline_ms, g.sync_deadline_ms, *g.pending_members.values(),
            *(m.heartbeat_deadline_ms for m in g.members.values()))
            if t is not None]
        if self._next_offsets_expiry_ms is not None:
            times.append(self._next_offsets_expiry_ms)
        return min(times, default=None)

    # ================================================================== offsets & admin
    def commit_offsets(self, body: Any, version: int, now_ms: int,
                       unknown: frozenset[tuple[str, int]] = frozenset()) -> CoordinatorResult:
        """OffsetCommit; partitions in ``unknown`` (no such topic/partition) are refused."""
        self._tick(now_ms)
        return offsets.commit_offsets(self, body, version, now_ms, unknown)

    def txn_commit_offsets(self, body: Any, version: int, now_ms: int,
                           unknown: frozenset[tuple[str, int]] = frozenset()
                           ) -> CoordinatorResult:
        """TxnOffsetCommit: the records are one transactional batch of the producer
        (``result.producer``); replayed, they stay pending until its marker."""
        self._tick(now_ms)
        return offsets.txn_commit_offsets(self, body, version, now_ms, unknown)

    def fetch_offsets(self, body: Any, version: int, now_ms: int) -> CoordinatorResult:
        self._tick(now_ms)
        return CoordinatorResult(response=offsets.fetch_offsets(self, body, version))

    def describe_groups(self, body: Any, version: int, now_ms: int) -> CoordinatorResult:
        self._tick(now_ms)
        return CoordinatorResult(response=admin.describe_groups(self, body, version))

    def list_groups(self, body: Any, version: int, now_ms: int) -> CoordinatorResult:
        self._tick(now_ms)
        return CoordinatorResult(response=admin.list_groups(self, body, version))

    def delete_groups(self, body: Any, version: int, now_ms: int) -> CoordinatorResult:
        self._tick(now_ms)
        return admin.delete_groups(self, body, version)

    # ================================================================== helpers
    def _check(self, group_id: str | None) -> int:
        if not group_id:
            return Errors.INVALID_GROUP_ID
        return self.coordinator_error(group_id)

    def _member_group(self, group_id: str | None) -> tuple[GroupMetadata | None, int]:
        """The group a member-level request (Sync/Heartbeat/Leave) names, or the error."""
        err = self._check(group_id)
        if err:
            return None, err
        group = self.groups.get(group_id or "")
        if group is None:
            return None, Errors.UNKNOWN_MEMBER_ID
        if group.is_(DEAD):
            return None, Errors.COORDINATOR_NOT_AVAILABLE
        return group, Errors.NONE


class _JoinRequest:
    """A JoinGroup request with its version differences resolved."""

    def __init__(self, body: Any, version: int, client_id: str, client_host: str) -> None:
        self.group_id: str = body.group_id
        self.version = version
        self.client_id = client_id
        self.client_host = client_host
        self.session_timeout_ms: int = body.session_timeout_ms
        rebalance = body.rebalance_timeout_ms if version >= 1 else -1
        # v0 has no rebalance timeout: the session timeout bounds the rebalance.
        self.rebalance_timeout_ms: int = rebalance if rebalance > 0 else self.session_timeout_ms
        self.instance_id: str | None = body.group_instance_id if version >= 5 else None
        self.protocol_type: str = body.protocol_type
        self.protocols: list[tuple[str, bytes]] = [(p.name, bytes(p.metadata))
                                                   for p in body.protocols]
        self.names = [name for name, _ in self.protocols]
        self.reason: str | None = body.reason if version >= 8 else None   # KIP-800

    def error(self, error: int, member_id: str = "") -> CoordinatorResult:
        return CoordinatorResult(response=join_error(self.version, error, member_id))


MAX_CLIENT_REASON = 256   # a client's reason is kept and logged on one line, this long at most


def _with_client_reason(what: str, client_reason: str | None) -> str:
    """The coordinator's reason and the client's (KIP-800), on one line and bounded: the
    client's text may be up to 32 KiB of anything, and 50 are kept per group."""
    if not client_reason:
        return what
    text = " ".join(client_reason.split())
    if len(text) > MAX_CLIENT_REASON:
        text = text[:MAX_CLIENT_REASON] + "..."
    return f"{what}; client reason: {text}"


def _instance(instance_id: str | None) -> str:
    return f", group instance id {instance_id}" if instance_id else ""
