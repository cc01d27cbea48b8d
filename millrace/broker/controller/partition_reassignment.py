"""Partition reassignment (KIP-455): moving a partition's replicas to a new set of brokers.

Java counterpart: ``KafkaController.onPartitionReassignment`` and its helpers
(``updateCurrentReassignment``, ``isReassignmentComplete``,
``moveReassignedPartitionLeaderIfRequired``, ``stopRemovedReplicasOfReassignedPartition``),
the AlterPartitionReassignments / ListPartitionReassignments events, and
``ReassignPartitionLeaderElectionStrategy``.  A base of ``KafkaController``; pure like it.

Names: ORS the original replicas, TRS the target replicas, RS = TRS + ORS the replica set
while the reassignment runs, AR = TRS - ORS the adding replicas, RR = ORS - TRS the
removing replicas.  The topic znode stores RS with AR and RR, so a new controller resumes
where the old one stopped; RS is rewritten to TRS last, because until then it is the
only place ORS is kept.

Theory of operation, per partition:

- U (update): RS/AR/RR are written to the topic znode (the cache takes them once
  ZooKeeper has them).  A reassignment that replaces or cancels one in progress leaves
  some replicas out of the new RS ("unneeded"): they leave the ISR in the next state write
  and get StopReplica(delete=true).
- A (TRS not yet all in the ISR): the leader epoch rises by one (same leader and ISR, the
  unneeded replicas out) and LeaderAndIsr with the new RS goes to ORS (isNew=false) and to
  AR (isNew=true: the new replicas create their logs and start fetching from the leader).
  Each later ISR change (``isr_change`` notification or AlterPartition) checks again.
- B (every TRS member in the ISR): one state write moves the leader into TRS if it is
  leaving or dead (the first live TRS member in the ISR) and takes RR out of the ISR,
  leader epoch + 1; then the topic znode gets RS = TRS with no AR/RR; then LeaderAndIsr to
  TRS, UpdateMetadata to every broker, StopReplica(delete=true) to RR.  If no TRS member
  can lead, the reassignment stays in progress and is retried on the next trigger.

Triggers: the API, every ISR change of a reassigning partition, a broker start-up that
brings back a TRS member (phase A again: its replica gets LeaderAndIsr), and failover
(every reassignment found in the topic znodes resumes).  A topic being reassigned is not
deleted until its reassignments finish; a topic queued for deletion cannot be reassigned.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from millrace.broker.controller import election as el
from millrace.broker.controller.controller_context import (
    NO_LEADER,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
)
from millrace.broker.controller.controller_result import ControllerResult
from millrace.broker.controller.event_engine import ControllerEventEngine, Decide
from millrace.common.errors import Errors
from millrace.common.topic_partition import TopicPartition


class PartitionReassignmentEvents(ControllerEventEngine):
    """The reassignment events and steps.  Owned by the controller's event thread."""

    # ================================================================== API events
    def on_alter_partition_reassignments(
            self, targets: Mapping[TopicPartition, Sequence[int] | None], *,
            allow_replication_factor_change: bool = True) -> ControllerResult:
        """AlterPartitionReassignments (key 45): per partition a target replica list, or
        None to cancel.  The final result's ``reassignment_results`` holds NONE (submitted)
        or UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT (empty, duplicate,
        negative, or not live new brokers), INVALID_REPLICATION_FACTOR (when the caller
        forbade a change of it, KIP-1066) or NO_REASSIGNMENT_IN_PROGRESS (a cancel of
        nothing)."""
        wanted = dict(targets)
        if not self.active:
            return ControllerResult(done=True, error=Errors.NOT_CONTROLLER,
                                    reassignment_results={tp: Errors.NOT_CONTROLLER
                                                          for tp in wanted})
        ctx = self.context

        def submit() -> None:
            ev = self._event
            accepted: dict[TopicPartition, ReplicaAssignment] = {}
            for tp in sorted(wanted):
                target = wanted[tp]
                error = self._validate_reassignment(tp, target, allow_replication_factor_change)
                if error is not Errors.NONE:
                    ev.reassignments[tp] = error
                    continue
                current = ctx.full_replica_assignment(tp)
                accepted[tp] = current.reassign_to(current.origin_replicas if target is None
                                                   else target)
                ev.reassignments[tp] = Errors.NONE
            self._reassign(accepted)
        return self._start(submit)

    def list_partition_reassignments(self, partitions: Iterable[TopicPartition] | None = None
                                     ) -> ControllerResult:
        """ListPartitionReassignments (key 46): the ongoing reassignments (RS, AR, RR) among
        ``partitions``, or all of them; partitions not being reassigned are left out."""
        if not self.active:
            return ControllerResult(done=True, error=Errors.NOT_CONTROLLER)
        ongoing = self.context.partitions_being_reassigned
        wanted = set(ongoing) if partitions is None else set(partitions)
        return ControllerResult(done=True, ongoing_reassignments={
            tp: ongoing[tp] for tp in sorted(wanted) if tp in ongoing})

    def _validate_reassignment(self, tp: TopicPartition, target: Sequence[int] | None,
                               allow_replication_factor_change: bool) -> Errors:
        ctx = self.context
        if (ctx.is_topic_queued_for_deletion(tp.topic)
                or tp.partition not in ctx.assignments.get(tp.topic, {})):
            return Errors.UNKNOWN_TOPIC_OR_PARTITION
        current = ctx.full_replica_assignment(tp)
        if target is None:
            return (Errors.NONE if current.is_being_reassigned
                    else Errors.NO_REASSIGNMENT_IN_PROGRESS)
        if not target or len(set(target)) != len(target) or any(r < 0 for r in target):
            return Errors.INVALID_REPLICA_ASSIGNMENT
        if not set(current.reassign_to(target).adding_replicas) <= ctx.live_broker_ids:
            return Errors.INVALID_REPLICA_ASSIGNMENT
        if not allow_replication_factor_change and len(target) != len(current.origin_replicas):
            return Errors.INVALID_REPLICATION_FACTOR
        return Errors.NONE

    # ================================================================== the steps
    def _then(self, *steps: Callable[[], None]) -> None:
        """Run ``steps`` right after the current one (before the event's later steps)."""
        self._steps.extendleft(reversed(steps))

    def _reassign(self, reassignments: Mapping[TopicPartition, ReplicaAssignment]) -> None:
        """Phase U for each partition, then A or B once ZooKeeper holds the new RS."""
        ctx = self.context
        ev = self._event
        unneeded: dict[TopicPartition, tuple[int, ...]] = {}
        for tp, new in sorted(reassignments.items()):
            current = ctx.full_replica_assignment(tp)
            gone = tuple(r for r in current.replicas if r not in new.replicas)
            if current == new:
                unneeded[tp] = gone
                continue

            def written(tp: TopicPartition = tp, gone: tuple[int, ...] = gone) -> None:
                unneeded[tp] = gone

            def failed(e: Errors, tp: TopicPartition = tp) -> None:
                ev.reassignments[tp] = e
            self._write_assignment(tp, new, written, failed)

        def progress() -> None:
            for tp, gone in sorted(unneeded.items()):
                self._progress(tp, gone)
        self._then(progress)

    def _resume_reassignments(self,
                              should: Callable[[TopicPartition, ReplicaAssignment], bool]) -> None:
        ctx = self.context
        for tp, full in sorted(ctx.partitions_being_reassigned.items()):
            if should(tp, full) and not ctx.is_topic_queued_for_deletion(tp.topic):
                self._progress(tp, ())

    def _maybe_complete_reassignments(self, partitions: Iterable[TopicPartition]) -> None:
        """After ISR changes: finish the reassignments whose TRS is now all in the ISR."""
        for tp in sorted(set(partitions)):
            if tp in self.context.partitions_being_reassigned and self._is_complete(tp):
                self._progress(tp, ())

    def _is_complete(self, tp: TopicPartition) -> bool:
        full = self.context.full_replica_assignment(tp)
        s = self.context.leadership.get(tp)
        return not full.is_being_reassigned or (
            s is not None and set(full.target_replicas) <= set(s.isr))

    def _progress(self, tp: TopicPartition, unneeded: tuple[int, ...]) -> None:
        """Phase A or B of one partition whose RS ZooKeeper already holds."""
        ctx = self.context
        if ctx.leadership.get(tp) is None:
            self._batch.add_stop_replica(list(unneeded), tp, delete_partition=True)
            return
        if not self._is_complete(tp):
            self._decide_and_write(tp, self._phase_a_decision(tp, unneeded),
                                   lambda s: self._send_reassigning(tp, s, unneeded),
                                   lambda _e: None)
            return
        full = ctx.full_replica_assignment(tp)
        final = ReplicaAssignment(full.target_replicas)
        removed = tuple(dict.fromkeys((*full.removing_replicas, *unneeded)))

        def finish() -> None:
            target = ctx.replica_assignment(tp)
            self._batch.add_leader_and_isr([r for r in target if ctx.is_replica_online(r, True)],
                                           tp, ctx.leadership[tp])
            self._batch.add_stop_replica(list(removed), tp, delete_partition=True)
            self._on_reassignment_completed(tp)

        def leader_moved(_s: LeaderIsrAndControllerEpoch) -> None:
            if ctx.full_replica_assignment(tp) == final:
                finish()
            else:
                self._write_assignment(tp, final, finish)

        def not_now(_e: Errors) -> None:            # no TRS member can lead yet: retry later
            self._batch.add_stop_replica(list(unneeded), tp, delete_partition=True)
        self._decide_and_write(tp, self._phase_b_decision(tp, full, removed), leader_moved,
                               not_now)

    def _phase_a_decision(self, tp: TopicPartition, unneeded: tuple[int, ...]) -> Decide:
        ctx = self.context

        def decide(s: LeaderIsrAndControllerEpoch) -> LeaderIsrAndControllerEpoch | None:
            isr = tuple(r for r in s.isr if r not in unneeded) or s.isr[:1]
            leader = s.leader
            if leader in unneeded:
                leader = next((r for r in ctx.replica_assignment(tp)
                               if r in isr and ctx.is_replica_online(r)), NO_LEADER)
            return s.new_leader_and_isr(leader, isr, ctx.epoch)
        return decide

    def _phase_b_decision(self, tp: TopicPartition, full: ReplicaAssignment,
                          removed: tuple[int, ...]) -> Decide:
        ctx = self.context
        target = full.target_replicas

        def decide(s: LeaderIsrAndControllerEpoch) -> LeaderIsrAndControllerEpoch | None:
            if not set(target) <= set(s.isr):
                return None
            leader = s.leader
            if leader not in target or not ctx.is_replica_online(leader):
                elected = el.reassignment_leader(target, s.isr, ctx.live_broker_ids)
                if elected is None:
                    return None
                leader = elected.leader
            return s.new_leader_and_isr(leader, [r for r in s.isr if r not in removed],
                                        ctx.epoch)
        return decide

    def _send_reassigning(self, tp: TopicPartition, s: LeaderIsrAndControllerEpoch,
                          unneeded: tuple[int, ...]) -> None:
        """Phase A's requests: the new RS to ORS, and to AR as new replicas."""
        full = self.context.full_replica_assignment(tp)
        self._batch.add_leader_and_isr(list(full.origin_replicas), tp, s)
        self._batch.add_leader_and_isr(list(full.adding_replicas), tp, s, is_new=True)
        self._batch.add_stop_replica(list(unneeded), tp, delete_partition=True)

    def _on_reassignment_completed(self, tp: TopicPartition) -> None:
        """Hook: ``KafkaController`` resumes a topic deletion that waited for it."""
