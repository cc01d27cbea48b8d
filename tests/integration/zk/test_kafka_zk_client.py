"""``KafkaZkClient`` against a real ZooKeeper: broker epochs, ephemeral registrations,
controller election and its epoch fence, conditional partition-state writes, chroots,
topics, notifications and producer-id blocks."""

from __future__ import annotations

import queue
import threading
import time
import uuid
from collections.abc import Callable

import pytest
from kazoo.client import KazooClient

from millrace.broker.zk import (
    BrokerInfo,
    ControllerMovedError,
    EndPoint,
    KafkaZkClient,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    ZkBadVersionError,
    ZkNodeExistsError,
)
from millrace.broker.zk import zk_data as zd
from millrace.common.topic_partition import TopicPartition
from millrace.launcher.zookeeper_process import ZooKeeperProcess

pytestmark = [pytest.mark.integration]

Factory = Callable[[], KafkaZkClient]
TP0 = TopicPartition("orders", 0)
TP1 = TopicPartition("orders", 1)


def broker(broker_id: int, port: int = 9092) -> BrokerInfo:
    return BrokerInfo(broker_id, (EndPoint("127.0.0.1", port + broker_id),), rack="r1")


def next_value(q: queue.Queue[object], timeout: float = 10.0) -> object:
    return q.get(timeout=timeout)


def test_broker_epoch_is_czxid_and_grows_with_each_registration(
        zk_client_factory: Factory) -> None:
    a, b = zk_client_factory(), zk_client_factory()
    epoch_a = a.register_broker(broker(1))
    epoch_b = b.register_broker(broker(2))
    assert epoch_b > epoch_a > 0
    stat = a.zk.exists("/brokers/ids/1")
    assert stat is not None and stat.czxid == epoch_a and stat.ephemeralOwner == a.session_id
    brokers = b.get_all_brokers_in_cluster()
    assert [(x.broker, x.epoch) for x in brokers] == [(broker(1), epoch_a), (broker(2), epoch_b)]
    # registering again on the same session keeps the node and its epoch
    assert a.register_broker(broker(1)) == epoch_a
    # a bounced broker (new session) gets a larger epoch
    a.close()
    c = zk_client_factory()
    epoch_c = c.register_broker(broker(1))
    assert epoch_c > epoch_b
    assert b.get_broker(1) is not None and b.get_broker(1).epoch == epoch_c  # type: ignore[union-attr]


def test_registration_vanishes_when_the_session_closes(zk_client_factory: Factory) -> None:
    a, b = zk_client_factory(), zk_client_factory()
    seen: queue.Queue[object] = queue.Queue()
    b.watch_broker_ids(seen.put)
    assert next_value(seen) == []
    a.register_broker(broker(1))
    assert next_value(seen) == [1]
    a.close()
    assert next_value(seen) == []
    assert b.get_all_brokers_in_cluster() == []


def test_same_broker_id_from_another_session_is_refused(zk_client_factory: Factory) -> None:
    a, b = zk_client_factory(), zk_client_factory()
    a.register_broker(broker(1))
    with pytest.raises(ZkNodeExistsError, match=r"another broker running with this broker\.id"):
        b.register_broker(broker(1, port=9000), previous_session_wait_ms=1000)
    got = b.get_broker(1)
    assert got is not None and got.broker == broker(1)


def test_a_restarted_broker_waits_out_its_previous_registration(
        zk_client_factory: Factory) -> None:
    """A broker restarted right after a crash finds the registration of its previous
    session, which lasts until that session expires: it waits for it to go instead of
    failing its start (here the old session is closed while the new one waits)."""
    a, b = zk_client_factory(), zk_client_factory()
    a.register_broker(broker(1))
    result: queue.Queue[object] = queue.Queue()
    waiter = threading.Thread(target=lambda: result.put(b.register_broker(broker(1, port=9000))))
    waiter.start()
    time.sleep(1.0)  # b is waiting now: the node is a's
    assert waiter.is_alive()
    a.close()
    waiter.join(30)
    epoch = result.get(timeout=1)
    got = b.get_broker(1)
    assert got is not None and got.broker == broker(1, port=9000) and got.epoch == epoch


