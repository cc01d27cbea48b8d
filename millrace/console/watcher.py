"""The console's view of a cluster, refreshed by polling it as any Kafka client would.

``ClusterWatcher.poll()`` asks the cluster, through ``KafkaAdminClient`` only (Metadata,
DescribeCluster, ListOffsets, ListGroups, DescribeGroups, OffsetFetch, DescribeConfigs),
for its brokers, topics, partitions, offsets and groups, and folds each answer into the
history that no Kafka API keeps (reference observability.md 5.4):

- the records produced into the cluster per second, from the sum of the high watermarks
  of the non-internal partitions between two polls, and the records consumed per second,
  from the groups' committed offsets between two polls (``throughput``: ``in``, ``out``;
  ``out`` is None for a poll whose groups could not be read);
- per partition, a timeline of leader and ISR changes (``timeline``), first seen, then
  every change the console observes between two polls;
- per group, its total lag over time (``lag_history``), Burrow's status over the commits
  the console saw (``BurrowEvaluator``: a commit is a change of the committed offset
  between two polls, so a consumer that commits the same offset again looks stopped
  rather than stalled), and the rebalances it saw: a change of state or of the members,
  with what changed as the reason.

So the views work against any Kafka cluster, Apache Kafka included.  When the group's
coordinator is a millrace broker, its own rebalance history replaces the console's
observations (``BrokerHttp``: ``/v1/consumer-groups/<group>``): every rebalance, even one
between two polls, with the coordinator's reason and the client's KIP-800 reason.  The history is the
console's: it starts when the console starts and is bounded (``HISTORY_POINTS`` per
series, ``TIMELINE_ENTRIES`` per topic, ``REBALANCE_ENTRIES`` per group).

Alerts are the standard set (reference observability.md 1.3), derived from the same
metadata: under-replicated partitions (ISR smaller than the replicas), under-min-ISR
partitions (ISR smaller than the topic's ``min.insync.replicas``), offline partitions (no
leader), a replica on a broker that is not registered (down), no controller, and offline
log dirs (DescribeLogDirs, each broker every ``LOG_DIRS_REFRESH_S``, which also gives each
partition's size: its leader's log, in bytes).

Thread ownership: ``poll`` and ``snapshot`` run on the console's one worker thread; the
snapshot they return is an immutable-by-convention dict the event loop hands out.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from millrace.broker.metrics.burrow import BurrowEvaluator, Status
from millrace.client.admin import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    ClusterDescription,
    ConfigResource,
    ConfigResourceType,
    KafkaAdminClient,
    OffsetSpec,
    TopicDescription,
)
from millrace.client.admin.broker_http import BrokerHttp, BrokerHttpUnavailable
from millrace.common.errors import KafkaError, MillraceError
from millrace.common.isr import isr_changes
from millrace.common.topic_partition import TopicPartition

HISTORY_POINTS = 3600      # one per poll: an hour at the default 1 s interval
TIMELINE_ENTRIES = 500     # leader and ISR changes kept per topic
REBALANCE_ENTRIES = 100    # rebalances kept per group
CONFIG_REFRESH_S = 15.0    # how often min.insync.replicas is read again
MERGE_WINDOW_MS = 10_000   # how long after a broker's record the console may observe it
COORDINATOR_REFRESH_S = 5.0   # how often an unchanged group's coordinator history is read
POLL_TIMEOUT_MS = 5000
GROUP_TIMEOUT_MS = 2000    # per group: a stopped coordinator must not stall the poll long
LOG_DIRS_REFRESH_S = 5.0   # how often each broker's log dirs (sizes, offline dirs) are read


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class PartitionState:
    leader: int | None
    replicas: list[int]
    isr: list[int]
    start: int | None = None
    hw: int | None = None


@dataclass
class GroupHistory:
    lag: deque[dict[str, int]] = field(default_factory=lambda: deque(maxlen=HISTORY_POINTS))
    rebalances: deque[dict[str, Any]] = field(
        default_factory=lambda: deque(maxlen=REBALANCE_ENTRIES))
    state: str | None = None
    members: frozenset[str] = frozenset()
    committed: dict[TopicPartition, int] = field(default_factory=dict)
    # the coordinator's own history (millrace brokers), and when it was last read
    coordinator_rebalances: list[dict[str, Any]] | None = None
    coordinator_read: float = 0.0


class ClusterWatcher:
    """Polls one cluster and keeps what the console shows (module docstring)."""

    def __init__(self, admin: KafkaAdminClient, *, read_only: bool = False,
                 broker_http: BrokerHttp | None = None) -> None:
        self.admin = admin
        self.broker_http = broker_http
        self.read_only = read_only
        self._partitions: dict[TopicPartition, PartitionState] = {}
        self._timeline: dict[str, deque[dict[str, Any]]] = {}
        self._throughput: deque[dict[str, float | None]] = deque(maxlen=HISTORY_POINTS)
        self._topic_rate: dict[str, float] = {}
        self._last_total: tuple[int, int] | None = None       # (time ms, sum of HWs)
        self._last_topic_hw: dict[str, int] = {}
        self._rate_in: tuple[int, float] | None = None        # this poll's (t, records in/s)
        self._last_committed: tuple[int, dict[str, int]] | None = None   # (t, group -> sum)
        self._groups: dict[str, GroupHistory] = {}
        self._burrow = BurrowEvaluator()
        self._min_isr: dict[str, int] = {}
        self._min_isr_read = 0.0
        self._known_brokers: dict[int, dict[str, Any]] = {}
        self._cluster: ClusterDescription | None = None     # None until a poll answers
        self._topics: dict[str, TopicDescription] = {}
        self._snapshot: dict[str, Any] = {"time": now_ms(), "read_only": read_only,
                                          "error": "not polled yet", "cluster": None,
                                          "alerts": [], "throughput": [], "topics": [],
                                          "groups": []}
        self._internal: set[str] = set()
        self._warnings: list[str] = []
        self._group_rows: dict[str, dict[str, Any]] = {}
        self._group_partitions: dict[str, list[dict[str, Any]]] = {}
        self._group_meta: dict[str, dict[str, Any]] = {}
        self._sizes: dict[TopicPartition, int] = {}        # the leader's replica, bytes
        self._offline_dirs: dict[int, list[str]] = {}      # broker -> "path (error)"
        self._log_dirs_read = 0.0

    # ------------------------------------------------------------------ polling
    def poll(self) -> dict[str, Any]:
        """One round of questions to the cluster; the new snapshot.  A cluster that cannot
        be reached leaves the last known state with ``error`` saying why."""
        t = now_ms()
        try:
            self._poll_cluster(t)
        except MillraceError as e:
            self._snapshot = {**self._snapshot, "time": t, "error": _error_text(e)}
            return self._snapshot
        self._snapshot = self._build_snapshot(t)
        return self._snapshot

    def snapshot(self) -> dict[str, Any]:
        return self._snapshot

    def _poll_cluster(self, t: int) -> None:
        cluster = self.admin.describe_cluster(timeout_ms=POLL_TIMEOUT_MS)
        self._cluster = cluster
        for node in cluster.nodes:
            self._known_brokers[node.id] = {"id": node.id, "host": node.host,
                                            "port": node.port, "rack": node.rack}
        listings = self.admin.list_topics(list_internal=True, timeout_ms=POLL_TIMEOUT_MS)
        self._internal = {listing.name for listing in listings if listing.is_internal}
        names = [listing.name for listing in listings]
        described = self.admin.describe_topics(names, timeout_ms=POLL_TIMEOUT_MS)
        topics: dict[str, TopicDescription] = {}
        for name, future in described.items():
            try:
                topics[name] = future.result()
            except KafkaError:
                continue   # deleted between the two calls, or not ours to see
        self._topics = topics
        self._observe_partitions(t, topics)
        self._poll_offsets(t, topics)
        # a broker that does not answer (stopped, partitioned) must not hide the rest:
        # the groups it coordinates keep their last row, marked with why
        self._warnings = []
        try:
            self._refresh_min_isr(topics)
        except MillraceError as e:
            self._warnings.append(f"topic configs: {_error_text(e)}")
        try:
            self._poll_groups(t)
        except MillraceError as e:
            self._warnings.append(f"consumer groups: {_error_text(e)}")
            self._last_committed = None
        else:
            self._record_throughput(t)
        self._rate_in = None
        self._poll_log_dirs()

    def _record_throughput(self, t: int) -> None:
        """This poll's point: records in (the HWs) and out (the groups' commits) per s."""
        committed = {group: sum(history.committed.values())
                     for group, history in self._groups.items()}
        rate_out = None
        if self._last_committed is not None and t > self._last_committed[0]:
            before = self._last_committed[1]
            dt = (t - self._last_committed[0]) / 1000
            rate_out = sum(max(0, total - before[group])
                           for group, total in committed.items() if group in before) / dt
        self._last_committed = (t, committed)
        if self._rate_in is not None:
            self._throughput.append({"t": t, "in": self._rate_in[1], "out": rate_out})

    def _poll_log_dirs(self) -> None:
        """Partition sizes and offline log dirs (DescribeLogDirs, each broker on its own so
        that one down hides nothing of the rest), every ``LOG_DIRS_REFRESH_S``."""
        now = time.monotonic()
        # sooner for a partition not sized yet (a new topic), but at most once a second
        due = LOG_DIRS_REFRESH_S if self._partitions.keys() <= self._sizes.keys() else 1.0
        if now - self._log_dirs_read < due or self._cluster is None:
            return
        self._log_dirs_read = now
        sizes: dict[TopicPartition, dict[int, int]] = {}
        offline: dict[int, list[str]] = {}
        for node in self._cluster.nodes:
            try:
                found = self.admin.describe_log_dirs([node.id], timeout_ms=POLL_TIMEOUT_MS)
            except MillraceError as e:
                self._warnings.append(f"log dirs of broker {node.id}: {_error_text(e)}")
                continue
            for path, described in found.get(node.id, {}).items():
                if described.error is not None:
                    offline.setdefault(node.id, []).append(
                        f"{path} ({_error_text(described.error)})")
                for tp, replica in described.replica_infos.items():
                    if not replica.is_future:
                        sizes.setdefault(tp, {})[node.id] = replica.size
        self._offline_dirs = offline
        self._sizes = {}
        for tp, by_broker in sizes.items():
            state = self._partitions.get(tp)
            leader = state.leader if state is not None else None
            self._sizes[tp] = by_broker.get(leader, max(by_broker.values())) \
                if leader is not None else max(by_broker.values())

    def _observe_partitions(self, t: int, topics: Mapping[str, TopicDescription]) -> None:
        seen: set[TopicPartition] = set()
        for name, topic in topics.items():
            for p in topic.partitions:
                tp = TopicPartition(name, p.partition)
                seen.add(tp)
                leader = p.leader.id if p.leader is not None and p.leader.id >= 0 else None
                replicas = [n.id for n in p.replicas]
                isr = [n.id for n in p.isr]
                before = self._partitions.get(tp)
                if before is None:
                    self._partitions[tp] = PartitionState(leader, replicas, isr)
                    self._event(t, tp, "first-seen", leader, isr,
                                f"replicas {replicas}, leader {leader}")
                    continue
                if before.leader != leader:
                    self._event(t, tp, "leader", leader, isr,
                                f"leader {before.leader} -> {leader}")
                for kind, text in isr_changes(before.isr, isr):
                    self._event(t, tp, kind, leader, isr, text)
                before.leader, before.replicas, before.isr = leader, replicas, isr
        for tp in [tp for tp in self._partitions if tp not in seen]:
            del self._partitions[tp]
        for name in [n for n in self._timeline if n not in topics]:
            del self._timeline[name]

    def _event(self, t: int, tp: TopicPartition, kind: str, leader: int | None,
               isr: list[int], detail: str) -> None:
        timeline = self._timeline.get(tp.topic)
        if timeline is None:
            timeline = self._timeline[tp.topic] = deque(maxlen=TIMELINE_ENTRIES)
        timeline.append({"t": t, "partition": tp.partition, "kind": kind, "leader": leader,
                         "isr": list(isr), "detail": detail, "source": "console"})

    def _poll_offsets(self, t: int, topics: Mapping[str, TopicDescription]) -> None:
        led = [tp for tp, state in self._partitions.items() if state.leader is not None]
        earliest = self._offsets(led, OffsetSpec.earliest())
        latest = self._offsets(led, OffsetSpec.latest())
        total = 0
        per_topic: dict[str, int] = {}
        for tp, state in self._partitions.items():
            state.start = earliest.get(tp, state.start)
            state.hw = latest.get(tp, state.hw)
            if state.hw is not None:
                per_topic[tp.topic] = per_topic.get(tp.topic, 0) + state.hw
                if tp.topic not in self._internal:
                    total += state.hw
        if self._last_total is not None and t > self._last_total[0]:
            dt = (t - self._last_total[0]) / 1000
            self._rate_in = (t, max(0, total - self._last_total[1]) / dt)
            self._topic_rate = {
                name: max(0, hw - self._last_topic_hw.get(name, hw)) / dt
                for name, hw in per_topic.items()}
        self._last_total = (t, total)
        self._last_topic_hw = per_topic

    def _offsets(self, partitions: list[TopicPartition], spec: OffsetSpec,
                 isolation_level: int = READ_UNCOMMITTED) -> dict[TopicPartition, int]:
        if not partitions:
            return {}
        result = self.admin.list_offsets({tp: spec for tp in partitions},
                                         isolation_level=isolation_level,
                                         timeout_ms=POLL_TIMEOUT_MS)
        offsets: dict[TopicPartition, int] = {}
        for tp, future in result.items():
            try:
                offsets[tp] = future.result().offset
            except KafkaError:
                continue   # a leader moving; the next poll asks again
        return offsets

    def _refresh_min_isr(self, topics: Mapping[str, TopicDescription]) -> None:
        fresh = time.monotonic() - self._min_isr_read < CONFIG_REFRESH_S
        if fresh and set(self._min_isr) >= set(topics):
            return
        self._min_isr_read = time.monotonic()
        resources = [ConfigResource(ConfigResourceType.TOPIC, name) for name in topics]
        if not resources:
            return
        result = self.admin.describe_configs(resources, timeout_ms=POLL_TIMEOUT_MS)
        for resource, future in result.items():
            try:
                entry = future.result().get("min.insync.replicas")
            except KafkaError:
                continue   # not allowed to read it: no under-min-ISR alert for the topic
            if entry is not None and entry.value is not None and entry.value.isdigit():
                self._min_isr[resource.name] = int(entry.value)
        for name in [n for n in self._min_isr if n not in topics]:
            del self._min_isr[name]

    def _poll_groups(self, t: int) -> None:
        listings = self.admin.list_groups(timeout_ms=GROUP_TIMEOUT_MS)
        ids = [g.group_id for g in listings]
        rows: dict[str, dict[str, Any]] = {}
        for group_id in ids:
            try:
                view = self.admin.describe_group_offsets(group_id,
                                                         timeout_ms=GROUP_TIMEOUT_MS)
            except MillraceError as e:
                last = self._group_rows.get(group_id) or {
                    "id": group_id, "state": "?", "protocol_type": "", "members": 0,
                    "lag": None, "status": "NOTFOUND"}
                rows[group_id] = {**last, "error": _error_text(e)}
                continue
            rows[group_id] = self._observe_group(t, group_id, view)
        for gone in [g for g in self._groups if g not in rows]:
            del self._groups[gone]
        self._burrow.retain_groups(rows)
        self._group_rows = rows

    def _observe_group(self, t: int, group_id: str, view: Any) -> dict[str, Any]:
        group = view.group
        history = self._groups.get(group_id)
        if history is None:
            history = self._groups[group_id] = GroupHistory()
        state = str(group.state)
        members = frozenset(f"{m.client_id} ({m.host})" for m in group.members)
        if history.state is not None and (state != history.state
                                          or members != history.members):
            history.rebalances.append({
                "t": t, "generation": None, "state": state, "members": len(members),
                "reason": _membership_change(history.state, state, history.members,
                                             members)})
        changed = state != history.state or members != history.members
        history.state, history.members = state, members
        self._read_coordinator_history(group, history, changed)
        total = 0
        lags: dict[tuple[str, int], int] = {}
        partitions = []
        for p in view.partitions:
            tp = TopicPartition(p.topic, p.partition)
            lag = None
            if p.offset is not None and p.log_end_offset is not None:
                lag = max(0, p.log_end_offset - p.offset)
                total += lag
                lags[(p.topic, p.partition)] = lag
            if p.log_end_offset is not None:
                self._burrow.record_log_end((p.topic, p.partition), p.log_end_offset)
            if p.offset is not None and history.committed.get(tp) != p.offset:
                history.committed[tp] = p.offset
                self._burrow.record_commit(group_id, (p.topic, p.partition), p.offset, t, lag)
            partitions.append({"topic": p.topic, "partition": p.partition,
                               "offset": p.offset, "end": p.log_end_offset, "lag": lag,
                               "member": p.consumer_id})
        history.lag.append({"t": t, "lag": total})
        status = self._burrow.evaluate(group_id, lags, t)
        self._group_partitions[group_id] = partitions
        self._group_meta[group_id] = {
            "protocol": group.partition_assignor,
            "coordinator": group.coordinator.id if group.coordinator is not None else None,
            "members": [{"member_id": m.member_id, "client_id": m.client_id, "host": m.host,
                         "assignment": sorted(f"{tp.topic}-{tp.partition}" for tp
                                              in m.assignment.topic_partitions)}
                        for m in group.members]}
        return {"id": group_id, "state": state, "protocol_type": group.protocol_type,
                "members": len(group.members), "lag": total if lags else None,
                "status": _status_name(status.status)}

    def _read_coordinator_history(self, group: Any, history: GroupHistory,
                                  changed: bool) -> None:
        """A millrace coordinator keeps each rebalance's reason (KIP-800); read it when
        the group changed, else every ``COORDINATOR_REFRESH_S``.  Any other broker has no
        such view: the console's own observations stand."""
        if self.broker_http is None:
            return
        if not changed and time.monotonic() - history.coordinator_read < COORDINATOR_REFRESH_S:
            return
        history.coordinator_read = time.monotonic()
        try:
            view = self.broker_http.group_view(group)
        except BrokerHttpUnavailable:
            return
        events = view.get("rebalances")
        if isinstance(events, list):
            history.coordinator_rebalances = [
                {**event, "source": "coordinator"} for event in events
                if isinstance(event, dict)]

    # ------------------------------------------------------------------ views
    def _build_snapshot(self, t: int) -> dict[str, Any]:
        cluster = self._cluster
        assert cluster is not None  # built only after a poll that described it
        controller = cluster.controller.id if cluster.controller is not None else None
        live = {n.id for n in cluster.nodes}
        leaders: dict[int, int] = {}
        replicas: dict[int, int] = {}
        for state in self._partitions.values():
            if state.leader is not None:
                leaders[state.leader] = leaders.get(state.leader, 0) + 1
            for r in state.replicas:
                replicas[r] = replicas.get(r, 0) + 1
        ids = sorted(set(self._known_brokers) | set(replicas))
        brokers = [{**self._known_brokers.get(b, {"id": b, "host": "?", "port": 0,
                                                  "rack": None}),
                    "up": b in live, "controller": b == controller,
                    "leaders": leaders.get(b, 0), "replicas": replicas.get(b, 0)}
                   for b in ids]
        groups_of = self._groups_by_topic()
        topics = []
        for name, topic in sorted(self._topics.items()):
            states = [self._partitions[TopicPartition(name, p.partition)]
                      for p in topic.partitions
                      if TopicPartition(name, p.partition) in self._partitions]
            topics.append({
                "name": name, "internal": name in self._internal,
                "partitions": len(states),
                "rf": max((len(s.replicas) for s in states), default=0),
                "under_replicated": sum(len(s.isr) < len(s.replicas) for s in states),
                "offline": sum(s.leader is None for s in states),
                "messages": sum((s.hw or 0) - (s.start or 0) for s in states),
                "size": self._topic_size(name, topic),
                "rate": round(self._topic_rate.get(name, 0.0), 1),
                "groups": sorted(groups_of.get(name, ()))})
        return {"time": t, "read_only": self.read_only, "error": None,
                "warnings": list(self._warnings),
                "cluster": {"id": cluster.cluster_id, "controller": controller,
                            "brokers": brokers},
                "alerts": self._alerts(controller, live),
                "throughput": list(self._throughput),
                "topics": topics,
                "groups": [self._group_rows[g] for g in sorted(self._group_rows)]}

    def _topic_size(self, name: str, topic: TopicDescription) -> int | None:
        """The bytes of the topic's partitions (their leaders' logs); None when unknown."""
        found = [self._sizes.get(TopicPartition(name, p.partition)) for p in topic.partitions]
        known = [size for size in found if size is not None]
        return sum(known) if known else None

    def _groups_by_topic(self) -> dict[str, set[str]]:
        found: dict[str, set[str]] = {}
        for group_id, partitions in self._group_partitions.items():
            if group_id in self._group_rows:
                for p in partitions:
                    found.setdefault(p["topic"], set()).add(group_id)
        return found

    def _alerts(self, controller: int | None, live: set[int]) -> list[dict[str, str]]:
        alerts: list[dict[str, str]] = []
        under = [tp for tp, s in self._partitions.items() if len(s.isr) < len(s.replicas)]
        if under:
            alerts.append(_alert("UnderReplicatedPartitions", "warning",
                                 f"{len(under)} partition(s) with fewer in-sync replicas "
                                 f"than replicas: {_some(under)}"))
        under_min = [tp for tp, s in self._partitions.items()
                     if tp.topic in self._min_isr and len(s.isr) < self._min_isr[tp.topic]]
        if under_min:
            alerts.append(_alert("UnderMinIsrPartitionCount", "critical",
                                 f"{len(under_min)} partition(s) below min.insync.replicas "
                                 f"(acks=all produce fails): {_some(under_min)}"))
        offline = [tp for tp, s in self._partitions.items() if s.leader is None]
        if offline:
            alerts.append(_alert("OfflinePartitionsCount", "critical",
                                 f"{len(offline)} partition(s) without a leader: "
                                 f"{_some(offline)}"))
        if controller is None:
            alerts.append(_alert("ActiveControllerCount", "critical",
                                 "the cluster reports no active controller"))
        down = sorted({r for s in self._partitions.values() for r in s.replicas} - live)
        if down:
            alerts.append(_alert("BrokerDown", "critical",
                                 f"broker(s) {down} hold replicas but are not registered"))
        if self._offline_dirs:
            dirs = [f"broker {b}: {d}" for b, found in sorted(self._offline_dirs.items())
                    for d in found]
            alerts.append(_alert("OfflineLogDirectoryCount", "critical",
                                 f"{len(dirs)} log dir(s) offline: {'; '.join(dirs[:5])}"))
        return alerts

    def topic_detail(self, name: str) -> dict[str, Any] | None:
        topic = self._topics.get(name)
        if topic is None:
            return None
        rows = []
        lso = self._offsets([TopicPartition(name, p.partition) for p in topic.partitions
                             if p.leader is not None], OffsetSpec.latest(),
                           READ_COMMITTED)   # the last stable offset
        for p in topic.partitions:
            tp = TopicPartition(name, p.partition)
            state = self._partitions.get(tp)
            if state is None:
                continue
            rows.append({"partition": p.partition, "leader": state.leader,
                         "replicas": state.replicas, "isr": state.isr,
                         "start": state.start, "hw": state.hw, "end": state.hw,
                         "lso": lso.get(tp), "size": self._sizes.get(tp)})
        configs = []
        resource = ConfigResource(ConfigResourceType.TOPIC, name)
        try:
            config = self.admin.describe_configs([resource],
                                                 timeout_ms=POLL_TIMEOUT_MS)[resource].result()
        except KafkaError as e:
            configs_error: str | None = _error_text(e)
        else:
            configs_error = None
            configs = [{"name": entry.name,
                        "value": None if entry.is_sensitive else entry.value,
                        "source": entry.source.name, "sensitive": entry.is_sensitive}
                       for entry in sorted(config.values(), key=lambda e: e.name)]
        return {"name": name, "internal": name in self._internal, "partitions": rows,
                "configs": configs, "configs_error": configs_error,
                "timeline": self._timeline_of(name),
                "groups": sorted(self._groups_by_topic().get(name, ()))}

    def _timeline_of(self, topic: str) -> list[dict[str, Any]]:
        """The console's observations merged with the brokers' own record of the changes
        they made, with their reasons (millrace brokers: ``/v1/partitions/<topic>/
        state-changes``), newest first.  An observation the brokers also recorded (same
        partition and kind, up to ``MERGE_WINDOW_MS`` after it) is left out."""
        mine = list(reversed(self._timeline.get(topic, ())))   # newest first among ties
        theirs = self._broker_state_changes(topic)
        if theirs:
            def recorded(entry: dict[str, Any]) -> bool:
                return any(b["partition"] == entry["partition"] and b["kind"] == entry["kind"]
                           and 0 <= entry["t"] - b["t"] <= MERGE_WINDOW_MS for b in theirs)
            mine = [e for e in mine if e["kind"] == "first-seen" or not recorded(e)]
        return sorted(mine + theirs[::-1], key=lambda e: e["t"], reverse=True)

    def _broker_state_changes(self, topic: str) -> list[dict[str, Any]]:
        cluster = self._cluster
        if self.broker_http is None or cluster is None:
            return []
        found: list[dict[str, Any]] = []
        for node in cluster.nodes:
            try:
                view = self.broker_http.get(node.id, node.host,
                                            f"/v1/partitions/{quote(topic, safe='')}"
                                            "/state-changes")
            except BrokerHttpUnavailable:
                continue
            for change in view.get("changes", ()):
                if isinstance(change, dict) and isinstance(change.get("t"), int):
                    found.append({**change, "source": f"broker {node.id}"})
        return found

    def group_detail(self, group_id: str) -> dict[str, Any] | None:
        row = self._group_rows.get(group_id)
        if row is None:
            return None
        history = self._groups.get(group_id, GroupHistory())
        meta = self._group_meta.get(group_id, {"protocol": "", "coordinator": None,
                                               "members": []})
        rebalances = (history.coordinator_rebalances
                      if history.coordinator_rebalances is not None
                      else [{**event, "source": "console"} for event in history.rebalances])
        return {**row, **meta, "partitions": self._group_partitions.get(group_id, []),
                "lag_history": list(history.lag),
                "rebalances": list(reversed(rebalances))}


def _alert(name: str, severity: str, message: str) -> dict[str, str]:
    return {"name": name, "severity": severity, "message": message}


def _some(partitions: Iterable[TopicPartition], most: int = 5) -> str:
    names = sorted(f"{tp.topic}-{tp.partition}" for tp in partitions)
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(names[:most]) + more


def _membership_change(before_state: str, state: str, before: frozenset[str],
                       after: frozenset[str]) -> str:
    parts = []
    joined = sorted(after - before)
    left = sorted(before - after)
    if joined:
        parts.append("joined: " + ", ".join(joined))
    if left:
        parts.append("left: " + ", ".join(left))
    if before_state != state:
        parts.append(f"state {before_state} -> {state}")
    return "; ".join(parts) + " (observed by the console)"


def _status_name(status: Status) -> str:
    if status in (Status.STOP, Status.STALL, Status.REWIND):
        return f"ERR ({status.name})"
    return status.name


def _error_text(error: BaseException) -> str:
    if isinstance(error, KafkaError):
        return error.name if error.message == error.name else f"{error.name}: {error.message}"
    return str(error) or type(error).__name__
