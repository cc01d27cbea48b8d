"""The broker's gauges, bound at start-up to the state they read (Kafka registers the
same MBeans in ``ReplicaManager``, ``Partition``, ``KafkaController``,
``ControllerEventManager``, ``LogManager``, ``Log``, ``AbstractFetcherManager``,
``DelayedOperationPurgatory``, ``GroupMetadataManager`` and ``ZooKeeperClient``).

``register_broker_metrics(registry, services)`` registers every gauge once the
services exist.  A gauge is a function of the components' public state, evaluated only
when a scrape asks; a ``gauge_family`` yields one value per partition (or per fetched
partition, per log dir).  The meters, histograms and timers of the same names are
recorded by the components that own the events (``BrokerTopicStats`` in the replica
manager, the ISR meters, the controller's ``ControllerStats``, the ZooKeeper client's
``SessionExpireListener`` meters, ``LogFlushStats`` through the log manager's flush
hook, ``log_flush_timer``); this module makes sure those exist in either mode too, so a
single node serves the same series (at 0) as a broker of a cluster.

Mode differences: a single node is its own controller (``ActiveControllerCount`` 1, its
topics the global counts, nothing offline, ``ControllerState`` Idle, no follower lag);
in a cluster the ``KafkaController`` gauges other than ``ActiveControllerCount`` and
``ControllerState`` read the active controller's cache and are 0 elsewhere, as in Kafka,
and ``SessionExpireListener`` ``SessionState`` is registered (only there).

Thread ownership: read on the broker's event-loop thread at scrape time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

from millrace.broker.group.group_metadata import GroupState
from millrace.broker.metrics.registry import KafkaMetricsRegistry
from millrace.broker.metrics.yammer import Timer
from millrace.broker.partition import Partition
from millrace.storage import Log

if TYPE_CHECKING:
    from millrace.broker.controller.kafka_controller import KafkaController
    from millrace.broker.services import BrokerServices

Samples = Iterator[tuple[Mapping[str, object], float]]

# Kafka's GroupMetadataManager gauges by group state
GROUP_STATE_GAUGES = {
    "NumGroupsPreparingRebalance": GroupState.PREPARING_REBALANCE,
    "NumGroupsCompletingRebalance": GroupState.COMPLETING_REBALANCE,
    "NumGroupsStable": GroupState.STABLE,
    "NumGroupsDead": GroupState.DEAD,
    "NumGroupsEmpty": GroupState.EMPTY,
}


def log_flush_timer(registry: KafkaMetricsRegistry) -> Timer:
    """``kafka.log:type=LogFlushStats,name=LogFlushRateAndTimeMs``: bound to the log
    manager's flush hook; locked, as any thread that flushes a log updates it."""
    return registry.timer("kafka.log", "LogFlushStats", "LogFlushRateAndTimeMs", locked=True)


def register_broker_metrics(registry: KafkaMetricsRegistry, services: BrokerServices) -> None:
    """Register every broker gauge (module docstring) against ``services``."""
    _replica_manager(registry, services)
    _partitions(registry, services)
    _controller(registry, services)
    _log_manager(registry, services)
    _fetchers(registry, services)
    _purgatories(registry, services)
    _group_metadata_manager(registry, services)
    cluster = services.cluster
    if cluster is not None:
        zk = cluster.zk.zk
        registry.state_gauge("kafka.server", "SessionExpireListener", "SessionState",
                             lambda: zk.session_state)


# ---------------------------------------------------------------------- replica manager
def _replica_manager(registry: KafkaMetricsRegistry, services: BrokerServices) -> None:
    rm = services.replica_manager

    def count(test: Callable[[Partition], bool]) -> Callable[[], float]:
        return lambda: sum(1 for p in list(rm.partitions.values()) if test(p))

    def gauge(name: str, read: Callable[[], float]) -> None:
        registry.gauge("kafka.server", "ReplicaManager", name, read)
    gauge("UnderReplicatedPartitions", count(_under_replicated))
    gauge("UnderMinIsrPartitionCount", count(_under_min_isr))
    gauge("AtMinIsrPartitionCount", count(_at_min_isr))
    gauge("OfflineReplicaCount", count(lambda p: p.log.offline))
    gauge("LeaderCount", count(lambda p: p.is_leader))
    gauge("PartitionCount", lambda: len(rm.partitions))
    # the meters the replica manager records (made there; named here for the list)
    for name in ("IsrShrinksPerSec", "IsrExpandsPerSec", "FailedIsrUpdatesPerSec"):
        registry.meter("kafka.server", "ReplicaManager", name)


