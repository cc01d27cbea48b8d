"""``ConsumerLagMonitor`` over an in-process broker (MockTime, no sockets): commits
through the OffsetCommit/TxnOffsetCommit handlers reach its window; lag against the high
watermark, or the last stable offset for a group that commits transactionally; log ends
of partitions led elsewhere polled with ListOffsets (a stub leader); Burrow's STOP as the
clock moves; groups no longer coordinated here forgotten; and the gauges as Prometheus
text, parsed back with prometheus_client's parser."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from millrace.broker.metadata import PartitionState
from millrace.broker.metrics.burrow import BurrowConfig
from millrace.broker.metrics.consumer_lag import (
    ConsumerLagMonitor,
    LagConfig,
    start_consumer_lag,
)
from millrace.broker.metrics.prometheus import collector_registry
from millrace.broker.metrics.registry import KafkaMetricsRegistry
from millrace.common.errors import BrokerNotAvailableError, Errors
from millrace.protocol import ApiKey, ListOffsetsRequest, ListOffsetsResponse
from tests.unit.broker.brokergen import NODE, Broker, produce
from tests.unit.broker.group.groupgen import commit_req, txn_commit_req
from tests.unit.broker.group.test_group_txn_broker import idempotent_producer, write_marker
from tests.unit.broker.test_txn_markers import produce_txn

S = 1000


def config(intervals: int = 10, min_distance_ms: int = 0) -> LagConfig:
    return LagConfig(offset_refresh_ms=5000, burrow=BurrowConfig(
        intervals=intervals, min_distance_ms=min_distance_ms))


async def no_remote(node: int, body: ListOffsetsRequest) -> Any:
    raise AssertionError(f"no partition is led elsewhere, yet broker {node} was asked")


def monitor_of(broker: Broker, cfg: LagConfig | None = None, send: Any = no_remote,
               metadata: Any = None) -> ConsumerLagMonitor:
    s = broker.services
    monitor = ConsumerLagMonitor(s.group_coordinator, s.replica_manager,
                                 metadata or s.metadata, broker.time, cfg or config(),
                                 node_id=NODE, send=send)
    monitor.listen()
    return monitor


def run(broker: Broker, body: Callable[[], Coroutine[Any, Any, None]]) -> None:
    async def main() -> None:
        service = broker.services.group_coordinator
        await service.start()
        try:
            await body()
        finally:
            await service.stop()

    asyncio.run(main())


async def commit(broker: Broker, group: str, offsets: dict[tuple[str, int], int]) -> Any:
    return await broker.call(ApiKey.OFFSET_COMMIT, 8, commit_req(group, offsets))


def rows(view: dict[str, Any] | None) -> dict[tuple[str, int], tuple[Any, ...]]:
    """(committed, log end, lag) per partition of a ``describe``."""
    assert view is not None
    return {(p["topic"], p["partition"]): (p["committed_offset"], p["log_end_offset"],
                                           p["lag"])
            for p in view["partitions"]}


def statuses(view: dict[str, Any] | None) -> dict[tuple[str, int], str]:
    assert view is not None
    return {(p["topic"], p["partition"]): p["status"] for p in view["partitions"]}


Samples = set[tuple[frozenset[tuple[str, str]], float]]


def scrape(registry: KafkaMetricsRegistry) -> dict[str, Samples]:
    """Series name -> {(labels, value)}, parsed back from the text exposition."""
    text = generate_latest(collector_registry(registry)).decode()
    return {f.name: {(frozenset(s.labels.items()), s.value) for s in f.samples}
            for f in text_string_to_metric_families(text)}


def sample(value: float, **labels: object) -> tuple[frozenset[tuple[str, str]], float]:
    return frozenset((k, str(v)) for k, v in labels.items()), value


# ---------------------------------------------------------------------- lag
def test_lag_is_the_high_watermark_minus_the_committed_offset(broker: Broker) -> None:
    broker.create_topic("t", 2)
    monitor = monitor_of(broker)

    async def body() -> None:
        for _ in range(10):
            await produce(broker, "t", b"x")
        await produce(broker, "t", b"a", b"b", b"c", b"d", partition=1)
        got = await commit(broker, "g", {("t", 0): 3, ("t", 1): 4, ("nope", 0): 1})
        assert {(t.name, p.error_code) for t in got.topics for p in t.partitions} == {
            ("t", 0), ("nope", Errors.UNKNOWN_TOPIC_OR_PARTITION)}
        assert rows(monitor.describe("g")) == {("t", 0): (3, 10, 7), ("t", 1): (4, 4, 0)}
        # Burrow's rules as written: one commit, with lag, evaluated at its own instant
        # is "every offset in the window equal" (STALL); none without lag.
        assert statuses(monitor.describe("g")) == {("t", 0): "STALL", ("t", 1): "OK"}
        view = monitor.describe("g")
        assert view is not None
        assert view["partitions"][0]["window"] == [
            {"offset": 3, "timestamp": broker.time.milliseconds(), "lag": 7}]
        assert (view["totallag"], view["maxlag"]["partition"]) == (7, 0)
        assert view["isolation"] == "read_uncommitted"
        # a refused partition is in neither the group nor the window
        assert monitor.evaluator.window("g", ("nope", 0)) == ()

        await produce(broker, "t", b"y", b"z")
        assert rows(monitor.describe("g"))[("t", 0)] == (3, 12, 9)
        assert monitor.describe("other") is None
        assert "does not exist" in monitor.not_found_reason("other")

    run(broker, body)


def test_a_group_committing_transactionally_is_measured_at_the_last_stable_offset(
        broker: Broker) -> None:
    broker.create_topic("t")
    monitor = monitor_of(broker)

    async def body() -> None:
        await produce(broker, "t", b"a", b"b", b"c")               # 0-2
        await produce_txn(broker, "t", b"open", b"txn")            # 3-4, still open
        await commit(broker, "g", {("t", 0): 1})
        assert rows(monitor.describe("g"))[("t", 0)] == (1, 5, 4)     # HW 5

        pid, epoch = await idempotent_producer(broker)
        got = await broker.call(ApiKey.TXN_OFFSET_COMMIT, 3, txn_commit_req(
            "g", {("t", 0): 2}, pid, epoch))
        assert got.topics[0].partitions[0].error_code == Errors.NONE
        view = monitor.describe("g")
        assert view is not None and view["isolation"] == "read_committed"
        assert rows(view)[("t", 0)] == (1, 3, 2)   # LSO 3; offset 2 still pending
        write_marker(broker, pid, epoch, committed=True)
        assert rows(monitor.describe("g"))[("t", 0)] == (2, 3, 1)
        assert [e["offset"] for e in view["partitions"][0]["window"]] == [1, 2]

        await commit(broker, "g", {("t", 0): 2})          # a plain commit: HW again
        view = monitor.describe("g")
        assert view is not None and view["isolation"] == "read_uncommitted"
        assert rows(view)[("t", 0)] == (2, 5, 3)

    run(broker, body)


# ---------------------------------------------------------------------- Burrow
def test_a_group_that_stops_committing_turns_stop(broker: Broker) -> None:
    broker.create_topic("t")
    monitor = monitor_of(broker, config(intervals=3, min_distance_ms=S))
    registry = KafkaMetricsRegistry()
    monitor.register_metrics(registry)

    async def body() -> None:
        await produce(broker, "t", *[b"x"] * 10)
        for offset in (1, 2, 3):                          # at T, T+1 s, T+2 s
            await commit(broker, "g", {("t", 0): offset})
            await commit(broker, "caught-up", {("t", 0): 10})
            broker.time.sleep(S)
        await monitor.run_once()                          # polls the log end: 10
        broker.time.sleep(S - 1)                          # 2 s silent - 1 ms = the span
        assert statuses(monitor.describe("g")) == {("t", 0): "OK"}  # lag fell: OK
        broker.time.sleep(1)
        assert statuses(monitor.describe("g")) == {("t", 0): "OK"}  # equal is not more
        broker.time.sleep(1)
        view = monitor.describe("g")
        assert rows(view)[("t", 0)] == (3, 10, 7)
        assert statuses(view) == {("t", 0): "STOP"}
        assert view is not None and (view["status"], view["status_code"]) == ("ERR", 3)
        assert monitor.describe("caught-up")["status"] == "OK"    # type: ignore[index]

        series = scrape(registry)
        cluster = broker.services.metadata.cluster_id
        assert series["burrow_kafka_consumer_status"] == {
            sample(3, cluster=cluster, consumer_group="g"),
            sample(1, cluster=cluster, consumer_group="caught-up")}
        assert sample(4, cluster=cluster, consumer_group="g", topic="t", partition=0) in \
            series["burrow_kafka_topic_partition_status"]
        # the window is full (3 of 3): Burrow's current offset is shown
        assert sample(3, cluster=cluster, consumer_group="g", topic="t", partition=0) in \
            series["burrow_kafka_consumer_current_offset"]

    run(broker, body)


def test_a_commit_resumes_the_group(broker: Broker) -> None:
    """The negative control of STOP: committing again (and catching up) ends it."""
    broker.create_topic("t")
    monitor = monitor_of(broker, config(intervals=3))

    async def body() -> None:
        await produce(broker, "t", *[b"x"] * 10)
        await commit(broker, "g", {("t", 0): 1})
        broker.time.sleep(S)
        await commit(broker, "g", {("t", 0): 2})
        broker.time.sleep(10 * S)
        assert monitor.describe("g")["status"] == "ERR"     # type: ignore[index]
        await commit(broker, "g", {("t", 0): 10})
        assert rows(monitor.describe("g"))[("t", 0)] == (10, 10, 0)
        assert statuses(monitor.describe("g")) == {("t", 0): "OK"}

    run(broker, body)


# ---------------------------------------------------------------------- remote leaders
class ElsewhereMetadata:
    """The broker's metadata, except that topic ``far`` is led by brokers 2 and 3."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        if topic == "far":
            return PartitionState(leader=2 + partition, leader_epoch=0, isr=(2, 3))
        return self.inner.partition_state(topic, partition)

    @property
    def cluster_id(self) -> str:
        return str(self.inner.cluster_id)


