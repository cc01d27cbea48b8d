"""ClusterWatcher against an in-process fake admin client: the history it keeps (leader and
ISR timeline, throughput, lag, rebalances), the alerts it raises and, as their negative
control, the healthy cluster that raises none."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest

from millrace.client.admin import (
    ClusterDescription,
    Config,
    ConfigEntry,
    ConsumerGroupDescription,
    ConsumerGroupListing,
    ConsumerGroupOffsets,
    ConsumerGroupState,
    ListOffsetsResultInfo,
    LogDirDescription,
    MemberAssignment,
    MemberDescription,
    Node,
    PartitionAssignmentState,
    ReplicaInfo,
    TopicDescription,
    TopicListing,
    TopicPartitionInfo,
)
from millrace.client.admin.broker_http import BrokerHttpUnavailable
from millrace.client.errors import KafkaTimeoutError
from millrace.common.errors import ClusterAuthorizationFailedError, KafkaStorageError
from millrace.common.topic_partition import TopicPartition
from millrace.console import watcher as watcher_module
from millrace.console.watcher import ClusterWatcher

NODES = {i: Node(i, "127.0.0.1", 9090 + i) for i in (1, 2, 3)}


def done(value: Any) -> Future[Any]:
    f: Future[Any] = Future()
    f.set_result(value)
    return f


class FakeAdmin:
    """A cluster as the admin APIs would describe it; the tests change it between polls."""

    def __init__(self) -> None:
        self.live = {1, 2, 3}
        self.controller: int | None = 1
        # partition -> (leader, replicas, isr)
        self.partitions = {0: (1, [1, 2, 3], [1, 2, 3]), 1: (2, [2, 3, 1], [2, 3, 1])}
        self.hw = {0: 0, 1: 0}
        self.min_isr = "2"
        self.groups: dict[str, tuple[str, list[str], dict[int, int]]] = {}
        self.unreachable = False
        self.sizes = {(b, p): 1000 * (p + 1) + b for p in (0, 1) for b in (1, 2, 3)}
        self.offline_dirs: dict[int, str] = {}   # broker -> its dir that fails
        self.log_dirs_refused: set[int] = set()

    def describe_cluster(self, **_: Any) -> ClusterDescription:
        if self.unreachable:
            raise KafkaTimeoutError("METADATA: timed out")
        return ClusterDescription("cluster-x", NODES.get(self.controller or 0),
                                  [NODES[i] for i in sorted(self.live)])

    def describe_log_dirs(self, brokers: list[int], **_: Any
                          ) -> dict[int, dict[str, LogDirDescription]]:
        (broker,) = brokers
        if broker in self.log_dirs_refused:
            raise ClusterAuthorizationFailedError("DescribeLogDirs: not authorized")
        dirs = {"/data/a": LogDirDescription(None, {
            TopicPartition("orders", p): ReplicaInfo(size, 0, False)
            for (b, p), size in self.sizes.items() if b == broker})}
        if broker in self.offline_dirs:
            dirs[self.offline_dirs[broker]] = LogDirDescription(
                KafkaStorageError("the dir is offline"), {})
        return {broker: dirs}

    def list_topics(self, **_: Any) -> list[TopicListing]:
        return [TopicListing("orders", None, False)]

    def describe_topics(self, names: list[str], **_: Any) -> dict[str, Future[Any]]:
        parts = [TopicPartitionInfo(p, NODES[leader] if leader else None,
                                    [NODES[r] for r in replicas], [NODES[r] for r in isr])
                 for p, (leader, replicas, isr) in sorted(self.partitions.items())]
        return {"orders": done(TopicDescription("orders", None, False, parts))}

    def list_offsets(self, specs: dict[Any, Any], **_: Any) -> dict[Any, Future[Any]]:
        return {tp: done(ListOffsetsResultInfo(0 if spec.timestamp == -2 else
                                               self.hw[tp.partition], -1, None))
                for tp, spec in specs.items()}

    def describe_configs(self, resources: list[Any], **_: Any) -> dict[Any, Future[Any]]:
        return {r: done(Config([ConfigEntry("min.insync.replicas", self.min_isr)]))
                for r in resources}

    def list_groups(self, **_: Any) -> list[ConsumerGroupListing]:
        return [ConsumerGroupListing(g, False, ConsumerGroupState(state))
                for g, (state, _, _) in self.groups.items()]

    def describe_group_offsets(self, group_id: str, **_: Any) -> ConsumerGroupOffsets:
        state, members, committed = self.groups[group_id]
        description = ConsumerGroupDescription(
            group_id, False,
            [MemberDescription(f"{m}-id", None, m, "/10.0.0.9", MemberAssignment())
             for m in members], "range", ConsumerGroupState(state), NODES[2], "consumer")
        rows = [PartitionAssignmentState(group_id, "orders", p, offset, self.hw[p])
                for p, offset in committed.items()]
        return ConsumerGroupOffsets(description, rows)


class FakeHttp:
    def __init__(self, view: dict[str, Any] | None) -> None:
        self.view = view
        self.asked = 0

    def group_view(self, group: Any) -> dict[str, Any]:
        self.asked += 1
        if self.view is None:
            raise BrokerHttpUnavailable("not a millrace broker")
        return self.view


@pytest.fixture(autouse=True)
def clock(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    now = [1_000_000]
    monkeypatch.setattr(watcher_module, "now_ms", lambda: now[0])
    return now


def poll(w: ClusterWatcher, clock: list[int], step_ms: int = 1000) -> dict[str, Any]:
    clock[0] += step_ms
    return w.poll()


def test_a_healthy_cluster_raises_no_alert() -> None:
    snapshot = ClusterWatcher(FakeAdmin()).poll()   # type: ignore[arg-type]
    assert snapshot["error"] is None and snapshot["alerts"] == []
    assert [b["id"] for b in snapshot["cluster"]["brokers"]] == [1, 2, 3]
    assert all(b["up"] for b in snapshot["cluster"]["brokers"])
    assert snapshot["topics"][0]["under_replicated"] == 0


def test_a_follower_leaving_the_isr_is_a_timeline_entry_and_alerts(clock: list[int]) -> None:
    admin = FakeAdmin()
    w = ClusterWatcher(admin)   # type: ignore[arg-type]
    poll(w, clock)
    admin.partitions[0] = (1, [1, 2, 3], [1])          # 2 and 3 left: below min ISR 2
    admin.partitions[1] = (3, [2, 3, 1], [3, 1])       # a new leader, 2 out of the ISR
    admin.live = {1, 3}
    snapshot = poll(w, clock)
    names = {a["name"] for a in snapshot["alerts"]}
    assert names == {"UnderReplicatedPartitions", "UnderMinIsrPartitionCount", "BrokerDown"}
    detail = w.topic_detail("orders")
    assert detail is not None
    kinds = [(e["partition"], e["kind"]) for e in detail["timeline"]]   # newest first
    assert sorted(kinds[:3]) == [(0, "isr-shrink"), (1, "isr-shrink"), (1, "leader")]
    assert sorted(kinds[3:]) == [(0, "first-seen"), (1, "first-seen")]

    admin.partitions = {0: (1, [1, 2, 3], [1, 2, 3]), 1: (3, [2, 3, 1], [3, 1, 2])}
    admin.live = {1, 2, 3}
    snapshot = poll(w, clock)
    assert snapshot["alerts"] == []                    # cleared once back in sync
    detail = w.topic_detail("orders")
    assert detail is not None
    assert [(e["partition"], e["kind"]) for e in detail["timeline"][:2]] == [
        (1, "isr-expand"), (0, "isr-expand")]


def test_an_offline_partition_and_no_controller_are_critical(clock: list[int]) -> None:
    admin = FakeAdmin()
    w = ClusterWatcher(admin)   # type: ignore[arg-type]
    admin.partitions[1] = (0, [2, 3, 1], [])
    admin.controller = None
    alerts = {a["name"]: a["severity"] for a in poll(w, clock)["alerts"]}
    assert alerts["OfflinePartitionsCount"] == "critical"
    assert alerts["ActiveControllerCount"] == "critical"


def test_sizes_are_the_leaders_logs_and_an_offline_log_dir_is_critical(
        clock: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watcher_module, "LOG_DIRS_REFRESH_S", 0.0)
    admin = FakeAdmin()
    w = ClusterWatcher(admin)   # type: ignore[arg-type]
    snapshot = poll(w, clock)
    # partition 0 is led by broker 1 (1001 bytes there), partition 1 by broker 2 (2002)
    assert snapshot["topics"][0]["size"] == 1001 + 2002
    detail = w.topic_detail("orders")
    assert detail is not None
    assert [r["size"] for r in detail["partitions"]] == [1001, 2002]
    assert snapshot["alerts"] == []          # negative control: every dir online

    admin.offline_dirs[3] = "/data/b"
    admin.log_dirs_refused.add(2)            # one broker's refusal hides nothing else
    snapshot = poll(w, clock)
    (alert,) = snapshot["alerts"]
    assert (alert["name"], alert["severity"]) == ("OfflineLogDirectoryCount", "critical")
    assert "broker 3: /data/b" in alert["message"]
    assert "KAFKA_STORAGE_ERROR" in alert["message"]
    assert any("log dirs of broker 2" in warning for warning in snapshot["warnings"])
    # broker 2 led partition 1 but did not answer: the largest replica that did
    assert snapshot["topics"][0]["size"] == 1001 + 2003

    admin.offline_dirs.clear()
    assert poll(w, clock)["alerts"] == []    # cleared when the dir is back


def test_throughput_is_the_high_watermarks_and_the_commits_moving(clock: list[int]) -> None:
    admin = FakeAdmin()
    admin.groups["billing"] = ("Stable", ["a"], {0: 0, 1: 0})
    admin.groups["audit"] = ("Stable", ["b"], {0: 0})
    w = ClusterWatcher(admin)   # type: ignore[arg-type]
    poll(w, clock)
    admin.hw = {0: 300, 1: 200}
    admin.groups["billing"] = ("Stable", ["a"], {0: 100, 1: 60})   # 160 consumed
    admin.groups["audit"] = ("Stable", ["b"], {0: 40})             # 40 more
    snapshot = poll(w, clock, step_ms=2000)
    point = snapshot["throughput"][-1]
    assert point["in"] == pytest.approx(250.0)
    assert point["out"] == pytest.approx(100.0)
    assert snapshot["topics"][0]["rate"] == pytest.approx(250.0)
    assert snapshot["topics"][0]["messages"] == 500
    # a group that goes away is not consumption, nor a negative one
    del admin.groups["audit"]
    admin.groups["billing"] = ("Stable", ["a"], {0: 100, 1: 60})
    assert poll(w, clock)["throughput"][-1]["out"] == 0


def test_lag_history_and_observed_rebalances(clock: list[int]) -> None:
    admin = FakeAdmin()
    admin.hw = {0: 10, 1: 10}
    admin.groups["billing"] = ("Stable", ["a"], {0: 10, 1: 10})
    w = ClusterWatcher(admin, broker_http=FakeHttp(None))   # type: ignore[arg-type]
    poll(w, clock)
    admin.groups["billing"] = ("PreparingRebalance", ["a", "b"], {0: 10, 1: 10})
    admin.hw = {0: 40, 1: 10}
    poll(w, clock)
    detail = w.group_detail("billing")
    assert detail is not None
    assert [p["lag"] for p in detail["lag_history"]] == [0, 30]
    (event,) = detail["rebalances"]
    assert event["source"] == "console"
    assert "joined: b (/10.0.0.9)" in event["reason"]
    assert "state Stable -> PreparingRebalance" in event["reason"]
    assert detail["members"][1]["client_id"] == "b"


def test_the_coordinators_reasons_replace_the_observations(clock: list[int]) -> None:
    admin = FakeAdmin()
    admin.groups["billing"] = ("Stable", ["a"], {0: 0})
    http = FakeHttp({"rebalances": [{"t": 5, "generation": 3, "state": "Stable",
                                     "members": 2, "reason": "adding new member b-id; "
                                                             "client reason: scale out"}]})
    w = ClusterWatcher(admin, broker_http=http)   # type: ignore[arg-type]
    poll(w, clock)
    admin.groups["billing"] = ("Stable", ["a", "b"], {0: 0})
    poll(w, clock)
    detail = w.group_detail("billing")
    assert detail is not None
    assert [e["reason"] for e in detail["rebalances"]] == [
        "adding new member b-id; client reason: scale out"]
    assert detail["rebalances"][0]["source"] == "coordinator"
    assert http.asked == 2          # once at first sight, once when the members changed
    poll(w, clock)
    assert http.asked == 2          # unchanged and read 1 s ago: not asked again


def test_an_unreachable_cluster_keeps_the_last_state_and_says_why(clock: list[int]) -> None:
    admin = FakeAdmin()
    w = ClusterWatcher(admin)   # type: ignore[arg-type]
    first = poll(w, clock)
    admin.unreachable = True
    snapshot = poll(w, clock)
    assert snapshot["error"] == "METADATA: timed out"
    assert snapshot["topics"] == first["topics"]
    admin.unreachable = False
    assert poll(w, clock)["error"] is None


class FakeStateChanges(FakeHttp):
    """A millrace broker's /v1/partitions/<topic>/state-changes."""

    def __init__(self, changes: dict[int, list[dict[str, Any]]]) -> None:
        super().__init__(None)
        self.changes = changes

    def get(self, broker: int, host: str, path: str) -> dict[str, Any]:
        assert path == "/v1/partitions/orders/state-changes"
        if broker not in self.changes:
            raise BrokerHttpUnavailable("no listener")
        return {"broker": broker, "changes": self.changes[broker]}