def _under_replicated(p: Partition) -> bool:
    return p.is_leader and len(p.isr) < len(p.assigned_replicas)


def _under_min_isr(p: Partition) -> bool:
    return p.is_leader and len(p.isr) < p.log.config.min_insync_replicas


def _at_min_isr(p: Partition) -> bool:
    return p.is_leader and len(p.isr) == p.log.config.min_insync_replicas


def _partitions(registry: KafkaMetricsRegistry, services: BrokerServices) -> None:
    """``kafka.cluster:type=Partition,name=...,topic=T,partition=P`` of the partitions
    led here (Kafka's are 0 on a follower; a follower's are left out)."""
    rm = services.replica_manager

    def family(name: str, value: Callable[[Partition], float]) -> None:
        def read() -> Samples:
            for p in list(rm.partitions.values()):
                if p.is_leader:
                    yield {"topic": p.topic, "partition": p.index}, value(p)
        registry.gauge_family("kafka.cluster", "Partition", name, read)
    family("UnderReplicated", lambda p: float(_under_replicated(p)))
    family("UnderMinIsr", lambda p: float(_under_min_isr(p)))
    family("AtMinIsr", lambda p: float(_at_min_isr(p)))
    family("InSyncReplicasCount", lambda p: len(p.isr))
    family("ReplicasCount", lambda p: len(p.assigned_replicas))
    family("LastStableOffsetLag",
           lambda p: p.log.high_watermark - p.log.last_stable_offset)


# ---------------------------------------------------------------------- controller
def _controller(registry: KafkaMetricsRegistry, services: BrokerServices) -> None:
    cluster = services.cluster

    def active() -> KafkaController | None:
        """The active controller's cache owner, if this broker is it (cluster mode)."""
        service = cluster.controller if cluster is not None else None
        if service is None or not service.is_active:
            return None
        return service.controller

    def gauge(name: str, read: Callable[[], float]) -> None:
        registry.gauge("kafka.controller", "KafkaController", name, read)

    if cluster is None:  # a single node is its own (and the only) controller
        metadata = services.metadata
        gauge("ActiveControllerCount", lambda: 1)
        gauge("OfflinePartitionsCount", lambda: 0)
        gauge("GlobalTopicCount", lambda: len(metadata.topics))
        gauge("GlobalPartitionCount",
              lambda: sum(t.partitions for t in list(metadata.topics.values())))
        gauge("PreferredReplicaImbalanceCount", lambda: 0)
        gauge("TopicsToDeleteCount", lambda: 0)
        gauge("ControllerState", lambda: 0)
        registry.gauge("kafka.controller", "ControllerEventManager", "EventQueueSize",
                       lambda: 0)
    else:
        def on_active(read: Callable[[KafkaController], float]) -> Callable[[], float]:
            def value() -> float:
                controller = active()
                return 0 if controller is None else read(controller)
            return value
        gauge("ActiveControllerCount", lambda: 0 if active() is None else 1)
        gauge("OfflinePartitionsCount", on_active(_offline_partitions))
        gauge("GlobalTopicCount", on_active(lambda c: len(c.context.assignments)))
        gauge("GlobalPartitionCount", on_active(
            lambda c: sum(len(a) for a in c.context.assignments.values())))
        gauge("PreferredReplicaImbalanceCount", on_active(_preferred_replica_imbalance))
        gauge("TopicsToDeleteCount", on_active(lambda c: len(c.context.topics_to_be_deleted)))
        gauge("ControllerState", lambda: (0 if cluster.controller is None
                                          else int(cluster.controller.state)))
        registry.gauge("kafka.controller", "ControllerEventManager", "EventQueueSize",
                       lambda: 0 if cluster.controller is None else cluster.controller.queue_size)
    # recorded by the controller service (cluster mode); present at 0 on a single node
    registry.histogram("kafka.controller", "ControllerEventManager", "EventQueueTimeMs")
    registry.timer("kafka.controller", "ControllerStats", "LeaderElectionRateAndTimeMs")
    registry.meter("kafka.controller", "ControllerStats", "UncleanLeaderElectionsPerSec")


