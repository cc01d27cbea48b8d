"""``ControllerService``: the I/O around the pure ``KafkaController``.

Every broker of a ZooKeeper cluster runs one.  It takes part in the controller election
(``/controller``, fenced by ``/controller_epoch``) and re-runs it whenever ``/controller``
vanishes.  The winner reads the cluster state from ZooKeeper, builds a
``KafkaController`` and drives it: each event — failover, a change under
``/brokers/ids`` or ``/brokers/topics``, a topic marked for deletion, ISR change
notifications, controlled shutdown, ElectLeaders, partition reassignments
(AlterPartitionReassignments / ListPartitionReassignments), the periodic auto rebalance — is one
controller call whose ``ControllerResult`` this service executes: the requests go to the
brokers' ordered queues (``ControllerChannelManager``), the ZooKeeper writes run each as
``multi[check(/controller_epoch), op]`` and their outcomes go back to the controller until
the event is done.  A failed epoch check, a lost session or a deleted ``/controller``
make the controller resign.

Metrics (Kafka's ``ControllerEventManager`` and ``ControllerStats``): every event is
queued with its ``ControllerState`` and the time it was queued; taking it records
``EventQueueTimeMs`` (how long it waited), ``state`` is its state while it runs
(``ControllerState`` gauge; Idle between events), and its run is timed into its state's
``<State>RateAndTimeMs`` timer (a broker change's is ``LeaderElectionRateAndTimeMs``).
An API-driven event's state is the one ``run_event`` is given, or that of the controller
method its call names.  ``UncleanLeaderElectionsPerSec`` is marked per committed unclean
election.  These are recorded on every broker; only the active controller's move.

Threading: events run one at a time on the broker's event loop (an ``asyncio.Queue``
consumed by one task); ZooKeeper calls run in worker threads; ZooKeeper watch callbacks
arrive on kazoo's threads and only enqueue events with ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from time import perf_counter
from typing import Any, TypeVar

from millrace.broker.config import KafkaConfig
from millrace.broker.controller.broker_requests import (
    ControllerRequest,
    LeaderAndIsr,
    StopReplica,
    UpdateMetadata,
)
from millrace.broker.controller.controller_context import (
    LeaderIsrAndControllerEpoch as CtlState,
)
from millrace.broker.controller.controller_context import (
    ReplicaAssignment,
)
from millrace.broker.controller.controller_result import (
    ControllerConfig,
    ControllerResult,
    FailoverState,
)
from millrace.broker.controller.controller_state import (
    STATE_OF_CALL,
    TIMED_STATES,
    ControllerState,
)
from millrace.broker.controller.election import LeaderRecoveryState
from millrace.broker.controller.kafka_controller import KafkaController
from millrace.broker.controller.zk_writes import (
    CreatePartitionState,
    DeleteIsrChangeNotifications,
    DeletePreferredReplicaElection,
    DeleteTopicDeletionFlag,
    DeleteTopicZnodes,
    UpdatePartitionState,
    UpdateTopicAssignment,
    ZkWrite,
    ZkWriteError,
    ZkWriteResult,
)
from millrace.broker.controller_channel_manager import ControllerChannelManager
from millrace.broker.metadata import SECURITY_PROTOCOL_IDS, BrokerRegistration, EndPoint, TopicInfo
from millrace.broker.metrics.registry import KafkaMetricsRegistry
from millrace.broker.metrics.yammer import Timer
from millrace.broker.security.inter_broker import inter_broker_security
from millrace.broker.tasks import stop_task
from millrace.broker.zk import KafkaZkClient, zk_data
from millrace.broker.zk.errors import (
    ControllerMovedError,
    ZkBadVersionError,
    ZkNodeExistsError,
    ZkNoNodeError,
)
from millrace.broker.zk.zk_data import BrokerAndEpoch
from millrace.broker.zk.zk_data import LeaderIsrAndControllerEpoch as ZkState
from millrace.common.errors import Errors
from millrace.common.time import Time
from millrace.common.topic_partition import TopicPartition
from millrace.protocol.types import (
    LeaderAndIsrRequest,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
)

log = logging.getLogger("millrace.controller")

LEADER_AND_ISR_VERSION = 6
UPDATE_METADATA_VERSION = 7
STOP_REPLICA_VERSION = 3
T = TypeVar("T")
Event = Callable[[], Awaitable[None]]


def to_zk(s: CtlState) -> ZkState:
    return ZkState(s.leader, s.leader_epoch, tuple(s.isr), s.controller_epoch,
                   int(s.leader_recovery_state.value), s.zk_version)


def from_zk(s: ZkState) -> CtlState:
    return CtlState(s.leader, s.leader_epoch, tuple(s.isr), s.controller_epoch,
                    s.partition_epoch, LeaderRecoveryState(s.leader_recovery_state))


class ControllerService:
    def __init__(self, config: KafkaConfig, time: Time, zk: KafkaZkClient,
                 listener_name: str = "PLAINTEXT",
                 metrics: KafkaMetricsRegistry | None = None) -> None:
        self.broker_id = config.node_id
        self._config = config
        self._time = time
        self._zk = zk
        self._listener = listener_name
        self.controller: KafkaController | None = None
        self.epoch_zk_version = -1
        self.channels: ControllerChannelManager | None = None
        # (state, when queued in perf_counter seconds, event)
        self._queue: asyncio.Queue[tuple[ControllerState, float, Event]] = asyncio.Queue()
        self.state = ControllerState.IDLE
        registry = metrics if metrics is not None else KafkaMetricsRegistry()
        self._queue_time = registry.histogram("kafka.controller", "ControllerEventManager",
                                              "EventQueueTimeMs")
        self._timers: dict[ControllerState, Timer] = {
            state: registry.timer("kafka.controller", "ControllerStats", state.timer_name)
            for state in TIMED_STATES if state.timer_name is not None}
        self._unclean_elections = registry.meter("kafka.controller", "ControllerStats",
                                                 "UncleanLeaderElectionsPerSec")
        self._loop = asyncio.get_running_loop()
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self._rebalance: asyncio.Task[None] | None = None
        self._watches: list[Any] = []
        self._topic_watches: dict[str, Any] = {}  # one data watch per topic's assignment
        self._topic_change_queued = False

    @property
    def is_active(self) -> bool:
        return self.controller is not None and self.controller.active

    @property
    def queue_size(self) -> int:
        """Events waiting (Kafka's ``EventQueueSize``)."""
        return self._queue.qsize()

    # ------------------------------------------------------------------ lifecycle
    async def startup(self) -> None:
        self._task = self._loop.create_task(self._run(), name="controller-event-thread")
        self._zk.watch_controller(lambda cid: self._enqueue_threadsafe(
            lambda: self._on_controller_change(cid)))
        self._zk.add_state_listener(lambda state: self._enqueue_threadsafe(
            lambda: self._on_session_state(state)))
        self.enqueue(self.elect)

    async def shutdown(self) -> None:
        self._stopped = True
        await self._resign()
        await stop_task(self._task)

    def enqueue(self, event: Event,
                state: ControllerState = ControllerState.CONTROLLER_CHANGE) -> None:
        self._queue.put_nowait((state, perf_counter(), event))

    def _enqueue_threadsafe(self, event: Event,
                            state: ControllerState = ControllerState.CONTROLLER_CHANGE
                            ) -> None:
        self._loop.call_soon_threadsafe(self.enqueue, event, state)

    async def _run(self) -> None:
        while not self._stopped:
            state, queued, event = await self._queue.get()
            started = perf_counter()
            self._queue_time.update((started - queued) * 1000.0)
            self.state = state
            try:
                await event()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("controller event failed")
                await self._reelect()
            finally:
                self.state = ControllerState.IDLE
                timer = self._timers.get(state)
                if timer is not None:
                    timer.update((perf_counter() - started) * 1000.0)

    async def _reelect(self) -> None:
        """An event failed half-way (e.g. ZooKeeper unreachable): the controller's state
        may no longer match ZooKeeper's, so it resigns and gives the controller role up
        (deleting /controller, fenced by its epoch); every broker's /controller watch then
        starts a fresh election whose winner reads the whole state again (Kafka's
        controller move)."""
        if not self.is_active:
            return
        version = self.epoch_zk_version
        await self._resign()
        try:
            await self._zk_call(self._zk.delete_controller, version)
        except Exception as e:  # the session may be gone: /controller vanishes with it
            log.warning("could not give up /controller: %s", e)

    async def _zk_call(self, fn: Callable[..., T], *args: Any) -> T:
        return await self._loop.run_in_executor(None, fn, *args)

    # ------------------------------------------------------------------ election
    async def _on_controller_change(self, controller_id: int | None) -> None:
        if controller_id is None:
            await self.elect()
        elif controller_id != self.broker_id and self.is_active:
            await self._resign()

    async def _on_session_state(self, state: str) -> None:
        if state == "LOST":
            log.warning("ZooKeeper session lost; resigning as controller if active")
            await self._resign()

    async def elect(self) -> None:
        """Try to become the controller (no-op when already active)."""
        if self.is_active:
            return
        election = await self._zk_call(
            self._zk.register_controller_and_increment_controller_epoch, self.broker_id)
        if not election.won:
            log.info("broker %d is not the controller (controller: %s)", self.broker_id,
                     election.controller_id)
            return
        self.epoch_zk_version = election.epoch_zk_version
        log.info("broker %d is the controller (epoch %d)", self.broker_id,
                 election.controller_epoch)
        await self._failover(election.controller_epoch, election.epoch_zk_version)

    async def _resign(self) -> None:
        if self.controller is not None and self.controller.active:
            log.info("broker %d resigns as controller", self.broker_id)
            self.controller.resign()
        self.controller = None
        for w in [*self._watches, *self._topic_watches.values()]:
            with contextlib.suppress(Exception):
                w.cancel()
        self._watches.clear()
        self._topic_watches.clear()
        if self._rebalance is not None:
            self._rebalance.cancel()  # never awaited here: it may be the caller's own event
            self._rebalance = None
        if self.channels is not None:
            await self.channels.shutdown()
            self.channels = None

    # ------------------------------------------------------------------ failover
    def _registrations(self, brokers: list[BrokerAndEpoch]) -> list[BrokerRegistration]:
        out = []
        for b in brokers:
            ep = b.broker.endpoint(self._listener) or (b.broker.endpoints[0]
                                                        if b.broker.endpoints else None)
            if ep is not None:
                out.append(BrokerRegistration(
                    b.broker.id, ep.host, ep.port, b.broker.rack, b.epoch,
                    endpoints=b.broker.endpoints))
        return out

    def _read_failover_state(self, epoch: int, epoch_zk_version: int) -> FailoverState:
        zk = self._zk
        brokers = self._registrations(zk.get_all_brokers_in_cluster())
        assignments = zk.get_replica_assignment_and_topic_id_for_topics(
            sorted(zk.get_all_topics_in_cluster()))
        topics = [TopicInfo(name, a.topic_id or _zero_id(), a.replicas(),
                            zk.get_entity_configs("topics", name))
                  for name, a in sorted(assignments.items())]
        tps = [TopicPartition(t.name, p) for t in topics for p in t.assignment]
        states = {tp: from_zk(s) for tp, s in zk.get_topic_partition_states(tps).items()
                  if s is not None}
        reassignments = {TopicPartition(name, p): ReplicaAssignment(
                             a.replicas, a.adding_replicas, a.removing_replicas)
                         for name, t in assignments.items() for p, a in t.assignment.items()
                         if a.adding_replicas or a.removing_replicas}
        return FailoverState(
            epoch=epoch, epoch_zk_version=epoch_zk_version, brokers=brokers, topics=topics,
            partition_states=states, topics_to_be_deleted=zk.get_topic_deletions(),
            preferred_replica_election=zk.get_preferred_replica_election(),
            isr_change_notifications=zk.get_all_isr_change_notifications(),
            reassignments=reassignments)

    async def _failover(self, epoch: int, epoch_zk_version: int) -> None:
        state = await self._zk_call(self._read_failover_state, epoch, epoch_zk_version)
        controller = self.controller = KafkaController(
            self.broker_id, ControllerConfig.from_config(self._config))
        controller.on_unclean_election = lambda _tp: self._unclean_elections.mark()
        self.channels = ControllerChannelManager(
            self.broker_id, request_timeout_ms=self._config["controller.socket.timeout.ms"],
            security=inter_broker_security(self._config))
        for b in state.brokers:
            self.channels.add_broker(b.node_id, b.host, b.port)
        zk = self._zk
        self._watches = [
            zk.watch_broker_ids(lambda _ids: self._enqueue_threadsafe(
                self._broker_change, ControllerState.BROKER_CHANGE)),
            zk.watch_topics(lambda _t: self._topic_changed_threadsafe()),
            zk.watch_topic_deletions(lambda _t: self._enqueue_threadsafe(
                self._topic_deletion, ControllerState.TOPIC_DELETION)),
            zk.watch_isr_change_notifications(
                lambda _s: self._enqueue_threadsafe(self._isr_change,
                                                    ControllerState.ISR_CHANGE)),
        ]
        self._watch_topics([t.name for t in state.topics])
        await self._execute(controller.on_controller_failover(state, self._time.milliseconds()))
        if self._config["auto.leader.rebalance.enable"]:
            self._rebalance = self._loop.create_task(self._auto_rebalance())

    # ------------------------------------------------------------------ events
    async def _broker_change(self) -> None:
        if not self.is_active or self.controller is None:
            return
        brokers = self._registrations(await self._zk_call(self._zk.get_all_brokers_in_cluster))
        assert self.channels is not None
        live = {b.node_id for b in brokers}
        log.info("controller: live brokers %s (were %s)", sorted(live),
                 sorted(self.channels.brokers))
        for node_id in self.channels.brokers:
            if node_id not in live:
                await self.channels.remove_broker(node_id)
        for b in brokers:
            self.channels.add_broker(b.node_id, b.host, b.port)
        await self._execute(self.controller.on_broker_change(brokers, self._time.milliseconds()))

    def _topic_changed(self) -> None:
        """A topic appeared or vanished, or one topic's assignment was rewritten: one
        queued re-read covers every notification that arrives before it starts (each new
        topic's data watch fires once as it is set)."""
        if not self._topic_change_queued:
            self._topic_change_queued = True
            self.enqueue(self._topic_change, ControllerState.TOPIC_CHANGE)

    def _topic_changed_threadsafe(self) -> None:
        self._loop.call_soon_threadsafe(self._topic_changed)

    async def _topic_change(self) -> None:
        self._topic_change_queued = False
        if not self.is_active or self.controller is None:
            return

        def read() -> list[TopicInfo]:
            assignments = self._zk.get_replica_assignment_and_topic_id_for_topics(
                sorted(self._zk.get_all_topics_in_cluster()))
            # with their configs: the controller's per-topic unclean.leader.election.enable
            # and min.insync.replicas must survive every topic change
            return [TopicInfo(n, a.topic_id or _zero_id(), a.replicas(),
                              self._zk.get_entity_configs("topics", n))
                    for n, a in sorted(assignments.items())]
        topics = await self._zk_call(read)
        self._watch_topics([t.name for t in topics])
        await self._execute(self.controller.on_topic_change(topics))

    def _watch_topics(self, names: list[str]) -> None:
        """A data watch per topic znode: new partitions change its data, not the
        children of /brokers/topics."""
        for name in set(self._topic_watches) - set(names):
            with contextlib.suppress(Exception):
                self._topic_watches.pop(name).cancel()
        for name in names:
            if name not in self._topic_watches:
                self._topic_watches[name] = self._zk.watch_topic(
                    name, self._topic_changed_threadsafe)

    async def _topic_deletion(self) -> None:
        if not self.is_active or self.controller is None:
            return
        topics = await self._zk_call(self._zk.get_topic_deletions)
        await self._execute(self.controller.on_topic_deletion(topics))

    async def _isr_change(self) -> None:
        if not self.is_active or self.controller is None:
            return

        def read() -> tuple[list[str], dict[TopicPartition, CtlState]]:
            seqs = self._zk.get_all_isr_change_notifications()
            tps = self._zk.get_partitions_from_isr_change_notifications(seqs)
            states = self._zk.get_topic_partition_states(sorted(set(tps)))
            return seqs, {tp: from_zk(s) for tp, s in states.items() if s is not None}
        seqs, states = await self._zk_call(read)
        if seqs:
            await self._execute(self.controller.on_isr_change(states, seqs))

    async def _auto_rebalance(self) -> None:
        every = self._config["leader.imbalance.check.interval.seconds"]
        await asyncio.sleep(5)
        while True:
            await self.run_event(lambda c: c.check_auto_rebalance(self._time.milliseconds()),
                                 ControllerState.AUTO_LEADER_BALANCE)
            await asyncio.sleep(every)

    async def run_event(self, call: Callable[[KafkaController], ControllerResult],
                        state: ControllerState | None = None) -> ControllerResult:
        """Run an API-driven event (controlled shutdown, ElectLeaders, AlterPartition,
        AlterPartitionReassignments, ListPartitionReassignments)
        through the event queue; the event's last result carries its answers.  Raises
        NOT_CONTROLLER's error when this broker is not the active controller.  ``state``
        (its metrics' ``ControllerState``) defaults to that of the controller method
        ``call`` names (``controller_state.STATE_OF_CALL``)."""
        if state is None:
            names = getattr(getattr(call, "__code__", None), "co_names", ())
            state = next((STATE_OF_CALL[n] for n in names if n in STATE_OF_CALL),
                         ControllerState.IDLE)
        future: asyncio.Future[ControllerResult] = self._loop.create_future()

        async def event() -> None:
            try:
                if not self.is_active or self.controller is None:
                    future.set_result(ControllerResult(done=True, error=Errors.NOT_CONTROLLER))
                    return
                future.set_result(await self._execute(call(self.controller)))
            except Exception as e:
                if not future.done():
                    future.set_exception(e)
        self.enqueue(event, state)
        return await future

    # ------------------------------------------------------------------ execution
    async def _execute(self, result: ControllerResult) -> ControllerResult:
        """Send the requests, run the writes, feed their outcomes back, until done."""
        total = ControllerResult()
        while True:
            total.extend(result)
            self._send_requests(result.requests)
            if result.resigned:
                await self._resign()
                return total
            if not result.zk_writes or self.controller is None:
                return total
            outcomes = await self._zk_call(self._run_writes, list(result.zk_writes))
            result = self.controller.on_zk_write_results(outcomes)

    def _run_writes(self, writes: list[ZkWrite]) -> list[ZkWriteResult]:
        return [self._run_write(w) for w in writes]

    def _run_write(self, w: ZkWrite) -> ZkWriteResult:
        zk, v = self._zk, self.epoch_zk_version
        try:
            if isinstance(w, CreatePartitionState):
                outcome = zk.create_topic_partition_states({w.tp: to_zk(w.state)}, v)[w.tp]
                if isinstance(outcome, ZkNodeExistsError):
                    stored = zk.get_topic_partition_state(w.tp)
                    return ZkWriteResult(w, ZkWriteError.NODE_EXISTS, -1,
                                         from_zk(stored) if stored else None)
                if isinstance(outcome, Exception):
                    raise outcome
                return ZkWriteResult.ok(w, 0)
            if isinstance(w, UpdatePartitionState):
                target = replace(to_zk(w.new_state), partition_epoch=w.expected_zk_version)
                try:
                    version = zk.conditional_update_partition_state(w.tp, target, v)
                except ZkBadVersionError:
                    stored = zk.get_topic_partition_state(w.tp)
                    return ZkWriteResult.bad_version(w, from_zk(stored) if stored else None)
                return ZkWriteResult.ok(w, version)
            if isinstance(w, UpdateTopicAssignment):
                version = zk.set_topic_assignment(w.topic, w.topic_id, {
                    p: zk_data.ReplicaAssignment(a.replicas, a.adding_replicas,
                                                 a.removing_replicas)
                    for p, a in w.assignment.items()}, v)
                return ZkWriteResult.ok(w, version)
            if isinstance(w, DeleteTopicZnodes):
                zk.delete_topic_znode(w.topic, v)
                zk.delete_topic_configs([w.topic], v)
                zk.delete_topic_deletions([w.topic], v)
            elif isinstance(w, DeleteTopicDeletionFlag):
                zk.delete_topic_deletions([w.topic], v)
            elif isinstance(w, DeleteIsrChangeNotifications):
                zk.delete_isr_change_notifications(w.sequence_numbers, v)
            elif isinstance(w, DeletePreferredReplicaElection):
                zk.delete_preferred_replica_election(v)
            return ZkWriteResult.ok(w)
        except ControllerMovedError:
            return ZkWriteResult.failed(w, ZkWriteError.CONTROLLER_MOVED)
        except ZkNoNodeError:
            return ZkWriteResult.failed(w, ZkWriteError.NO_NODE)

    def _send_requests(self, requests: list[ControllerRequest]) -> None:
        if self.channels is None:
            return
        for r in requests:
            if isinstance(r, LeaderAndIsr):
                self.channels.send(r.broker_id, leader_and_isr_request(r),
                                   LEADER_AND_ISR_VERSION)
            elif isinstance(r, UpdateMetadata):
                self.channels.send(r.broker_id, update_metadata_request(r, self._listener),
                                   UPDATE_METADATA_VERSION)
            elif isinstance(r, StopReplica):
                self.channels.send(r.broker_id, stop_replica_request(r),
                                   STOP_REPLICA_VERSION,
                                   self._stop_replica_callback(r.broker_id))

    def _stop_replica_callback(self, broker_id: int) -> Callable[[Any], None]:
        def done(response: StopReplicaResponse) -> None:
            errors = {TopicPartition(e.topic_name, e.partition_index): _error(e.error_code)
                      for e in response.partition_errors}

            async def event() -> None:
                if self.is_active and self.controller is not None:
                    await self._execute(
                        self.controller.on_stop_replica_response(broker_id, errors))
            self.enqueue(event, ControllerState.TOPIC_DELETION)
        return done


def _error(code: int) -> Errors:
    try:
        return Errors(code)  # type: ignore[call-arg]
    except ValueError:
        return Errors.UNKNOWN_SERVER_ERROR


def _zero_id() -> uuid.UUID:
    return uuid.UUID(int=0)


# ---------------------------------------------------------------------- wire messages
S = TypeVar("S")


def _by_topic(states: Iterable[Any], build: Callable[[Any], S]) -> dict[str, list[S]]:
    """The controller's per-partition states grouped by topic, in first-seen order, as
    each request's ``topic_states`` wants them."""
    topics: dict[str, list[S]] = {}
    for s in states:
        topics.setdefault(s.topic, []).append(build(s))
    return topics


def leader_and_isr_request(r: LeaderAndIsr) -> LeaderAndIsrRequest:
    cls = LeaderAndIsrRequest
    topics = _by_topic(r.partition_states, lambda s:
                       cls.LeaderAndIsrTopicState.LeaderAndIsrPartitionState(
        partition_index=s.partition, controller_epoch=s.controller_epoch, leader=s.leader,
        leader_epoch=s.leader_epoch, isr=list(s.isr), partition_epoch=s.partition_epoch,
        replicas=list(s.replicas), adding_replicas=list(s.adding_replicas),
        removing_replicas=list(s.removing_replicas), is_new=s.is_new,
        leader_recovery_state=s.leader_recovery_state))
    return cls(controller_id=r.controller_id, controller_epoch=r.controller_epoch,
               broker_epoch=r.broker_epoch, type=0,
               topic_states=[cls.LeaderAndIsrTopicState(
                   topic_name=t, topic_id=r.topic_ids.get(t, _zero_id()), partition_states=ps)
                   for t, ps in topics.items()],
               live_leaders=[cls.LeaderAndIsrLiveLeader(broker_id=b.node_id, host_name=b.host,
                                                        port=b.port) for b in r.live_leaders])


def update_metadata_request(r: UpdateMetadata, listener: str) -> UpdateMetadataRequest:
    cls = UpdateMetadataRequest
    topics = _by_topic(r.partition_states, lambda s:
                       cls.UpdateMetadataTopicState.UpdateMetadataPartitionState(
        partition_index=s.partition, controller_epoch=s.controller_epoch, leader=s.leader,
        leader_epoch=s.leader_epoch, isr=list(s.isr), zk_version=s.zk_version,
        replicas=list(s.replicas), offline_replicas=list(s.offline_replicas)))
    return cls(controller_id=r.controller_id, controller_epoch=r.controller_epoch,
               broker_epoch=r.broker_epoch,
               topic_states=[cls.UpdateMetadataTopicState(
                   topic_name=t, topic_id=r.topic_ids.get(t, _zero_id()), partition_states=ps)
                   for t, ps in topics.items()],
               live_brokers=[cls.UpdateMetadataBroker(
                   id=b.node_id, rack=b.rack, endpoints=[
                       cls.UpdateMetadataBroker.UpdateMetadataEndpoint(
                           port=e.port, host=e.host, listener=e.listener_name,
                           security_protocol=SECURITY_PROTOCOL_IDS[e.security_protocol])
                       for e in (b.endpoints or (
                           EndPoint(b.host, b.port, listener),))])
                   for b in r.live_brokers])


def stop_replica_request(r: StopReplica) -> StopReplicaRequest:
    cls = StopReplicaRequest
    topics = _by_topic(r.partition_states, lambda s:
                       cls.StopReplicaTopicState.StopReplicaPartitionState(
        partition_index=s.partition, leader_epoch=s.leader_epoch,
        delete_partition=s.delete_partition))
    return cls(controller_id=r.controller_id, controller_epoch=r.controller_epoch,
               broker_epoch=r.broker_epoch,
               topic_states=[cls.StopReplicaTopicState(topic_name=t, partition_states=ps)
                             for t, ps in topics.items()])