def test_log_ends_led_elsewhere_are_polled_from_their_leaders(broker: Broker) -> None:
    broker.create_topic("t")
    asked: list[tuple[int, int, int, list[tuple[str, int, int]]]] = []
    answers: dict[int, int] = {2: 50}

    async def send(node: int, body: ListOffsetsRequest) -> Any:
        asked.append((node, body.replica_id, body.isolation_level,
                      [(t.name, p.partition_index, p.timestamp)
                       for t in body.topics for p in t.partitions]))
        if node not in answers:
            raise BrokerNotAvailableError(f"broker {node} is down")
        r_cls = ListOffsetsResponse.ListOffsetsTopicResponse
        p_cls = r_cls.ListOffsetsPartitionResponse
        return ListOffsetsResponse(throttle_time_ms=0, topics=[r_cls(name=t.name, partitions=[
            p_cls(partition_index=p.partition_index,
                  error_code=Errors.NONE if answers[node] >= 0 else
                  Errors.NOT_LEADER_OR_FOLLOWER,
                  offset=answers[node], timestamp=-1, leader_epoch=0)
            for p in t.partitions]) for t in body.topics])

    monitor = monitor_of(broker, send=send,
                         metadata=ElsewhereMetadata(broker.services.metadata))
    registry = KafkaMetricsRegistry()
    monitor.register_metrics(registry)

    async def body() -> None:
        await produce(broker, "t", b"x", b"y")
        service = broker.services.group_coordinator
        # (the handler would refuse topics this broker does not know; the service not)
        await service.commit_offsets(commit_req("g", {("far", 0): 20, ("far", 1): 5,
                                                      ("t", 0): 1}), 8)
        # before any poll the remote log ends are unknown: no lag, no lag at receipt
        assert rows(monitor.describe("g")) == {("far", 0): (20, None, None),
                                               ("far", 1): (5, None, None),
                                               ("t", 0): (1, 2, 1)}
        assert monitor.evaluator.window("g", ("far", 0))[0].lag is None

        await monitor.run_once()
        assert sorted(asked) == [(2, -1, 0, [("far", 0, -1)]), (3, -1, 0, [("far", 1, -1)])]
        assert rows(monitor.describe("g")) == {("far", 0): (20, 50, 30),
                                               ("far", 1): (5, None, None),
                                               ("t", 0): (1, 2, 1)}
        assert monitor.evaluator.recent_log_ends(("far", 0)) == (50,)
        series = scrape(registry)
        assert series["kafka_consumergroup_lag"] == {     # far-1 unknown: no series
            sample(30, consumergroup="g", topic="far", partition=0),
            sample(1, consumergroup="g", topic="t", partition=0)}
        assert len(series["kafka_consumergroup_current_offset"]) == 3

        answers[2] = -1                                          # the leader moved away
        monitor.evaluator.record_commit("g", ("far", 0), 20, broker.time.milliseconds(), 0)
        await monitor.run_once()
        assert rows(monitor.describe("g"))[("far", 0)] == (20, None, None)

    run(broker, body)


