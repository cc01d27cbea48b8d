"""``KafkaController``: Kafka's ZooKeeper-mode controller as a pure, steppable state machine.

Java counterpart: ``kafka.controller.KafkaController`` with its ``PartitionStateMachine``
and ``ReplicaStateMachine``.  Like the group coordinator, it does no I/O: every event is a
method call with plain values (``now_ms`` where time matters) and returns a
``ControllerResult`` -- ZooKeeper writes to run and requests to send.  The ZooKeeper
service that owns it reads the znodes, calls it from one thread, runs the writes under the
controller-epoch check and reports their outcome with ``on_zk_write_results`` (or drives
a whole event with ``run``); ``event_engine`` explains steps, outcomes and fencing.

Events, in Kafka's order within each:

- failover: UpdateMetadata (brokers only) to every broker, then LeaderAndIsr to every live
  replica, then dead replicas out of the ISRs and elections for New/Offline partitions,
  then pending preferred elections and topic deletions; auto rebalance starts after 5 s;
- broker change: new brokers (startup), bounced ones (larger epoch: failure, then
  startup), dead ones (failure); startup = UpdateMetadata to the others, full metadata to
  the new, LeaderAndIsr for its replicas, elections for New/Offline partitions;
- topic change: new partitions New -> Online (first live replica leads, live ones in sync);
- deletion, ISR change notifications, AlterPartition, controlled shutdown, ElectLeaders,
  the preferred-election znode and the periodic auto rebalance;
- partition reassignment (AlterPartitionReassignments / ListPartitionReassignments) in
  ``partition_reassignment``, resumed by failover, broker start-ups and ISR changes.

Leader epochs rise by one per controller decision (elections, a replica leaving the ISR
because its broker died or is shutting down); AlterPartition (a leader's ISR change)
bumps only the znode version.  The ISR never empties: when its last member dies it stays
in the ISR and the leader becomes -1, so a clean election can pick it when it returns.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import replace

from millrace.broker.controller import election as el
from millrace.broker.controller.controller_context import (
    INITIAL_LEADER_EPOCH,
    NO_LEADER,
    LeaderIsrAndControllerEpoch,
)
from millrace.broker.controller.controller_result import (
    AUTO_REBALANCE_FIRST_DELAY_MS,
    AlterPartitionItem,
    ControllerConfig,
    ControllerResult,
    ElectionType,
    FailoverState,
)
from millrace.broker.controller.event_engine import Decide
from millrace.broker.controller.partition_reassignment import PartitionReassignmentEvents
from millrace.broker.controller.topic_deletion import TopicDeletionManager
from millrace.broker.controller.zk_writes import (
    DeleteIsrChangeNotifications,
    DeletePreferredReplicaElection,
)
from millrace.broker.metadata.cluster_metadata import BrokerRegistration, TopicInfo
from millrace.common.errors import Errors
from millrace.common.topic_partition import TopicPartition


class KafkaController(PartitionReassignmentEvents):
    """The active controller's logic.  Owned by the controller's event thread."""

    def __init__(self, controller_id: int, config: ControllerConfig | None = None) -> None:
        super().__init__(controller_id, config)
        self._deletion = TopicDeletionManager(self.context, self._batch)
        self._next_rebalance_ms: int | None = None

    def resign(self) -> ControllerResult:
        """Stop being the controller (epoch check failed, session expired, /controller gone)."""
        self._next_rebalance_ms = None
        return super().resign()

    # ================================================================== failover
    def on_controller_failover(self, state: FailoverState, now_ms: int) -> ControllerResult:
        """This broker won ``/controller`` with ``state.epoch``: load the cluster, tell every
        broker the metadata, then every replica its state, then elect where needed."""
        ctx = self.context
        self._clear_in_flight()
        ctx.reset()
        self._deletion.reset()
        ctx.epoch, ctx.epoch_zk_version = state.epoch, state.epoch_zk_version
        ctx.add_live_brokers(state.brokers)
        for t in state.topics:
            ctx.add_topic(t.name, t.topic_id,
                          {p: tuple(r) for p, r in t.assignment.items()}, t.configs)
        ctx.leadership.update({tp: s for tp, s in state.partition_states.items()
                               if tp.partition in ctx.assignments.get(tp.topic, {})})
        ctx.mark_offline_if_leaderless(ctx.all_partitions())
        for tp, full in state.reassignments.items():
            if tp.partition in ctx.assignments.get(tp.topic, {}):
                ctx.update_full_replica_assignment(tp, full)
        self.active = True
        self._next_rebalance_ms = now_ms + AUTO_REBALANCE_FIRST_DELAY_MS

        def clear_notifications() -> None:
            if state.isr_change_notifications:
                self._zk(DeleteIsrChangeNotifications(tuple(state.isr_change_notifications)))
            self._deletion.queue(state.topics_to_be_deleted, self.config.delete_topic_enable,
                                 self._zk)
            self._batch.add_update_metadata(ctx.live_or_shutting_down_broker_ids)

        def online_replicas() -> None:
            for tp in ctx.all_partitions():
                s = ctx.leadership.get(tp)
                if s is not None and not ctx.is_topic_queued_for_deletion(tp.topic):
                    self._batch.add_leader_and_isr(self._online_replicas(tp), tp, s)

        def offline_replicas_and_elections() -> None:
            dead = {r for tp in ctx.all_partitions() for r in ctx.replica_assignment(tp)
                    if not ctx.is_replica_online(r)}
            self._replicas_offline(dead)
            self._trigger_online_partitions()

        return self._start(clear_notifications, online_replicas,
                           offline_replicas_and_elections,
                           lambda: self._resume_reassignments(lambda _tp, _a: True),
                           lambda: self._zk_preferred_election(state.preferred_replica_election),
                           self._deletion_step)

    # ================================================================== broker changes
    def on_broker_change(self, brokers: Iterable[BrokerRegistration],
                         now_ms: int) -> ControllerResult:
        """The children of ``/brokers/ids`` changed: classify new, dead and bounced (same id,
        larger epoch) brokers and handle them in Kafka's order."""
        if not self.active:
            return ControllerResult(done=True, error=Errors.NOT_CONTROLLER)
        ctx = self.context
        current = {b.node_id: b for b in brokers}
        known = ctx.live_brokers
        new = sorted(set(current) - set(known))
        dead = sorted(set(known) - set(current))
        bounced = sorted(b for b in set(current) & set(known)
                         if current[b].epoch > known[b].epoch)
        updated = sorted(b for b in set(current) & set(known)
                         if current[b].epoch == known[b].epoch and current[b] != known[b])
        steps: list[Callable[[], None]] = []
        if new:
            steps += [lambda: ctx.add_live_brokers(current[b] for b in new),
                      *self._startup_steps(new)]
        if bounced:
            steps += [lambda: ctx.remove_live_brokers(bounced), lambda: self._failure(bounced),
                      lambda: ctx.add_live_brokers(current[b] for b in bounced),
                      *self._startup_steps(bounced)]
        if dead:
            steps += [lambda: ctx.remove_live_brokers(dead), lambda: self._failure(dead)]
        if updated:
            steps += [lambda: ctx.add_live_brokers(current[b] for b in updated),
                      lambda: self._batch.add_update_metadata(
                          ctx.live_or_shutting_down_broker_ids)]
        return self._start(*steps)

    def _startup_steps(self, new: list[int]) -> list[Callable[[], None]]:
        ctx = self.context

        def tell_existing() -> None:
            self._batch.add_update_metadata(ctx.live_or_shutting_down_broker_ids - set(new))

        def tell_new() -> None:
            self._batch.add_update_metadata(new, [tp for tp in ctx.all_partitions()
                                                  if tp in ctx.leadership])

        def online_replicas() -> None:
            for tp in ctx.all_partitions():
                s = ctx.leadership.get(tp)
                on_new = [b for b in ctx.replica_assignment(tp) if b in new]
                if s is not None and on_new and not ctx.is_topic_queued_for_deletion(tp.topic):
                    self._batch.add_leader_and_isr(on_new, tp, s)

        def resume_deletions() -> None:
            self._deletion.on_broker_startup(new)
            self._deletion_step()

        def resume_reassignments() -> None:
            self._resume_reassignments(lambda _tp, a: any(b in new for b in a.target_replicas))

        return [tell_existing, tell_new, online_replicas, self._trigger_online_partitions,
                resume_reassignments, resume_deletions]

    def _failure(self, dead: list[int]) -> None:
        """Replicas on ``dead`` go offline: their partitions elect and shrink their ISR."""
        self.context.mark_offline_if_leaderless(self.context.all_partitions())
        changed = self._replicas_offline(set(dead))
        self._deletion.on_broker_failure(dead)
        if not changed:
            self._batch.add_update_metadata(self.context.live_or_shutting_down_broker_ids)

    def _replicas_offline(self, dead: set[int]) -> bool:
        """One write per affected partition: a new leader if it lost its leader, and the
        dead replicas out of the ISR (its last member is kept; leader -1 if none is live)."""
        ctx = self.context
        if not dead:
            return False
        touched = False
        for tp in ctx.all_partitions():
            if (tp not in ctx.leadership or ctx.is_topic_queued_for_deletion(tp.topic)
                    or not dead & set(ctx.replica_assignment(tp))):
                continue
            decide = self._offline_decision(tp, dead)
            if decide(ctx.leadership[tp]) is None:
                continue
            touched = True
            self._decide_and_write(tp, decide, self._send_state(self._online_replicas)(tp),
                                   lambda _e: None)
        return touched

    def _offline_decision(self, tp: TopicPartition, dead: set[int]) -> Decide:
        ctx = self.context

        def decide(s: LeaderIsrAndControllerEpoch) -> LeaderIsrAndControllerEpoch | None:
            if tp in ctx.offline_partitions or not ctx.is_replica_online(
                    s.leader, include_shutting_down=True):
                elected = el.offline_partition_leader(
                    ctx.replica_assignment(tp), s.isr, ctx.live_broker_ids,
                    ctx.unclean_election_enabled(tp.topic,
                                                 self.config.unclean_leader_election_enable),
                    s.leader_recovery_state)
                if elected is not None:
                    return s.new_leader_and_isr(elected.leader, elected.isr, ctx.epoch,
                                                elected.leader_recovery_state)
                isr = _shrink_isr(s.isr, dead, s.leader)
                if s.leader == NO_LEADER and isr == s.isr:
                    return None
                return s.new_leader_and_isr(NO_LEADER, isr, ctx.epoch)
            isr = _shrink_isr(s.isr, dead, s.leader)
            return None if isr == s.isr else s.new_leader_and_isr(s.leader, isr, ctx.epoch)
        return decide

    def _trigger_online_partitions(self, topic: str | None = None) -> None:
        """Initialise New partitions and elect leaders for Offline ones."""
        ctx = self.context
        for tp in ctx.partitions_needing_election(topic):
            if ctx.is_new(tp):
                self._init_partition(tp)
            else:
                self._decide_and_write(tp, self._offline_decision(tp, set()),
                                       self._send_state(self._online_replicas)(tp),
                                       lambda _e: None)

    def _init_partition(self, tp: TopicPartition) -> None:
        ctx = self.context
        elected = el.new_partition_leader(ctx.replica_assignment(tp), ctx.live_broker_ids)
        if elected is None:
            return                              # no replica alive: stays New
        state = LeaderIsrAndControllerEpoch(elected.leader, INITIAL_LEADER_EPOCH, elected.isr,
                                            ctx.epoch)
        self._write_state(tp, state, None,
                          self._send_state(lambda t: ctx.leadership[t].isr, is_new=True)(tp))

    # ================================================================== topics
    def on_topic_change(self, topics: Iterable[TopicInfo]) -> ControllerResult:
        """The children of ``/brokers/topics`` (or one topic's partitions) changed: new
        topics and new partitions go New -> Online; topics that vanished are forgotten."""
        if not self.active:
            return ControllerResult(done=True, error=Errors.NOT_CONTROLLER)
        ctx = self.context
        infos = {t.name: t for t in topics}
        for gone in sorted(ctx.all_topics - set(infos)):
            ctx.remove_topic(gone)
            self._deletion.forget(gone)
        new_partitions: list[TopicPartition] = []
        for name, t in sorted(infos.items()):
            known = ctx.assignments.get(name, {})
            added = {p: tuple(r) for p, r in t.assignment.items() if p not in known}
            if added:
                ctx.add_topic(name, t.topic_id, added, t.configs)
                new_partitions += [TopicPartition(name, p) for p in sorted(added)]
            else:
                ctx.topic_configs[name] = dict(t.configs)

        def create() -> None:
            for tp in new_partitions:
                if ctx.is_new(tp):
                    self._init_partition(tp)
        return self._start(create)

    def on_topic_config_change(self, topic: str, configs: Mapping[str, str]) -> ControllerResult:
        """A topic's configs changed; enabling unclean election elects its offline partitions."""
        if not self.active:
            return ControllerResult(done=True, error=Errors.NOT_CONTROLLER)
        self.context.topic_configs[topic] = dict(configs)
        return self._start(lambda: self._trigger_online_partitions(topic))

    def on_topic_deletion(self, topics: Iterable[str]) -> ControllerResult:
        """The children of ``/admin/delete_topics``: queue them and start what can start."""
        if not self.active:
            return ControllerResult(done=True, error=Errors.NOT_CONTROLLER)
        names = list(topics)
        return self._start(lambda: self._deletion.queue(names, self.config.delete_topic_enable,
                                                        self._zk),
                           self._deletion_step)

    def on_stop_replica_response(self, broker_id: int,
                                 errors: Mapping[TopicPartition, Errors]) -> ControllerResult:
        """A broker answered a StopReplica(delete=true): deletion progresses or waits."""
        if not self.active:
            return ControllerResult(done=True, error=Errors.NOT_CONTROLLER)
        return self._start(lambda: self._deletion.on_stop_replica_response(broker_id, errors),
                           self._deletion_step)

    def _deletion_step(self) -> None:
        self._deletion.try_deletion(self._zk)

    def _on_reassignment_completed(self, tp: TopicPartition) -> None:
        if self.context.is_topic_queued_for_deletion(tp.topic):
            self._deletion_step()

    # ================================================================== ISR changes
    def on_isr_change(self, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
                      sequence_numbers: Iterable[str] = ()) -> ControllerResult:
        """Leaders changed ISRs in ZooKeeper (IBP < 2.7): cache the re-read states, tell every
        broker, clear the ``isr_change_<n>`` notifications."""
        if not self.active:
            return ControllerResult(done=True, error=Errors.NOT_CONTROLLER)
        ctx = self.context
        names = tuple(sequence_numbers)

        def apply() -> None:
            known = [tp for tp in sorted(states) if tp.partition in
                     ctx.assignments.get(tp.topic, {})]
            for tp in known:
                ctx.leadership[tp] = states[tp]
            if known:
                self._batch.add_update_metadata(ctx.live_or_shutting_down_broker_ids, known)
            if names:
                self._zk(DeleteIsrChangeNotifications(names))
        return self._start(apply, lambda: self._maybe_complete_reassignments(states))

    def on_alter_partition(self, broker_id: int, broker_epoch: int,
                           items: Iterable[AlterPartitionItem]) -> ControllerResult:
        """AlterPartition (KIP-497) from a partition leader: checked as in Kafka's
        ``tryProcessAlterPartition``; accepted ISRs are written with the same leader epoch
        (only the znode version rises) and every broker gets UpdateMetadata."""
        if not self.active:
            return ControllerResult(done=True, error=Errors.NOT_CONTROLLER)
        ctx = self.context
        if ctx.broker_epoch(broker_id) != broker_epoch:
            return ControllerResult(done=True, error=Errors.STALE_BROKER_EPOCH)
        requested = list(items)

        def alter() -> None:
            ev = self._event
            for item in requested:
                tp = item.tp
                error = self._check_alter(broker_id, item)
                if error is not None:
                    ev.alters[tp] = error       # an error, or the unchanged current state
                    continue
                cur = ctx.leadership[tp]
                new = replace(cur, leader=broker_id, isr=item.new_isr,
                              controller_epoch=ctx.epoch, zk_version=cur.zk_version + 1,
                              leader_recovery_state=el.LeaderRecoveryState(
                                  item.leader_recovery_state))

                def ok(s: LeaderIsrAndControllerEpoch, tp: TopicPartition = tp) -> None:
                    ev.alters[tp] = s

                def failed(e: Errors, tp: TopicPartition = tp) -> None:
                    ev.alters[tp] = e
                self._write_state(tp, new, None, ok, failed)

        def tell_brokers() -> None:
            self._batch.add_update_metadata(ctx.live_or_shutting_down_broker_ids,
                                            [i.tp for i in requested])

        def complete_reassignments() -> None:
            self._maybe_complete_reassignments(
                tp for tp, r in self._event.alters.items()
                if isinstance(r, LeaderIsrAndControllerEpoch))
        return self._start(alter, tell_brokers, complete_reassignments)

    def _check_alter(self, broker_id: int, item: AlterPartitionItem
                     ) -> Errors | LeaderIsrAndControllerEpoch | None:
        cur = self.context.leadership.get(item.tp)
        if cur is None:
            return Errors.UNKNOWN_TOPIC_OR_PARTITION
        if item.partition_epoch > cur.zk_version or item.leader_epoch > cur.leader_epoch:
            return Errors.NOT_CONTROLLER         # the leader knows a newer controller
        if item.leader_epoch < cur.leader_epoch:
            return Errors.FENCED_LEADER_EPOCH
        if (broker_id == cur.leader and sorted(item.new_isr) == sorted(cur.isr)
                and item.leader_recovery_state == cur.leader_recovery_state.value):
            return cur                           # already so: idempotent answer
        if item.partition_epoch < cur.zk_version:
            return Errors.INVALID_UPDATE_VERSION
        recovering = el.LeaderRecoveryState.RECOVERING.value
        if item.leader_recovery_state == recovering and len(item.new_isr) > 1:
            return Errors.INVALID_REQUEST
        if (cur.leader_recovery_state is el.LeaderRecoveryState.RECOVERED
                and item.leader_recovery_state == recovering):
            return Errors.INVALID_REQUEST
        if set(item.new_isr) - self.context.live_broker_ids:
            return Errors.INELIGIBLE_REPLICA
        return None

    # ================================================================== controlled shutdown
    def on_controlled_shutdown(self, broker_id: int, broker_epoch: int) -> ControllerResult:
        """ControlledShutdown (key 7): move leadership off the broker and take it out of the
        ISRs it follows; the final result lists the partitions it still leads (RF=1 ones, and
        those no other in-sync replica can take)."""
        if not self.active:
            return ControllerResult(done=True, error=Errors.NOT_CONTROLLER)
        ctx = self.context
        cached = ctx.broker_epoch(broker_id)
        if broker_epoch != -1 and cached is not None and broker_epoch < cached:
            return ControllerResult(done=True, error=Errors.STALE_BROKER_EPOCH)
        if cached is None:
            return ControllerResult(done=True, error=Errors.BROKER_NOT_AVAILABLE)

        def shut_down() -> None:
            self._event.remaining_for = broker_id
            ctx.shutting_down_broker_ids.add(broker_id)
            for tp in ctx.partitions_on_broker(broker_id):
                s = ctx.leadership.get(tp)
                if (s is None or len(ctx.replica_assignment(tp)) <= 1
                        or ctx.is_topic_queued_for_deletion(tp.topic)):
                    continue
                if s.leader == broker_id:
                    self._elect(tp, self._controlled_shutdown_decision(tp),
                                lambda t: [r for r in ctx.replica_assignment(t)
                                           if ctx.is_replica_online(r, True)])
                else:
                    self._batch.add_stop_replica([broker_id], tp, delete_partition=False)
                    self._decide_and_write(
                        tp, self._remove_from_isr(broker_id),
                        self._send_state(lambda t: [r for r in ctx.replica_assignment(t)
                                                    if r != broker_id])(tp),
                        lambda _e: None)
        return self._start(shut_down)

    def _controlled_shutdown_decision(self, tp: TopicPartition) -> Decide:
        ctx = self.context

        def decide(s: LeaderIsrAndControllerEpoch) -> LeaderIsrAndControllerEpoch | None:
            e = el.controlled_shutdown_leader(ctx.replica_assignment(tp), s.isr,
                                              ctx.live_or_shutting_down_broker_ids,
                                              ctx.shutting_down_broker_ids)
            return None if e is None else s.new_leader_and_isr(e.leader, e.isr, ctx.epoch)
        return decide

    def _remove_from_isr(self, replica: int) -> Decide:
        ctx = self.context

        def decide(s: LeaderIsrAndControllerEpoch) -> LeaderIsrAndControllerEpoch | None:
            if replica not in s.isr:
                return None
            leader = NO_LEADER if s.leader == replica else s.leader
            isr = s.isr if len(s.isr) == 1 else tuple(r for r in s.isr if r != replica)
            return s.new_leader_and_isr(leader, isr, ctx.epoch)
        return decide

    # ================================================================== elections
    def _preferred_decision(self, tp: TopicPartition) -> Decide:
        ctx = self.context

        def decide(s: LeaderIsrAndControllerEpoch) -> LeaderIsrAndControllerEpoch | None:
            e = el.preferred_replica_leader(ctx.replica_assignment(tp), s.isr,
                                            ctx.live_broker_ids)
            if e is None or e.leader == s.leader:
                return None
            return s.new_leader_and_isr(e.leader, e.isr, ctx.epoch)
        return decide

    def _unclean_decision(self, tp: TopicPartition) -> Decide:
        ctx = self.context

        def decide(s: LeaderIsrAndControllerEpoch) -> LeaderIsrAndControllerEpoch | None:
            e = el.offline_partition_leader(ctx.replica_assignment(tp), s.isr,
                                            ctx.live_broker_ids, True, s.leader_recovery_state)
            if e is None:
                return None
            return s.new_leader_and_isr(e.leader, e.isr, ctx.epoch, e.leader_recovery_state)
        return decide

    def on_elect_leaders(self, election_type: ElectionType,
                         partitions: Iterable[TopicPartition] | None) -> ControllerResult:
        """ElectLeaders (key 43) from an admin client; ``None`` means every partition.  The
        final result maps each partition to its new leader or to ELECTION_NOT_NEEDED,
        PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE, INVALID_TOPIC_EXCEPTION
        or UNKNOWN_TOPIC_OR_PARTITION."""
        if not self.active:
            parts = list(partitions or ())
            return ControllerResult(done=True, error=Errors.NOT_CONTROLLER,
                                    election_results={tp: Errors.NOT_CONTROLLER for tp in parts})
        ctx = self.context
        wanted = sorted(set(partitions)) if partitions is not None else list(ctx.all_partitions())

        def elect() -> None:
            ev = self._event
            for tp in wanted:
                s = ctx.leadership.get(tp)
                if tp.partition not in ctx.assignments.get(tp.topic, {}):
                    ev.elections[tp] = Errors.UNKNOWN_TOPIC_OR_PARTITION
                elif ctx.is_topic_queued_for_deletion(tp.topic):
                    ev.elections[tp] = Errors.INVALID_TOPIC_EXCEPTION
                elif election_type is ElectionType.PREFERRED:
                    if s is not None and s.leader == ctx.replica_assignment(tp)[0]:
                        ev.elections[tp] = Errors.ELECTION_NOT_NEEDED
                    else:
                        self._elect(tp, self._preferred_decision(tp),
                                    lambda t: self._online_replicas(t),
                                    Errors.PREFERRED_LEADER_NOT_AVAILABLE)
                elif s is not None and ctx.is_replica_online(s.leader, True):
                    ev.elections[tp] = Errors.ELECTION_NOT_NEEDED
                else:
                    self._elect(tp, self._unclean_decision(tp),
                                lambda t: self._online_replicas(t),
                                Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE)
        return self._start(elect)

    def on_preferred_election(self, partitions: Iterable[TopicPartition]) -> ControllerResult:
        """``/admin/preferred_replica_election`` was created: elect, then delete the znode."""
        if not self.active:
            return ControllerResult(done=True, error=Errors.NOT_CONTROLLER)
        wanted = list(partitions)
        return self._start(lambda: self._zk_preferred_election(wanted, always_delete=True))

    def _zk_preferred_election(self, partitions: Collection[TopicPartition],
                               always_delete: bool = False) -> None:
        ctx = self.context
        for tp in sorted(set(partitions)):
            s = ctx.leadership.get(tp)
            if (s is None or ctx.is_topic_queued_for_deletion(tp.topic)
                    or s.leader == ctx.replica_assignment(tp)[0]):
                continue
            self._elect(tp, self._preferred_decision(tp), lambda t: self._online_replicas(t))
        if partitions or always_delete:
            self._zk(DeletePreferredReplicaElection())

    def check_auto_rebalance(self, now_ms: int) -> ControllerResult:
        """The ``auto-leader-rebalance`` task: every ``leader.imbalance.check.interval.seconds``,
        for each broker B, if more than ``leader.imbalance.per.broker.percentage`` of the
        partitions whose preferred leader is B are led by someone else, run a preferred
        election on those whose preferred leader can lead now."""
        due = self._next_rebalance_ms
        if (not self.active or not self.config.auto_leader_rebalance_enable or due is None
                or now_ms < due):
            return ControllerResult(done=True)
        self._next_rebalance_ms = now_ms + self.config.leader_imbalance_check_interval_seconds * 1000
        ctx = self.context

        def rebalance() -> None:
            by_preferred: dict[int, list[TopicPartition]] = {}
            for tp in ctx.all_partitions():
                ar = ctx.replica_assignment(tp)
                if ar and not ctx.is_topic_queued_for_deletion(tp.topic):
                    by_preferred.setdefault(ar[0], []).append(tp)
            threshold = self.config.leader_imbalance_per_broker_percentage / 100
            for broker, tps in sorted(by_preferred.items()):
                not_led = [tp for tp in tps if tp in ctx.leadership
                           and ctx.leadership[tp].leader != broker]
                if len(not_led) / len(tps) <= threshold:
                    continue
                for tp in not_led:
                    if self._preferred_decision(tp)(ctx.leadership[tp]) is not None:
                        self._elect(tp, self._preferred_decision(tp),
                                    lambda t: self._online_replicas(t))
        return self._start(rebalance)


def _shrink_isr(isr: tuple[int, ...], removed: Collection[int], leader: int) -> tuple[int, ...]:
    """``isr`` without ``removed``; if that leaves nothing, the last member stays (the old
    leader when it was in the ISR), so the ISR never empties."""
    rest = tuple(r for r in isr if r not in removed)
    if rest or not isr:
        return rest
    return (leader,) if leader in isr else isr[:1]
