"""The broker's gauges (``register_broker_metrics``) on a single node built by
``KafkaServer.build_services``, scraped through the Prometheus exposition and parsed with
prometheus_client's own parser: the exact series names of the JMX exporter's Kafka rules,
each value moved by the state it reads.  Also the ISR meters of the ZooKeeper ISR manager,
the controller's event metrics and its unclean-election count, and the ZooKeeper client's
session meters and request latency."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import KeeperState
from prometheus_client.parser import text_string_to_metric_families

from millrace.broker.controller.controller_result import ControllerConfig
from millrace.broker.controller.controller_state import ControllerState
from millrace.broker.controller.kafka_controller import KafkaController
from millrace.broker.controller_service import ControllerService
from millrace.broker.group.group_metadata import GroupMetadata, GroupState
from millrace.broker.metadata import PartitionState
from millrace.broker.metrics.broker_metrics import register_broker_metrics
from millrace.broker.metrics.prometheus import collector_registry, exposition
from millrace.broker.metrics.registry import KafkaMetricsRegistry
from millrace.broker.metrics.yammer import Histogram, Timer
from millrace.broker.partition import IsrChangeMeters, Partition
from millrace.broker.zk.errors import ZkBadVersionError
from millrace.broker.zk.zk_data import LeaderIsrAndControllerEpoch
from millrace.broker.zk.zookeeper_client import ZooKeeperClient
from millrace.broker.zk_alter_isr_manager import ZkAlterIsrManager
from millrace.common.errors import Errors
from millrace.common.topic_partition import TopicPartition
from millrace.protocol import ApiKey
from tests.unit.broker.brokergen import PRODUCE_V, Broker, batch, produce_req, settle
from tests.unit.broker.controller.ctlgen import Cluster, ZkStore, broker, state, topic

Series = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(registry: KafkaMetricsRegistry) -> Series:
    """Every sample of a scrape (text format 0.0.4), by (name, labels)."""
    body, content_type = exposition(collector_registry(registry), None)
    assert content_type.startswith("text/plain")
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(body.decode())
            for s in family.samples}


def value(series: Series, name: str, **labels: str) -> float:
    return series[(name, frozenset(labels.items()))]


def registered(b: Broker) -> KafkaMetricsRegistry:
    registry = b.services.metrics
    register_broker_metrics(registry, b.services)
    return registry


def test_throughput_and_log_series_after_produce(broker: Broker) -> None:
    registry = registered(broker)

    async def main() -> None:
        broker.create_topic("t")
        before = scrape(registry)
        assert value(before, "kafka_server_brokertopicmetrics_messagesin_total") == 0
        assert value(before, "kafka_log_log_size", topic="t", partition="0") == 0
        for values in ((b"a", b"b", b"c"), (b"d", b"e")):
            got = await broker.call(ApiKey.PRODUCE, PRODUCE_V,
                                    produce_req({("t", 0): batch(*values)}))
            assert got.responses[0].partition_responses[0].error_code == 0
        after = scrape(registry)
        assert value(after, "kafka_server_brokertopicmetrics_messagesin_total", topic="t") == 5
        assert value(after, "kafka_server_brokertopicmetrics_messagesin_total") == 5
        assert value(after, "kafka_server_brokertopicmetrics_totalproducerequests_total",
                     topic="t") == 2
        log = broker.partition("t").log
        assert value(after, "kafka_log_log_size", topic="t", partition="0") == log.size > 0
        assert value(after, "kafka_log_log_logendoffset", topic="t", partition="0") == 5
        assert value(after, "kafka_log_log_logstartoffset", topic="t", partition="0") == 0
        assert value(after, "kafka_log_log_numlogsegments", topic="t", partition="0") == 1
        # kafbat UI's rate gauge: the label-less aggregate exists (kafbat #1874)
        assert ("kafka_server_BrokerTopicMetrics_FifteenMinuteRate",
                frozenset({("name", "BytesInPerSec")})) in after

    asyncio.run(main())


def test_single_node_controller_and_health_gauges(broker: Broker) -> None:
    registry = registered(broker)
    broker.create_topic("t", 3)
    series = scrape(registry)
    assert value(series, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(series, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    # t plus the two internal topics (one partition each in these tests)
    assert value(series, "kafka_controller_kafkacontroller_globaltopiccount") == 3
    assert value(series, "kafka_controller_kafkacontroller_globalpartitioncount") == 5
    assert value(series, "kafka_controller_kafkacontroller_controllerstate") == 0
    assert value(series, "kafka_controller_controllereventmanager_eventqueuesize") == 0
    assert value(series, "kafka_controller_controllerstats_leaderelectionrateandtimems_count") == 0
    assert value(series, "kafka_controller_controllerstats_uncleanleaderelections_total") == 0
    assert value(series, "kafka_server_replicamanager_leadercount") == 5
    assert value(series, "kafka_server_replicamanager_partitioncount") == 5
    assert value(series, "kafka_server_replicamanager_offlinereplicacount") == 0
    assert value(series, "kafka_server_replicamanager_isrshrinks_total") == 0
    assert value(series, "kafka_log_logmanager_offlinelogdirectorycount") == 0
    assert value(series, "kafka_server_replicafetchermanager_maxlag", clientid="Replica") == 0
    assert value(series, "kafka_server_delayedoperationpurgatory_purgatorysize",
                 delayedoperation="Produce") == 0
    assert value(series, "kafka_server_delayedoperationpurgatory_numdelayedoperations",
                 delayedoperation="Fetch") == 0
    # no ZooKeeper on a single node: no session state
    assert not any(name.startswith("kafka_server_sessionexpirelistener") for name, _ in series)


def test_under_replicated_and_min_isr_follow_the_partition_state(broker: Broker) -> None:
    registry = registered(broker)
    broker.create_topic("t", 1, {"min.insync.replicas": "2"})
    p = broker.partition("t")
    series = scrape(registry)
    assert value(series, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(series, "kafka_cluster_partition_underreplicated", topic="t", partition="0") == 0
    assert value(series, "kafka_cluster_partition_replicascount", topic="t", partition="0") == 1
    # one replica of two in sync: under-replicated, under min ISR (2)
    p.make_leader(PartitionState(1, p.leader_epoch, (1,)), [1, 2])
    series = scrape(registry)
    assert value(series, "kafka_server_replicamanager_underreplicatedpartitions") == 1
    assert value(series, "kafka_server_replicamanager_underminisrpartitioncount") == 1
    # the two internal topics' single replicas are at their min ISR (1) all along
    assert value(series, "kafka_server_replicamanager_atminisrpartitioncount") == 2
    assert value(series, "kafka_cluster_partition_atminisr", topic="t", partition="0") == 0
    assert value(series, "kafka_cluster_partition_underreplicated", topic="t", partition="0") == 1
    assert value(series, "kafka_cluster_partition_underminisr", topic="t", partition="0") == 1
    assert value(series, "kafka_cluster_partition_insyncreplicascount",
                 topic="t", partition="0") == 1
    assert value(series, "kafka_cluster_partition_replicascount", topic="t", partition="0") == 2
    # both in sync: at min ISR, not under-replicated
    p.make_leader(PartitionState(1, p.leader_epoch, (1, 2)), [1, 2])
    series = scrape(registry)
    assert value(series, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(series, "kafka_server_replicamanager_underminisrpartitioncount") == 0
    assert value(series, "kafka_server_replicamanager_atminisrpartitioncount") == 3
    assert value(series, "kafka_cluster_partition_atminisr", topic="t", partition="0") == 1
    # a follower's partition is not counted (nor listed per partition)
    p.make_follower(PartitionState(2, p.leader_epoch + 1, (2,)), [1, 2])
    series = scrape(registry)
    assert value(series, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert ("kafka_cluster_partition_underreplicated",
            frozenset({("topic", "t"), ("partition", "0")})) not in series
    assert value(series, "kafka_server_replicamanager_leadercount") == 2  # the internal ones


def test_a_parked_acks_all_produce_is_in_the_produce_purgatory(broker: Broker) -> None:
    registry = registered(broker)

    async def main() -> None:
        broker.create_topic("t")
        p = broker.partition("t")
        p.make_leader(PartitionState(1, p.leader_epoch, (1, 2)), [1, 2])  # 2 never fetches
        task = asyncio.create_task(broker.call(
            ApiKey.PRODUCE, PRODUCE_V, produce_req({("t", 0): batch(b"x")}, acks=-1)))
        await settle()
        assert not task.done()
        series = scrape(registry)
        assert value(series, "kafka_server_delayedoperationpurgatory_purgatorysize",
                     delayedoperation="Produce") == 1
        assert value(series, "kafka_server_delayedoperationpurgatory_numdelayedoperations",
                     delayedoperation="Produce") == 1
        task.cancel()
        broker.services.replica_manager.produce_purgatory.shutdown()

    asyncio.run(main())


def test_group_counts_by_state(broker: Broker) -> None:
    registry = registered(broker)
    groups = broker.services.group_coordinator.coordinator.groups
    assert value(scrape(registry), "kafka_coordinator_group_groupmetadatamanager_numgroups") == 0
    stable = GroupMetadata("a", 0)
    stable.state = GroupState.STABLE
    stable.offsets = {("t", 0): cast(Any, None), ("t", 1): cast(Any, None)}
    groups["a"] = stable
    groups["b"] = GroupMetadata("b", 0)  # Empty
    series = scrape(registry)
    assert value(series, "kafka_coordinator_group_groupmetadatamanager_numgroups") == 2
    assert value(series, "kafka_coordinator_group_groupmetadatamanager_numoffsets") == 2
    assert value(series, "kafka_coordinator_group_groupmetadatamanager_numgroupsstable") == 1
    assert value(series, "kafka_coordinator_group_groupmetadatamanager_numgroupsempty") == 1
    assert value(series,
                 "kafka_coordinator_group_groupmetadatamanager_numgroupspreparingrebalance") == 0


def test_a_log_flush_is_timed(broker: Broker) -> None:
    registry = registered(broker)

    async def main() -> None:
        broker.create_topic("t")
        await broker.call(ApiKey.PRODUCE, PRODUCE_V, produce_req({("t", 0): batch(b"x")}))
        name = "kafka_log_logflushstats_logflushrateandtimems_count"
        before = value(scrape(registry), name)
        broker.partition("t").log.flush()
        assert value(scrape(registry), name) == before + 1
        broker.partition("t").log.flush()  # nothing new to flush: no fsync, not timed
        assert value(scrape(registry), name) == before + 1

    asyncio.run(main())


# ---------------------------------------------------------------------- ISR meters
class FakeZk:
    """The two writes ZkAlterIsrManager makes, answering as told."""

    def __init__(self, conflict_with: LeaderIsrAndControllerEpoch | None = None) -> None:
        self.conflict_with = conflict_with

    def conditional_update_partition_state(self, tp: TopicPartition,
                                           wanted: LeaderIsrAndControllerEpoch) -> int:
        if self.conflict_with is not None:
            raise ZkBadVersionError("/state", wanted.partition_epoch)
        return wanted.partition_epoch + 1

    def get_topic_partition_state(self, tp: TopicPartition) -> LeaderIsrAndControllerEpoch | None:
        return self.conflict_with

    def propagate_isr_changes(self, tps: list[TopicPartition]) -> None:
        pass


def test_isr_shrinks_expands_and_failed_updates_are_marked(broker: Broker) -> None:
    registry = KafkaMetricsRegistry()
    shrinks, expands, failed = (registry.meter("kafka.server", "ReplicaManager", name) for name in (
        "IsrShrinksPerSec", "IsrExpandsPerSec", "FailedIsrUpdatesPerSec"))
    meters = IsrChangeMeters(shrinks, expands, failed)
    broker.create_topic("t")
    lg = broker.partition("t").log

    def leader(zk: FakeZk, isr: tuple[int, ...]) -> Partition:
        manager = ZkAlterIsrManager(cast(Any, zk), asyncio.get_running_loop(),
                                    lambda _tp: None, meters)
        p = Partition("t", 0, lg, 1, manager)
        p.make_leader(PartitionState(1, 3, isr, partition_epoch=7), [1, 2, 3], now_ms=0)
        return p

    async def answered(p: Partition) -> None:
        assert p.pending_isr is not None          # proposed
        while p.pending_isr is not None:
            await asyncio.sleep(0.001)            # the write runs in the default executor

    def counts() -> tuple[int, int, int]:
        return shrinks.count, expands.count, failed.count

    async def main() -> None:
        p = leader(FakeZk(), (1, 2, 3))
        assert p.maybe_shrink_isr(now_ms=60_000, lag_time_max_ms=30_000) == [2, 3]
        await answered(p)
        assert p.isr == (1,)
        assert counts() == (1, 0, 0)
        p.update_follower_fetch_state(2, lg.log_end_offset, now_ms=60_000)  # caught up
        await answered(p)
        assert p.isr == (1, 2)
        assert counts() == (1, 1, 0)
        moved_on = LeaderIsrAndControllerEpoch(2, 4, (2, 3), 1, partition_epoch=9)
        p = leader(FakeZk(conflict_with=moved_on), (1, 2, 3))
        p.maybe_shrink_isr(now_ms=60_000, lag_time_max_ms=30_000)
        await answered(p)
        assert p.isr == (1, 2, 3)                 # refused: nothing applied
        assert counts() == (1, 1, 1)

    asyncio.run(main())


# ---------------------------------------------------------------------- controller
def test_controller_events_are_timed_by_state_and_their_queue_time_recorded(
        broker: Broker) -> None:
    registry = KafkaMetricsRegistry()

    async def main() -> None:
        service = ControllerService(broker.config, broker.time, cast(Any, None),
                                    metrics=registry)
        task = asyncio.get_running_loop().create_task(service._run())
        seen: list[ControllerState] = []
        finished = asyncio.Event()

        async def broker_change() -> None:
            seen.append(service.state)
            finished.set()
        service.enqueue(broker_change, ControllerState.BROKER_CHANGE)
        assert service.queue_size == 1
        await finished.wait()
        # an API-driven event is classified by the controller method it calls
        result = await service.run_event(lambda c: c.on_controlled_shutdown(2, 5))
        assert result.error == Errors.NOT_CONTROLLER   # this broker is not the controller
        task.cancel()
        assert seen == [ControllerState.BROKER_CHANGE]
        assert service.state is ControllerState.IDLE
        assert service.queue_size == 0

        def timer(name: str) -> Timer:
            found = registry.find("kafka.controller", "ControllerStats", name)
            assert isinstance(found, Timer)
            return found
        assert timer("LeaderElectionRateAndTimeMs").count == 1
        assert timer("ControlledShutdownRateAndTimeMs").count == 1
        assert timer("TopicChangeRateAndTimeMs").count == 0
        queue_time = registry.find("kafka.controller", "ControllerEventManager",
                                   "EventQueueTimeMs")
        assert isinstance(queue_time, Histogram) and queue_time.count == 2

    asyncio.run(main())


def three_brokers(**configs: str) -> Cluster:
    tps = [TopicPartition("t", p) for p in range(3)]
    zk = ZkStore({tps[0]: state(1, [1, 2, 3], controller_epoch=0),
                  tps[1]: state(2, [2, 3, 1], controller_epoch=0),
                  tps[2]: state(3, [3, 1, 2], controller_epoch=0)})
    c = Cluster(KafkaController(1, ControllerConfig()), zk,
                [broker(1), broker(2), broker(3)],
                [topic("t", {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}, **configs)])
    c.failover()
    return c


def test_only_a_committed_unclean_election_is_counted() -> None:
    clean = three_brokers()
    unclean_elections: list[TopicPartition] = []
    clean.controller.on_unclean_election = unclean_elections.append
    clean.change_brokers([broker(1), broker(3)])        # 2 dies: clean elections
    clean.change_brokers([broker(1)])
    clean.change_brokers([broker(2)])                   # no live ISR member: offline
    assert unclean_elections == []
    c = three_brokers(unclean_leader_election_enable="true")
    c.controller.on_unclean_election = unclean_elections.append
    c.change_brokers([broker(1), broker(3)])
    c.change_brokers([broker(1)])
    assert unclean_elections == []                      # so far every leader was in sync
    c.change_brokers([broker(2)])                       # 2 returns alone: elected unclean
    assert sorted(unclean_elections) == [TopicPartition("t", p) for p in range(3)]
    assert all(c.leadership(tp).leader == 2 for tp in unclean_elections)



# ---------------------------------------------------------------------- ZooKeeper client
def test_session_events_and_request_latency_of_the_zookeeper_client() -> None:
    """kazoo's own session state machine driven as its connection thread drives it (no
    server): each event marks its SessionExpireListener meter."""
    registry = KafkaMetricsRegistry()
    client = ZooKeeperClient("127.0.0.1:1", metrics=registry)
    kazoo = cast(Any, client)._kazoo
    states = []
    for event in (KeeperState.CONNECTING, KeeperState.CONNECTED,     # first connection
                  KeeperState.CONNECTING,                            # dropped
                  KeeperState.EXPIRED_SESSION,                       # expired
                  KeeperState.CONNECTING, KeeperState.CONNECTED_RO,  # read-only server
                  KeeperState.AUTH_FAILED):
        kazoo._session_callback(event)
        states.append(client.session_state)
    assert states == ["CONNECTING", "CONNECTED", "CONNECTING", "CLOSED", "CONNECTING",
                      "CONNECTEDREADONLY", "AUTH_FAILED"]
    kazoo.get = lambda path: (b"{}", None)
    assert client.get_data("/x") == (b"{}", None)

    def no_node(path: str) -> None:
        raise NoNodeError(path)
    kazoo.get = no_node
    assert client.get_data("/y") is None
    series = scrape(registry)
    for name, expected in (("zookeepersyncconnects", 1), ("zookeeperdisconnects", 1),
                           ("zookeeperexpires", 1), ("zookeeperreadonlyconnects", 1),
                           ("zookeeperauthfailures", 1)):
        assert value(series, f"kafka_server_sessionexpirelistener_{name}_total") == expected
    assert value(series,
                 "kafka_server_zookeeperclientmetrics_zookeeperrequestlatencyms_count") == 2
