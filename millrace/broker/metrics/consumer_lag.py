"""``ConsumerLagMonitor``: consumer lag measured by the broker that coordinates the group.

Apache Kafka has no broker-side lag metric; operators run an exporter that compares
committed offsets with log ends (kafka_exporter, Burrow, kafka-lag-exporter; reference
observability.md 3.4, 4).  A millrace broker already holds both halves for the groups it
coordinates -- the committed offsets in its group coordinator's memory, and the log ends
of the partitions it leads -- so it serves the exporters' series itself.

What is measured, for every group whose ``__consumer_offsets`` partition this broker
leads (and nothing else: each group is reported by exactly one broker):

* committed offset per partition: the coordinator's in-memory committed offsets;
* log end: the high watermark, or the last stable offset for a **read_committed** group
  (Definitions, reference 4).  The rule for "read_committed": a group whose latest commit
  request seen by this coordinator was a TxnOffsetCommit -- a transactional
  consume-transform-produce loop, whose consumers read committed (Kafka's EOS recipe) --
  until a plain OffsetCommit arrives.  The broker cannot see a consumer's
  ``isolation.level`` otherwise (it is a Fetch field, not a group one); after a
  coordinator move or restart a group counts as read_uncommitted until its next commit;
* lag = log end - committed offset, never negative; unknown while the log end is.

Log ends of partitions this broker leads are read locally on demand (what ListOffsets
"latest" answers a consumer).  Those of partitions led by other brokers are polled every
``offset_refresh_ms`` with ListOffsets (as a consumer, the group's isolation level) to
their leaders over ``BrokerChannels``, the broker's existing inter-broker client, and the
last answer is used in between.  Every refresh also records each partition's log end in
the Burrow evaluator's ring of recent log ends (its STOP rule), and forgets the state of
groups this broker no longer coordinates.

Each applied commit request (``GroupCoordinatorService.offset_commit_listeners``, one
call per request) goes into the Burrow evaluator (``burrow``) with the lag at receipt;
its status per partition and group is served with the lag.  State is in memory only: a
restart or a coordinator move starts the windows empty, as Burrow's do.

Served as (``register_metrics``; all computed at scrape time from one snapshot):

==========================================================  ================================
series                                                      labels
==========================================================  ================================
``kafka_consumergroup_current_offset``, ``..._lag``         consumergroup, topic, partition
``kafka_consumergroup_current_offset_sum``, ``..._lag_sum``  consumergroup, topic
``kafka_consumergroup_members``                             consumergroup
``kafka_consumergroup_group_max_lag``, ``..._sum_lag``      cluster_name, group
``burrow_kafka_consumer_status``, ``..._lag_total``         cluster, consumer_group
``burrow_kafka_topic_partition_status``                     cluster, consumer_group, topic,
``burrow_kafka_consumer_partition_lag``,                    partition
``burrow_kafka_consumer_current_offset``
==========================================================  ================================

Each exporter's series keep that exporter's names *and label names* (kafka_exporter's
``consumergroup``, kafka-lag-exporter's ``group`` for its group max/sum, Burrow's
``consumer_group`` and ``cluster`` = the cluster id), so dashboards and alert rules
written for any of them work unchanged.  A partition whose log end is unknown has no lag
series (kafka_exporter does the same); Burrow's current offset is shown once the
partition's window is full, as Burrow shows it.  ``describe`` and ``list_groups`` are the
JSON view (``lag_http``: ``/v1/consumer-groups``).

Thread ownership: the broker's event-loop thread (commit listener, refresh task, scrapes,
HTTP handlers).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from millrace.broker.broker_channel import BrokerChannels
from millrace.broker.config import KafkaConfig
from millrace.broker.group.group_metadata import GroupMetadata, GroupState
from millrace.broker.group.service import GroupCoordinatorService
from millrace.broker.metadata import ClusterMetadata
from millrace.broker.metrics.burrow import (
    BurrowConfig,
    BurrowEvaluator,
    CommitEntry,
    GroupStatus,
    PartitionStatus,
    Status,
)
from millrace.broker.metrics.registry import KafkaMetricsRegistry
from millrace.broker.replica_manager import ReplicaManager
from millrace.broker.security.inter_broker import inter_broker_security
from millrace.common.errors import BrokerNotAvailableError, Errors
from millrace.common.time import Time
from millrace.protocol import ListOffsetsRequest

if TYPE_CHECKING:
    from millrace.broker.services import BrokerServices

log = logging.getLogger("millrace.broker.metrics.consumer_lag")

TopicPartition = tuple[str, int]
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
LIST_OFFSETS_VERSION = 4   # isolation_level (v2+), current_leader_epoch (v4+)
LATEST_TIMESTAMP = -1
SNAPSHOT_MAX_AGE_MS = 500  # one scrape reads many families: evaluate once for all

SendListOffsets = Callable[[int, ListOffsetsRequest], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class LagConfig:
    offset_refresh_ms: int = 5000
    burrow: BurrowConfig = field(default_factory=BurrowConfig)

    @classmethod
    def from_kafka_config(cls, config: KafkaConfig) -> LagConfig:
        return cls(config["consumer.lag.offset.refresh.ms"], BurrowConfig(
            intervals=config["consumer.lag.intervals"],
            min_distance_ms=config["consumer.lag.min.distance.ms"],
            minimum_complete=config["consumer.lag.minimum.complete"],
            allowed_lag=config["consumer.lag.allowed.lag"]))


@dataclass(frozen=True, slots=True)
class PartitionLag:
    topic: str
    partition: int
    committed: int
    log_end: int | None   # None: not known (leader not answering, not polled yet)
    lag: int | None


@dataclass(frozen=True, slots=True)
class GroupLag:
    """One group as a scrape or ``describe`` sees it."""

    group: GroupMetadata
    read_committed: bool
    partitions: tuple[PartitionLag, ...]
    status: GroupStatus


class ConsumerLagMonitor:
    """Lag and Burrow status of the groups this broker coordinates (module docstring)."""

    def __init__(self, groups: GroupCoordinatorService, replica_manager: ReplicaManager,
                 metadata: ClusterMetadata, time: Time, config: LagConfig, *, node_id: int,
                 send: SendListOffsets) -> None:
        self._groups = groups
        self._replica_manager = replica_manager
        self._metadata = metadata
        self._time = time
        self.config = config
        self.node_id = node_id
        self._send = send
        self.evaluator = BurrowEvaluator(config.burrow)
        self._read_committed: set[str] = set()
        # (tp, isolation) -> the leader's answer at the last refresh (partitions led
        # elsewhere only)
        self._remote_ends: dict[tuple[TopicPartition, int], int] = {}
        self._snapshot: tuple[int, dict[str, GroupLag]] | None = None
        self._task: asyncio.Task[None] | None = None
        self._channels: BrokerChannels | None = None

    @classmethod
    def from_services(cls, services: BrokerServices) -> ConsumerLagMonitor:
        """The monitor of a broker's services; remote log ends go over a
        ``BrokerChannels`` of its own on the inter-broker listener's security."""
        config, metadata = services.config, services.metadata
        channels = BrokerChannels(
            metadata.broker_endpoint, client_id=f"broker-{config.node_id}-consumer-lag",
            request_timeout_ms=config["controller.socket.timeout.ms"],
            security=inter_broker_security(config))

        async def send(node: int, body: ListOffsetsRequest) -> Any:
            return await channels.send(node, body, LIST_OFFSETS_VERSION)

        monitor = cls(services.group_coordinator, services.replica_manager, metadata,
                      services.time, LagConfig.from_kafka_config(config),
                      node_id=config.node_id, send=send)
        monitor._channels = channels
        return monitor

    # ------------------------------------------------------------------ lifecycle
    def listen(self) -> None:
        """Hear of every commit request the group coordinator applies."""
        if self.on_offset_commit not in self._groups.offset_commit_listeners:
            self._groups.offset_commit_listeners.append(self.on_offset_commit)

    def start(self) -> None:
        """Listen to commits; refresh every ``offset_refresh_ms`` (in the running loop)."""
        self.listen()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        with contextlib.suppress(ValueError):
            self._groups.offset_commit_listeners.remove(self.on_offset_commit)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._channels is not None:
            self._channels.close()

    async def _run(self) -> None:
        while True:
            try:
                await self.run_once()
            except Exception:
                log.exception("consumer lag refresh failed")
            await asyncio.sleep(self.config.offset_refresh_ms / 1000)

    # ------------------------------------------------------------------ inputs
    def on_offset_commit(self, group: str, offsets: Mapping[TopicPartition, int],
                         now_ms: int, transactional: bool) -> None:
        """``offset_commit_listeners``: one applied commit request."""
        if transactional:
            self._read_committed.add(group)
        else:
            self._read_committed.discard(group)
        isolation = self._isolation(group)
        for tp, offset in offsets.items():
            end = self.log_end(tp, isolation)
            self.evaluator.record_commit(group, tp, offset, now_ms,
                                         None if end is None else end - offset)
        self._snapshot = None

    async def run_once(self) -> None:
        """One refresh: poll the leaders of remote partitions, record every partition's
        log end in the evaluator, forget groups and partitions no longer ours."""
        groups = self._hosted_groups()
        self.evaluator.retain_groups(g.group_id for g in groups)
        self._read_committed.intersection_update(g.group_id for g in groups)
        needed: set[tuple[TopicPartition, int]] = set()
        for g in groups:
            self.evaluator.retain_partitions(g.group_id, g.offsets)
            isolation = self._isolation(g.group_id)
            needed.update((tp, isolation) for tp in g.offsets)
        remote: dict[tuple[int, int], list[TopicPartition]] = {}
        for tp, isolation in sorted(needed):
            if self._local_log_end(tp, isolation) is None:
                leader = self._leader(tp)
                if leader is not None and leader != self.node_id:
                    remote.setdefault((leader, isolation), []).append(tp)
        self._remote_ends = {k: v for k, v in self._remote_ends.items() if k in needed}
        if remote:
            await asyncio.gather(*(self._poll(node, isolation, tps)
                                   for (node, isolation), tps in remote.items()))
        for tp, isolation in needed:
            end = self.log_end(tp, isolation)
            if end is not None:
                self.evaluator.record_log_end(tp, end, isolation == READ_COMMITTED)
        self.evaluator.retain_log_ends((tp, iso == READ_COMMITTED) for tp, iso in needed)
        self._snapshot = None

    async def _poll(self, node: int, isolation: int, partitions: list[TopicPartition]
                    ) -> None:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        t_cls = ListOffsetsRequest.ListOffsetsTopic
        body = ListOffsetsRequest(replica_id=-1, isolation_level=isolation, topics=[
            t_cls(name=topic, partitions=[t_cls.ListOffsetsPartition(
                partition_index=p, current_leader_epoch=-1, timestamp=LATEST_TIMESTAMP)
                for p in ps]) for topic, ps in by_topic.items()])
        try:
            response = await self._send(node, body)
        except BrokerNotAvailableError as e:
            log.info("consumer lag: log ends from broker %d not read: %s", node, e)
            return
        for t in response.topics:
            for p in t.partitions:
                key = ((t.name, p.partition_index), isolation)
                if p.error_code == Errors.NONE and p.offset >= 0:
                    self._remote_ends[key] = int(p.offset)
                else:
                    self._remote_ends.pop(key, None)

    # ------------------------------------------------------------------ log ends
    def _isolation(self, group: str) -> int:
        return READ_COMMITTED if group in self._read_committed else READ_UNCOMMITTED

    def _local_log_end(self, tp: TopicPartition, isolation: int) -> int | None:
        error, _, offset, _ = self._replica_manager.offset_for_timestamp(
            tp[0], tp[1], LATEST_TIMESTAMP, isolation)
        return int(offset) if error == Errors.NONE else None

    def _leader(self, tp: TopicPartition) -> int | None:
        state = self._metadata.partition_state(*tp)
        return None if state is None or state.leader < 0 else int(state.leader)

    def log_end(self, tp: TopicPartition, isolation: int = READ_UNCOMMITTED) -> int | None:
        """HW (or LSO): read here if this broker leads ``tp``, else the last poll's."""
        local = self._local_log_end(tp, isolation)
        return local if local is not None else self._remote_ends.get((tp, isolation))

    # ------------------------------------------------------------------ the view
    def _hosted_groups(self) -> list[GroupMetadata]:
        coord = self._groups.coordinator
        return [g for g in coord.groups.values()
                if g.partition in coord.hosted and not g.is_(GroupState.DEAD)]

    def _group_lag(self, group: GroupMetadata, now_ms: int) -> GroupLag:
        read_committed = group.group_id in self._read_committed
        isolation = READ_COMMITTED if read_committed else READ_UNCOMMITTED
        rows = []
        for tp, committed in sorted(group.offsets.items()):
            end = self.log_end(tp, isolation)
            rows.append(PartitionLag(tp[0], tp[1], committed.offset, end,
                                     None if end is None else max(0, end - committed.offset)))
        status = self.evaluator.evaluate(
            group.group_id, {(r.topic, r.partition): r.lag or 0 for r in rows}, now_ms,
            read_committed)
        return GroupLag(group, read_committed, tuple(rows), status)

    def snapshot(self) -> dict[str, GroupLag]:
        """Every coordinated group's lag and status now (reused for
        ``SNAPSHOT_MAX_AGE_MS`` unless a commit or refresh came in between)."""
        now = self._time.milliseconds()
        if self._snapshot is not None and 0 <= now - self._snapshot[0] < SNAPSHOT_MAX_AGE_MS:
            return self._snapshot[1]
        view = {g.group_id: self._group_lag(g, now) for g in self._hosted_groups()}
        self._snapshot = (now, view)
        return view

    def not_found_reason(self, group: str) -> str:
        """Why ``describe(group)`` is None, in words."""
        coord = self._groups.coordinator
        error = coord.coordinator_error(group)
        partition = coord.partition_for(group)
        if error == Errors.COORDINATOR_LOAD_IN_PROGRESS:
            return f"broker {self.node_id} is still loading __consumer_offsets-{partition}"
        if error == Errors.NOT_COORDINATOR:
            return (f"broker {self.node_id} does not coordinate group {group!r} (its "
                    f"coordinator leads __consumer_offsets-{partition})")
        return f"group {group!r} does not exist"

    def describe(self, group: str) -> dict[str, Any] | None:
        """The group's JSON view, or None when this broker does not coordinate it."""
        coord = self._groups.coordinator
        found = coord.groups.get(group)
        if (found is None or found.is_(GroupState.DEAD)
                or coord.coordinator_error(group) != Errors.NONE):
            return None
        view = self._group_lag(found, self._time.milliseconds())
        statuses = {(p.topic, p.partition): p for p in view.status.partitions}
        out = self._summary(view)
        out["partitions"] = [
            _partition_json(row, statuses[(row.topic, row.partition)]) for row in view.partitions]
        out["generation"] = found.generation_id
        out["rebalances"] = [event.to_json() for event in found.rebalances]   # KIP-800 reasons
        return out

    def list_groups(self) -> list[dict[str, Any]]:
        """A summary line per coordinated group, by group id."""
        return [self._summary(v) for _, v in sorted(self.snapshot().items())]

    def _summary(self, view: GroupLag) -> dict[str, Any]:
        st = view.status
        return {
            "group": view.group.group_id,
            "coordinator": self.node_id,
            "state": view.group.state.value,
            "members": len(view.group.members),
            "isolation": "read_committed" if view.read_committed else "read_uncommitted",
            "status": st.status.name,
            "status_code": int(st.status),
            "complete": st.complete,
            "totallag": st.totallag,
            "maxlag": None if st.maxlag is None else {
                "topic": st.maxlag.topic, "partition": st.maxlag.partition,
                "lag": st.maxlag.current_lag, "status": st.maxlag.status.name},
        }

    # ------------------------------------------------------------------ gauges
    def register_metrics(self, registry: KafkaMetricsRegistry) -> None:
        """The exporters' series (module docstring) as raw Prometheus gauge families."""
        for name, doc, read in self._families():
            registry.raw_gauge_family(name, doc, read)

    def _families(self) -> list[tuple[str, str, Callable[[], Iterable[
            tuple[Mapping[str, object], float]]]]]:
        def partitions() -> Iterable[tuple[str, PartitionLag, PartitionStatus]]:
            for group, view in sorted(self.snapshot().items()):
                statuses = {(p.topic, p.partition): p for p in view.status.partitions}
                for row in view.partitions:
                    yield group, row, statuses[(row.topic, row.partition)]

        def topic_sums(lag: bool) -> Iterable[tuple[Mapping[str, object], float]]:
            sums: dict[tuple[str, str], int] = {}
            for group, row, _ in partitions():
                value = row.lag if lag else row.committed
                if value is not None:
                    key = (group, row.topic)
                    sums[key] = sums.get(key, 0) + value
            return [({"consumergroup": g, "topic": t}, v) for (g, t), v in sums.items()]

        def burrow_groups() -> Iterable[tuple[str, GroupStatus]]:
            return [(g, v.status) for g, v in sorted(self.snapshot().items())
                    if v.status.partitions]

        def cluster() -> str:
            return str(self._metadata.cluster_id)

        def tp_labels(group: str, row: PartitionLag) -> dict[str, object]:
            return {"consumergroup": group, "topic": row.topic, "partition": row.partition}

        def burrow_labels(group: str, row: PartitionLag) -> dict[str, object]:
            return {"cluster": cluster(), "consumer_group": group, "topic": row.topic,
                    "partition": row.partition}

        def last_offset(status: PartitionStatus) -> int | None:
            return status.window[-1].offset if status.complete >= 1.0 else None

        return [
            ("kafka_consumergroup_current_offset",
             "Current offset of a consumer group at topic/partition (committed)",
             lambda: [(tp_labels(g, r), r.committed) for g, r, _ in partitions()]),
            ("kafka_consumergroup_current_offset_sum",
             "Current offset of a consumer group, summed over a topic's partitions",
             lambda: topic_sums(lag=False)),
            ("kafka_consumergroup_lag",
             "Current approximate lag of a consumer group at topic/partition",
             lambda: [(tp_labels(g, r), r.lag) for g, r, _ in partitions()
                      if r.lag is not None]),
            ("kafka_consumergroup_lag_sum",
             "Current approximate lag of a consumer group, summed over a topic's partitions",
             lambda: topic_sums(lag=True)),
            ("kafka_consumergroup_members", "Number of members of a consumer group",
             lambda: [({"consumergroup": g}, len(v.group.members))
                      for g, v in sorted(self.snapshot().items())]),
            ("kafka_consumergroup_group_max_lag",
             "Highest partition lag of a consumer group (kafka-lag-exporter's name)",
             lambda: [({"cluster_name": cluster(), "group": g},
                       s.maxlag.current_lag if s.maxlag else 0) for g, s in burrow_groups()]),
            ("kafka_consumergroup_group_sum_lag",
             "Sum of the partition lags of a consumer group (kafka-lag-exporter's name)",
             lambda: [({"cluster_name": cluster(), "group": g}, s.totallag)
                      for g, s in burrow_groups()]),
            ("burrow_kafka_consumer_status",
             "Burrow status of the consumer group, the highest of its partitions': "
             "0 NOTFOUND, 1 OK, 2 WARN, 3 ERR, 4 STOP, 5 STALL, 6 REWIND",
             lambda: [({"cluster": cluster(), "consumer_group": g}, int(s.status))
                      for g, s in burrow_groups()]),
            ("burrow_kafka_consumer_lag_total",
             "The sum of all partition current lag values for the group",
             lambda: [({"cluster": cluster(), "consumer_group": g}, s.totallag)
                      for g, s in burrow_groups()]),
            ("burrow_kafka_topic_partition_status",
             "Burrow status of a partition of the group: 1 OK, 2 WARN, 4 STOP, 5 STALL, "
             "6 REWIND",
             lambda: [(burrow_labels(g, r), int(s.status)) for g, r, s in partitions()]),
            ("burrow_kafka_consumer_partition_lag",
             "Number of messages the consumer group is behind by for a partition",
             lambda: [(burrow_labels(g, r), s.current_lag) for g, r, s in partitions()]),
            ("burrow_kafka_consumer_current_offset",
             "Latest offset stored in the partition's window (once the window is full)",
             lambda: [(burrow_labels(g, r), offset) for g, r, s in partitions()
                      if (offset := last_offset(s)) is not None]),
        ]


def _partition_json(row: PartitionLag, status: PartitionStatus) -> dict[str, Any]:
    return {
        "topic": row.topic, "partition": row.partition,
        "committed_offset": row.committed, "log_end_offset": row.log_end, "lag": row.lag,
        "status": status.status.name, "status_code": int(status.status),
        "complete": status.complete,
        "window": [_entry_json(e) for e in status.window],
    }


def _entry_json(entry: CommitEntry) -> dict[str, Any]:
    return {"offset": entry.offset, "timestamp": entry.timestamp_ms, "lag": entry.lag}


# ---------------------------------------------------------------------- wiring
def start_consumer_lag(services: BrokerServices) -> ConsumerLagMonitor:
    """Build the monitor of ``services``, register its gauges in ``services.metrics`` and
    start it (from the broker's event loop once the group coordinator has started; the
    broker's ``MetricsService`` owns it)."""
    monitor = ConsumerLagMonitor.from_services(services)
    monitor.register_metrics(services.metrics)
    monitor.start()
    return monitor


__all__ = ["ConsumerLagMonitor", "GroupLag", "LagConfig", "PartitionLag",
           "Status", "start_consumer_lag"]