# ---------------------------------------------------------------------- lifecycle
def test_groups_no_longer_coordinated_here_are_forgotten(broker: Broker) -> None:
    broker.create_topic("t")
    monitor = monitor_of(broker)

    async def body() -> None:
        await produce(broker, "t", b"x", b"y")
        await commit(broker, "g", {("t", 0): 1})
        await monitor.run_once()
        assert monitor.evaluator.window("g", ("t", 0)) != ()
        assert [g["group"] for g in monitor.list_groups()] == ["g"]
        broker.services.group_coordinator.unload_partitions([0])
        await monitor.run_once()
        assert monitor.evaluator.window("g", ("t", 0)) == ()
        assert monitor.evaluator.recent_log_ends(("t", 0)) == ()
        assert monitor.describe("g") is None
        assert monitor.list_groups() == []
        assert "does not coordinate" in monitor.not_found_reason("g")

    run(broker, body)


def test_start_consumer_lag_listens_to_commits_and_registers_its_gauges(broker: Broker) -> None:
    broker.create_topic("t")
    services = broker.services

    async def body() -> None:
        monitor = start_consumer_lag(services)
        try:
            assert monitor.on_offset_commit in services.group_coordinator.offset_commit_listeners
            assert "kafka_consumergroup_lag" in services.metrics.raw_families
            await produce(broker, "t", b"x", b"y", b"z")
            await commit(broker, "g", {("t", 0): 1})
            assert monitor.describe("g")["totallag"] == 2
        finally:
            await monitor.stop()
        assert monitor.on_offset_commit not in services.group_coordinator.offset_commit_listeners

    run(broker, body)