def test_controller_election_and_a_stale_controllers_write_is_fenced(
        zk_client_factory: Factory) -> None:
    a, b = zk_client_factory(), zk_client_factory()
    seen: queue.Queue[object] = queue.Queue()
    b.watch_controller(seen.put)
    assert next_value(seen) is None

    won = a.register_controller_and_increment_controller_epoch(1)
    assert (won.won, won.controller_id, won.controller_epoch) == (True, 1, 1)
    assert won.epoch_zk_version == 1  # created holding 0 at version 0, then set once
    assert next_value(seen) == 1
    lost = b.register_controller_and_increment_controller_epoch(2)
    assert (lost.won, lost.controller_id, lost.controller_epoch, lost.epoch_zk_version) == \
        (False, 1, 1, 1)
    assert b.get_controller_id() == 1 and b.get_controller_epoch() == (1, 1)

    # the controller's fenced writes go through while it holds the epoch
    a.create_topic_assignment("orders", None, {0: [1, 2]})
    created = a.create_topic_partition_states(
        {TP0: LeaderIsrAndControllerEpoch(1, 0, (1, 2), 1)}, won.epoch_zk_version)
    assert created == {TP0: LeaderIsrAndControllerEpoch(1, 0, (1, 2), 1, 0, 0)}

    # A loses /controller (as when its session expires) and B is elected: epoch 2
    a.delete_controller(won.epoch_zk_version)
    assert next_value(seen) is None
    second = b.register_controller_and_increment_controller_epoch(2)
    assert (second.won, second.controller_epoch, second.epoch_zk_version) == (True, 2, 2)
    assert next_value(seen) == 2

    # the zombie controller A still holds epoch 1's version: every write is refused
    state = a.get_topic_partition_state(TP0)
    assert state is not None
    with pytest.raises(ControllerMovedError):
        a.conditional_update_partition_state(
            TP0, LeaderIsrAndControllerEpoch(1, 1, (1,), 1, partition_epoch=state.partition_epoch),
            won.epoch_zk_version)
    with pytest.raises(ControllerMovedError):
        a.update_leader_and_isr({TP0: state}, 1, won.epoch_zk_version)
    with pytest.raises(ControllerMovedError):
        a.delete_controller(won.epoch_zk_version)
    assert b.get_topic_partition_state(TP0) == state  # nothing written
    assert b.get_controller_id() == 2


def test_concurrent_elections_have_exactly_one_winner(zk_client_factory: Factory) -> None:
    clients = [zk_client_factory() for _ in range(4)]
    results: list[object] = [None] * 4
    start = threading.Barrier(4)

    def run(i: int) -> None:
        start.wait()
        results[i] = clients[i].register_controller_and_increment_controller_epoch(i)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    winners = [r for r in results if getattr(r, "won", False)]
    assert len(winners) == 1
    winner = winners[0]
    assert clients[0].get_controller_id() == winner.controller_id  # type: ignore[attr-defined]
    assert clients[0].get_controller_epoch() == (1, 1)


