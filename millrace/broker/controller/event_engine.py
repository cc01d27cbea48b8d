"""``ControllerEventEngine``: how the controller turns events into steps, writes and requests.

The base of ``KafkaController``; it knows nothing of brokers or topics, only how an event
runs.  An event is a list of *steps*, run in order; a step reads the context, adds
requests to the batch and may ask for conditional writes of partition ``state`` znodes.
Nothing a write decides is believed before ZooKeeper accepts it: the context keeps the
stored state until the outcome comes back, and only then are the LeaderAndIsr /
UpdateMetadata for that partition added.  The next step starts once every write of the
previous one has an outcome, so each step sees the state its predecessor committed.  The
batch is flushed after every step and every batch of outcomes, in Kafka's order:
LeaderAndIsr, UpdateMetadata, StopReplica.

Topic znode writes (a reassignment's ``UpdateTopicAssignment``) follow the same rule:
a step asks for one partition's new assignment, the changes asked for one topic in one
step become one write of the whole znode at the end of the step, and the cache takes
them (and the callers hear of it) only when ZooKeeper accepted the write.

Fencing: a write that fails with BADVERSION comes back with the stored state; if that
was written by a newer controller epoch the change is abandoned (a stale controller never
overwrites newer state), else the same decision is recomputed from the stored state and
written again at its version.  A failed epoch check means another controller exists:
the controller resigns and stops producing anything.

An election is *unclean* when ZooKeeper accepts a leader that was not in the ISR it was
elected from: ``on_unclean_election`` hears of it then (the service marks Kafka's
``UncleanLeaderElectionsPerSec``), once per committed election, never for a decision
that was retried or abandoned.

Owned by the controller's event thread; one event at a time (an event that arrives while
writes are in flight is a bug in the caller: ``ControllerStateError``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field, replace

from millrace.broker.controller.broker_requests import ControllerBrokerRequestBatch
from millrace.broker.controller.controller_context import (
    ControllerContext,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
)
from millrace.broker.controller.controller_result import ControllerConfig, ControllerResult
from millrace.broker.controller.zk_writes import (
    CreatePartitionState,
    UpdatePartitionState,
    UpdateTopicAssignment,
    ZkWrite,
    ZkWriteError,
    ZkWriteResult,
)
from millrace.common.errors import Errors
from millrace.common.topic_partition import TopicPartition

Decide = Callable[[LeaderIsrAndControllerEpoch], LeaderIsrAndControllerEpoch | None]


class ControllerStateError(RuntimeError):
    """An event arrived while the previous one still had writes in flight."""


@dataclass
class _Pending:
    """A partition-state write waiting for its outcome."""

    write: CreatePartitionState | UpdatePartitionState
    decide: Decide | None                 # recompute from a re-read state (None: no retry)
    on_success: Callable[[LeaderIsrAndControllerEpoch], None]
    on_failure: Callable[[Errors], None]


@dataclass
class _PendingAssignment:
    """A topic znode write waiting for its outcome, with every asker's callbacks."""

    write: UpdateTopicAssignment
    on_success: list[Callable[[], None]]
    on_failure: list[Callable[[Errors], None]]


@dataclass
class _Event:
    """The answers of the event in progress, handed out on its last result."""

    error: Errors = Errors.NONE
    remaining_for: int | None = None
    elections: dict[TopicPartition, int | Errors] = field(default_factory=dict)
    alters: dict[TopicPartition, LeaderIsrAndControllerEpoch | Errors] = field(
        default_factory=dict)
    reassignments: dict[TopicPartition, Errors] = field(default_factory=dict)