def _offline_partitions(c: KafkaController) -> float:
    ctx = c.context
    return sum(1 for tp in ctx.all_partitions()
               if not ctx.is_topic_queued_for_deletion(tp.topic) and ctx.is_offline(tp))


def _preferred_replica_imbalance(c: KafkaController) -> float:
    """Partitions whose leader is not their preferred (first assigned) replica."""
    ctx = c.context
    out = 0
    for tp, state in list(ctx.leadership.items()):
        assignment = ctx.replica_assignment(tp)
        if (assignment and state.leader != assignment[0]
                and not ctx.is_topic_queued_for_deletion(tp.topic)):
            out += 1
    return out


# ---------------------------------------------------------------------- logs
def _log_manager(registry: KafkaMetricsRegistry, services: BrokerServices) -> None:
    lm = services.log_manager
    registry.gauge("kafka.log", "LogManager", "OfflineLogDirectoryCount",
                   lambda: len(lm.log_dirs) - len(lm.online_log_dirs))

    def dir_offline() -> Samples:
        online = set(lm.online_log_dirs)
        for d in lm.log_dirs:
            yield {"logDirectory": d}, float(d not in online)
    registry.gauge_family("kafka.log", "LogManager", "LogDirectoryOffline", dir_offline)

    def family(name: str, value: Callable[[Log], float]) -> None:
        def read() -> Samples:
            for lg in lm.all_logs():
                if not lg.closed:
                    yield {"topic": lg.topic, "partition": lg.partition}, value(lg)
        registry.gauge_family("kafka.log", "Log", name, read)
    family("Size", lambda lg: lg.size)
    family("NumLogSegments", lambda lg: len(lg.segments))
    family("LogStartOffset", lambda lg: lg.log_start_offset)
    family("LogEndOffset", lambda lg: lg.log_end_offset)
    log_flush_timer(registry)


# ---------------------------------------------------------------------- fetchers, purgatories
def _fetchers(registry: KafkaMetricsRegistry, services: BrokerServices) -> None:
    fetchers = services.cluster.fetcher_manager if services.cluster is not None else None
    registry.gauge("kafka.server", "ReplicaFetcherManager", "MaxLag",
                   (lambda: 0) if fetchers is None else fetchers.max_lag,
                   {"clientId": "Replica"})

    def lags() -> Samples:
        if fetchers is not None:
            for name, (topic, partition), lag in fetchers.partition_lags():
                yield {"clientId": name, "topic": topic, "partition": partition}, lag
    registry.gauge_family("kafka.server", "FetcherLagMetrics", "ConsumerLag", lags)


def _purgatories(registry: KafkaMetricsRegistry, services: BrokerServices) -> None:
    rm = services.replica_manager
    for purgatory in (rm.produce_purgatory, rm.fetch_purgatory):
        tags = {"delayedOperation": purgatory.name}
        registry.gauge("kafka.server", "DelayedOperationPurgatory", "PurgatorySize",
                       _reader(purgatory, "watched"), tags)
        registry.gauge("kafka.server", "DelayedOperationPurgatory", "NumDelayedOperations",
                       _reader(purgatory, "delayed"), tags)


def _reader(owner: object, attribute: str) -> Callable[[], float]:
    return lambda: float(getattr(owner, attribute))


# ---------------------------------------------------------------------- groups
def _group_metadata_manager(registry: KafkaMetricsRegistry, services: BrokerServices) -> None:
    coordinator = services.group_coordinator.coordinator

    def gauge(name: str, read: Callable[[], float]) -> None:
        registry.gauge("kafka.coordinator.group", "GroupMetadataManager", name, read)
    gauge("NumGroups", lambda: len(coordinator.groups))
    gauge("NumOffsets", lambda: sum(len(g.offsets) for g in list(coordinator.groups.values())))
    def in_state(state: GroupState) -> Callable[[], float]:
        return lambda: sum(1 for g in list(coordinator.groups.values()) if g.state is state)
    for name, state in GROUP_STATE_GAUGES.items():
        gauge(name, in_state(state))