def test_conditional_partition_state_writes(zk_client_factory: Factory) -> None:
    zk = zk_client_factory()
    election = zk.register_controller_and_increment_controller_epoch(1)
    v = election.epoch_zk_version
    zk.create_topic_assignment("orders", uuid.uuid4(), {0: [1, 2], 1: [2, 1]})
    created = zk.create_topic_partition_states(
        {TP0: LeaderIsrAndControllerEpoch(1, 0, (1, 2), 1),
         TP1: LeaderIsrAndControllerEpoch(2, 0, (2, 1), 1)}, v)
    assert set(created) == {TP0, TP1}
    again = zk.create_topic_partition_states({TP0: LeaderIsrAndControllerEpoch(1, 0, (1,), 1)}, v)
    assert isinstance(again[TP0], ZkNodeExistsError)

    # the leader shrinks its ISR (pre-AlterPartition path: no controller fence)
    state0 = zk.get_topic_partition_state(TP0)
    assert state0 == LeaderIsrAndControllerEpoch(1, 0, (1, 2), 1, 0, 0)
    assert zk.conditional_update_partition_state(
        TP0, LeaderIsrAndControllerEpoch(1, 0, (1,), 1, partition_epoch=0)) == 1
    # a writer still holding partition epoch 0 loses
    with pytest.raises(ZkBadVersionError):
        zk.conditional_update_partition_state(
            TP0, LeaderIsrAndControllerEpoch(2, 1, (2,), 1, partition_epoch=0), v)
    assert zk.get_topic_partition_state(TP0) == LeaderIsrAndControllerEpoch(1, 0, (1,), 1, 0, 1)

    # the controller's batch: TP0 at a stale version is to retry, TP1 is written
    result = zk.update_leader_and_isr(
        {TP0: LeaderIsrAndControllerEpoch(2, 1, (2,), 0, partition_epoch=0),
         TP1: LeaderIsrAndControllerEpoch(1, 1, (1,), 0, partition_epoch=0)}, 1, v)
    assert result.partitions_to_retry == [TP0]
    assert result.finished == {TP1: LeaderIsrAndControllerEpoch(1, 1, (1,), 1, 0, 1)}
    assert zk.get_topic_partition_states([TP0, TP1, TopicPartition("orders", 9)]) == {
        TP0: LeaderIsrAndControllerEpoch(1, 0, (1,), 1, 0, 1),
        TP1: LeaderIsrAndControllerEpoch(1, 1, (1,), 1, 0, 1)}


def test_chroot_is_created_and_confines_the_layout(zookeeper: ZooKeeperProcess) -> None:
    connect = f"{zookeeper.connect_string}/millrace/c1"
    with KafkaZkClient(connect, session_timeout_ms=6000) as zk:
        zk.create_top_level_paths()
        epoch = zk.register_broker(broker(3))
        cluster_id = zk.create_or_get_cluster_id("AAAAAAAAAAAAAAAAAAAAAA")
        raw = KazooClient(zookeeper.connect_string)
        raw.start(10)
        try:
            assert raw.exists("/brokers") is None or raw.exists("/brokers/ids/3") is None
            data, stat = raw.get("/millrace/c1/brokers/ids/3")
            assert stat.czxid == epoch
            assert zd.decode_broker_info(3, data) == broker(3)
            assert raw.get("/millrace/c1/cluster/id")[0] == \
                b'{"version":"1","id":"AAAAAAAAAAAAAAAAAAAAAA"}'
        finally:
            raw.stop()
            raw.close()
        assert cluster_id == "AAAAAAAAAAAAAAAAAAAAAA"
    with KafkaZkClient(connect, session_timeout_ms=6000) as again:
        assert again.create_or_get_cluster_id("other") == "AAAAAAAAAAAAAAAAAAAAAA"
        assert again.get_sorted_broker_list() == []  # the ephemeral left with its session