def test_the_brokers_record_replaces_what_the_console_observed(clock: list[int]) -> None:
    admin = FakeAdmin()
    http = FakeStateChanges({})
    w = ClusterWatcher(admin, broker_http=http)   # type: ignore[arg-type]
    poll(w, clock)
    admin.partitions[0] = (1, [1, 2, 3], [1, 2])
    poll(w, clock)
    shrink_seen = clock[0]
    # broker 1 (the leader) recorded the shrink, with its reason, before the console saw it
    http.changes[1] = [{"t": shrink_seen - 300, "topic": "orders", "partition": 0,
                        "kind": "isr-shrink", "leader": 1, "isr": [1, 2], "broker": 1,
                        "detail": "[3] left the ISR [1, 2, 3] -> [1, 2]: not caught up"},
                       {"t": shrink_seen - 60_000, "topic": "orders", "partition": 1,
                        "kind": "leader", "leader": 2, "isr": [2, 3, 1], "broker": 1,
                        "detail": "an older term the console never saw"}]
    detail = w.topic_detail("orders")
    assert detail is not None
    timeline = [(e["kind"], e["source"]) for e in detail["timeline"]]
    assert timeline == [("isr-shrink", "broker 1"), ("first-seen", "console"),
                        ("first-seen", "console"), ("leader", "broker 1")]

    # negative control: without the brokers' record the console's own observation stands
    http.changes.clear()
    detail = w.topic_detail("orders")
    assert detail is not None
    assert (detail["timeline"][0]["kind"], detail["timeline"][0]["source"]) == (
        "isr-shrink", "console")