# ---------------------------------------------------------------------- gauges
def test_the_exporters_series_with_their_own_label_names(broker: Broker) -> None:
    broker.create_topic("t", 2)
    broker.create_topic("u")
    monitor = monitor_of(broker)
    registry = KafkaMetricsRegistry()
    monitor.register_metrics(registry)

    async def body() -> None:
        await produce(broker, "t", *[b"x"] * 10)
        await produce(broker, "t", *[b"x"] * 6, partition=1)
        await produce(broker, "u", *[b"x"] * 3)
        await commit(broker, "g", {("t", 0): 4, ("t", 1): 5, ("u", 0): 3})
        s = scrape(registry)
        g = "g"
        assert s["kafka_consumergroup_lag"] == {
            sample(6, consumergroup=g, topic="t", partition=0),
            sample(1, consumergroup=g, topic="t", partition=1),
            sample(0, consumergroup=g, topic="u", partition=0)}
        assert s["kafka_consumergroup_current_offset"] == {
            sample(4, consumergroup=g, topic="t", partition=0),
            sample(5, consumergroup=g, topic="t", partition=1),
            sample(3, consumergroup=g, topic="u", partition=0)}
        assert s["kafka_consumergroup_lag_sum"] == {
            sample(7, consumergroup=g, topic="t"), sample(0, consumergroup=g, topic="u")}
        assert s["kafka_consumergroup_current_offset_sum"] == {
            sample(9, consumergroup=g, topic="t"), sample(3, consumergroup=g, topic="u")}
        assert s["kafka_consumergroup_members"] == {sample(0, consumergroup=g)}
        cluster = broker.services.metadata.cluster_id
        assert s["kafka_consumergroup_group_max_lag"] == {
            sample(6, cluster_name=cluster, group=g)}
        assert s["kafka_consumergroup_group_sum_lag"] == {
            sample(7, cluster_name=cluster, group=g)}
        assert s["burrow_kafka_consumer_lag_total"] == {
            sample(7, cluster=cluster, consumer_group=g)}
        assert s["burrow_kafka_consumer_partition_lag"] == {
            sample(6, cluster=cluster, consumer_group=g, topic="t", partition=0),
            sample(1, cluster=cluster, consumer_group=g, topic="t", partition=1),
            sample(0, cluster=cluster, consumer_group=g, topic="u", partition=0)}
        assert not s.get("burrow_kafka_consumer_current_offset")   # windows not full yet

    run(broker, body)


def test_a_raw_gauge_family_is_exposed_unchanged() -> None:
    registry = KafkaMetricsRegistry()
    registry.raw_gauge_family("burrow_kafka_consumer_status", "doc",
                              lambda: [({"consumer_group": "G-1", "cluster": "c"}, 4)])
    registry.gauge_family("kafka.server", "Some-Type", "Value-X",
                          lambda: [({"Consumer-Group": "G-1"}, 1)])
    s = scrape(registry)
    assert s["burrow_kafka_consumer_status"] == {sample(4, consumer_group="G-1", cluster="c")}
    # (the MBean kind beside it is renamed, as the JMX exporter's rules do)
    assert s["kafka_server_some_type_value_x"] == {sample(1, consumer_group="G-1")}