def test_topics_configs_and_admin_znodes(zk_client_factory: Factory) -> None:
    zk = zk_client_factory()
    topic_id = uuid.UUID("517c94f6-2e40-467e-96d3-438ddad69e58")
    changes: queue.Queue[object] = queue.Queue()
    zk.watch_topics(changes.put)
    assert next_value(changes) == set()
    zk.create_topic("orders", topic_id, {0: [1, 2], 1: [2, 1]}, {"retention.ms": "1000"})
    assert next_value(changes) == {"orders"}
    with pytest.raises(ZkNodeExistsError):
        zk.create_topic("orders", uuid.uuid4(), {0: [1]}, {})
    raw, _ = zk.zk.get_data("/brokers/topics/orders") or (b"", None)
    assert raw == (b'{"version":3,"partitions":{"0":[1,2],"1":[2,1]},"adding_replicas":{},'
                   b'"removing_replicas":{},"topic_id":"UXyU9i5ARn6W00ON2taeWA"}')
    assert zk.get_entity_configs("topics", "orders") == {"retention.ms": "1000"}

    added = zk.add_partitions("orders", {2: [1, 2]})
    assert added.replicas() == {0: [1, 2], 1: [2, 1], 2: [1, 2]}
    assert zk.get_topic_assignment("orders").assignment[2] == ReplicaAssignment((1, 2))  # type: ignore[union-attr]
    assert zk.get_partitions_for_topic("orders") == [0, 1, 2]

    zk.change_topic_config("orders", {"retention.ms": "5"})
    zk.change_topic_config("orders", {"retention.ms": "6"})
    assert zk.get_entity_configs("topics", "orders") == {"retention.ms": "6"}
    assert zk.get_config_change_notifications() == [
        ("0000000000", "topics/orders"), ("0000000001", "topics/orders")]

    deletions: queue.Queue[object] = queue.Queue()
    zk.watch_topic_deletions(deletions.put)
    assert next_value(deletions) == []
    zk.create_delete_topic_path("orders")
    zk.create_delete_topic_path("orders")  # idempotent
    assert next_value(deletions) == ["orders"]
    assert zk.is_topic_marked_for_deletion("orders")

    election = zk.register_controller_and_increment_controller_epoch(1)
    zk.create_topic_partition_states(
        {TP0: LeaderIsrAndControllerEpoch(1, 0, (1, 2), 1)}, election.epoch_zk_version)
    zk.delete_topic_znode("orders", election.epoch_zk_version)
    zk.delete_topic_configs(["orders"], election.epoch_zk_version)
    zk.delete_topic_deletions(["orders"], election.epoch_zk_version)
    assert next_value(changes) == set()
    assert next_value(deletions) == []
    assert not zk.topic_exists("orders")
    assert zk.get_entity_configs("topics", "orders") == {}

    zk.create_preferred_replica_election({TP0, TP1})
    with pytest.raises(ZkNodeExistsError):
        zk.create_preferred_replica_election({TP0})
    assert zk.get_preferred_replica_election() == {TP0, TP1}
    zk.delete_preferred_replica_election(election.epoch_zk_version)
    assert zk.get_preferred_replica_election() == set()


def test_isr_change_notifications(zk_client_factory: Factory) -> None:
    leader, controller = zk_client_factory(), zk_client_factory()
    seen: queue.Queue[object] = queue.Queue()
    controller.watch_isr_change_notifications(seen.put)
    assert next_value(seen) == []
    first = leader.propagate_isr_changes({TP0})
    second = leader.propagate_isr_changes({TP1, TopicPartition("a", 0)})
    assert (first, second) == ("0000000000", "0000000001")
    while (pending := next_value(seen)) != ["0000000000", "0000000001"]:
        assert pending == ["0000000000"]
    assert controller.get_all_isr_change_notifications() == ["0000000000", "0000000001"]
    assert controller.get_partitions_from_isr_change_notifications(["0000000000", "0000000001"]) \
        == [TP0, TopicPartition("a", 0), TP1]
    election = controller.register_controller_and_increment_controller_epoch(2)
    controller.delete_isr_change_notifications(["0000000000", "0000000001"],
                                               election.epoch_zk_version)
    assert next_value(seen) == []
    assert controller.get_all_isr_change_notifications() == []


def test_producer_id_blocks_never_overlap(zk_client_factory: Factory) -> None:
    clients = [zk_client_factory() for _ in range(3)]
    assert clients[0].allocate_producer_id_block(1) == zd.ProducerIdsBlock(1, 0, 1000)
    blocks: list[zd.ProducerIdsBlock] = []
    lock = threading.Lock()

    def run(i: int) -> None:
        for _ in range(5):
            block = clients[i].allocate_producer_id_block(i + 1)
            with lock:
                blocks.append(block)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    starts = sorted(b.first_producer_id for b in blocks)
    assert starts == [1000 * k for k in range(1, 16)]
    data, _ = clients[0].zk.get_data(zd.PRODUCER_ID_BLOCK_PATH) or (b"", None)
    last = zd.decode_producer_id_block(data)
    assert last is not None and (last.first_producer_id, last.last_producer_id) == (15000, 15999)


def test_generated_broker_ids_start_above_the_reserved_range(zk_client_factory: Factory) -> None:
    zk = zk_client_factory()
    assert [zk.generate_broker_sequence_id() for _ in range(3)] == [1001, 1002, 1003]