class ControllerEventEngine:
    """Steps, writes in flight and their outcomes.  Owned by the controller's event thread."""

    def __init__(self, controller_id: int, config: ControllerConfig | None = None) -> None:
        self.controller_id = controller_id
        self.config = config or ControllerConfig()
        self.context = ControllerContext()
        self.active = False
        self._batch = ControllerBrokerRequestBatch(controller_id, self.context)
        self._steps: deque[Callable[[], None]] = deque()
        self._pending: dict[TopicPartition, _Pending] = {}
        # topic znode writes: asked for in this step, and in flight
        self._assignment_changes: dict[str, dict[int, ReplicaAssignment]] = {}
        self._assignment_callbacks: dict[str, _PendingAssignment] = {}
        self._pending_topics: dict[str, _PendingAssignment] = {}
        self._result = ControllerResult()
        self._event = _Event()
        # told of each committed unclean election (a plain callback: no I/O here)
        self.on_unclean_election: Callable[[TopicPartition], None] = lambda _tp: None

    @property
    def epoch(self) -> int:
        return self.context.epoch

    def _in_flight(self) -> bool:
        return bool(self._pending or self._pending_topics or self._assignment_changes)

    def _clear_in_flight(self) -> None:
        self._steps.clear()
        self._pending.clear()
        self._pending_topics.clear()
        self._assignment_changes.clear()
        self._assignment_callbacks.clear()

    def _start(self, *steps: Callable[[], None]) -> ControllerResult:
        if self._in_flight() or self._steps:
            raise ControllerStateError("the previous event still has writes in flight")
        self._result, self._event = ControllerResult(), _Event()
        self._steps.extend(steps)
        return self._advance()

    def _advance(self) -> ControllerResult:
        self._flush()
        while not self._in_flight() and self._steps:
            self._steps.popleft()()
            self._flush()
        result, self._result = self._result, ControllerResult()
        if not self._in_flight():
            result.done = True
            ev = self._event
            result.error = ev.error
            result.election_results = dict(ev.elections)
            result.alter_partition_results = dict(ev.alters)
            result.reassignment_results = dict(ev.reassignments)
            if ev.remaining_for is not None:
                result.remaining_partitions = self.context.partition_leaders_on_broker(
                    ev.remaining_for)
        return result

    def _flush(self) -> None:
        self._flush_assignments()
        self._result.requests += self._batch.flush(self.context.epoch)

    def _write_assignment(self, tp: TopicPartition, assignment: ReplicaAssignment,
                          on_success: Callable[[], None],
                          on_failure: Callable[[Errors], None] | None = None) -> None:
        """Ask for ``tp``'s new assignment in its topic znode; the cache takes it, then
        ``on_success`` runs, once ZooKeeper accepted the write."""
        self._assignment_changes.setdefault(tp.topic, {})[tp.partition] = assignment
        callbacks = self._assignment_callbacks.setdefault(
            tp.topic, _PendingAssignment(UpdateTopicAssignment(tp.topic, None, {}), [], []))
        callbacks.on_success.append(on_success)
        callbacks.on_failure.append(on_failure or (lambda _e: None))

    def _flush_assignments(self) -> None:
        ctx = self.context
        for topic in sorted(self._assignment_changes):
            if topic in self._pending_topics:
                continue                          # one write per topic in flight
            changes = self._assignment_changes.pop(topic)
            callbacks = self._assignment_callbacks.pop(topic)
            if topic not in ctx.assignments:
                for failed in callbacks.on_failure:
                    failed(Errors.UNKNOWN_TOPIC_OR_PARTITION)
                continue
            full = {p: ctx.full_replica_assignment(TopicPartition(topic, p))
                    for p in sorted(ctx.assignments[topic])}
            full.update(changes)
            topic_id = ctx.topic_ids.get(topic)
            write = UpdateTopicAssignment(topic, topic_id if topic_id and topic_id.int else None,
                                          full)
            self._pending_topics[topic] = _PendingAssignment(write, callbacks.on_success,
                                                             callbacks.on_failure)
            self._zk(write)

    def _zk(self, write: ZkWrite) -> None:
        self._result.zk_writes.append(write)

    def _write_state(self, tp: TopicPartition, new: LeaderIsrAndControllerEpoch,
                     decide: Decide | None, on_success: Callable[[LeaderIsrAndControllerEpoch], None],
                     on_failure: Callable[[Errors], None] | None = None) -> None:
        current = self.context.leadership.get(tp)
        write: CreatePartitionState | UpdatePartitionState
        if current is None:
            write = CreatePartitionState(tp, new)
        else:
            write = UpdatePartitionState(tp, new, current.zk_version)
        self._pending[tp] = _Pending(write, decide, on_success, on_failure or (lambda _e: None))
        self._zk(write)

    def _decide_and_write(self, tp: TopicPartition, decide: Decide,
                          on_success: Callable[[LeaderIsrAndControllerEpoch], None],
                          on_failure: Callable[[Errors], None]) -> None:
        """Write ``decide(current)`` unless it is None or the stored state is newer than us."""
        current = self.context.leadership.get(tp)
        if current is None:
            on_failure(Errors.UNKNOWN_TOPIC_OR_PARTITION)
            return
        if current.controller_epoch > self.context.epoch:
            on_failure(Errors.NOT_CONTROLLER)     # written by a newer controller: hands off
            return
        new = decide(current)
        if new is None:
            on_failure(Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE)
            return
        self._write_state(tp, new, decide, on_success, on_failure)

    def on_zk_write_results(self, results: Iterable[ZkWriteResult]) -> ControllerResult:
        """The outcomes of the last result's writes; returns the next step's result."""
        for r in results:
            if r.error is ZkWriteError.CONTROLLER_MOVED:
                return self.resign()
            if isinstance(r.write, UpdateTopicAssignment):
                self._apply_assignment_outcome(r)
                continue
            if not isinstance(r.write, CreatePartitionState | UpdatePartitionState):
                continue
            p = self._pending.pop(r.write.tp, None)
            if p is None or p.write != r.write:
                continue
            self._apply_outcome(p, r)
        return self._advance()

    def _apply_assignment_outcome(self, r: ZkWriteResult) -> None:
        assert isinstance(r.write, UpdateTopicAssignment)
        topic = r.write.topic
        p = self._pending_topics.get(topic)
        if p is None or p.write != r.write:
            return
        del self._pending_topics[topic]
        if r.error is not None:
            for failed in p.on_failure:
                failed(Errors.UNKNOWN_TOPIC_OR_PARTITION)   # the topic znode is gone
            return
        for partition, assignment in r.write.assignment.items():
            self.context.update_full_replica_assignment(TopicPartition(topic, partition),
                                                        assignment)
        for done in p.on_success:
            done()

    def _apply_outcome(self, p: _Pending, r: ZkWriteResult) -> None:
        tp = p.write.tp
        written = p.write.state if isinstance(p.write, CreatePartitionState) else p.write.new_state
        if r.error is None:
            if r.zk_version >= 0:
                written = replace(written, zk_version=r.zk_version)
            before = self.context.leadership.get(tp)
            if before is not None and written.leader >= 0 and written.leader != before.leader \
                    and written.leader not in before.isr:
                self.on_unclean_election(tp)
            self.context.leadership[tp] = written
            if self.context.is_replica_online(written.leader, include_shutting_down=True):
                self.context.offline_partitions.discard(tp)   # elected: Online again
            p.on_success(written)
            return
        stored = r.stored
        if stored is None:
            p.on_failure(Errors.UNKNOWN_TOPIC_OR_PARTITION)
            return
        if tp.partition in self.context.assignments.get(tp.topic, {}):
            self.context.leadership[tp] = stored
        if r.error is ZkWriteError.NODE_EXISTS:
            p.on_success(stored)                 # someone initialised it: adopt theirs
            return
        if p.decide is None:
            p.on_failure(Errors.INVALID_UPDATE_VERSION)
            return
        # re-decided from the stored state, unless a newer controller wrote it
        self._decide_and_write(tp, p.decide, p.on_success, p.on_failure)

    def resign(self) -> ControllerResult:
        """Stop being the controller (epoch check failed, session expired, /controller gone)."""
        self.active = False
        self._clear_in_flight()
        self._batch.flush(self.context.epoch)
        self._result = ControllerResult()
        return ControllerResult(done=True, resigned=True)

    def run(self, result: ControllerResult,
            execute: Callable[[ZkWrite], ZkWriteResult]) -> ControllerResult:
        """Drive ``result`` to completion with a synchronous ``execute`` of each write;
        returns every write and request in order and the event's answers."""
        total = ControllerResult()
        total.extend(result)
        while result.zk_writes and not result.resigned:
            result = self.on_zk_write_results([execute(w) for w in result.zk_writes])
            total.extend(result)
        return total

    # ================================================================== request helpers
    def _online_replicas(self, tp: TopicPartition) -> list[int]:
        return [r for r in self.context.replica_assignment(tp)
                if self.context.is_replica_online(r)]

    def _send_state(self, recipients: Callable[[TopicPartition], Collection[int]],
                    is_new: bool = False) -> Callable[[TopicPartition], Callable[
                        [LeaderIsrAndControllerEpoch], None]]:
        def for_tp(tp: TopicPartition) -> Callable[[LeaderIsrAndControllerEpoch], None]:
            def done(state: LeaderIsrAndControllerEpoch) -> None:
                if self.context.is_topic_queued_for_deletion(tp.topic):
                    self._batch.add_update_metadata(
                        self.context.live_or_shutting_down_broker_ids, [tp])
                else:
                    self._batch.add_leader_and_isr(list(recipients(tp)), tp, state, is_new)
            return done
        return for_tp

    def _elect(self, tp: TopicPartition, decide: Decide,
               recipients: Callable[[TopicPartition], Collection[int]],
               failure: Errors | None = None) -> None:
        """Elect by ``decide``; with ``failure`` (ElectLeaders), record the new leader or the
        error for the event's ``election_results``."""
        ev = self._event
        send = self._send_state(recipients)(tp)

        def ok(s: LeaderIsrAndControllerEpoch) -> None:
            send(s)
            if failure is not None:
                ev.elections[tp] = s.leader

        def failed(e: Errors) -> None:
            if failure is not None:
                ev.elections[tp] = failure if e is Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE else e
        self._decide_and_write(tp, decide, ok, failed)
