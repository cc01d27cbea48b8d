"""KafkaController stepped with plain values: failover, broker changes, topics, fencing."""

from __future__ import annotations

import pytest

from millrace.broker.controller.broker_requests import LeaderAndIsr, StopReplica, UpdateMetadata
from millrace.broker.controller.controller_context import LeaderIsrAndControllerEpoch
from millrace.broker.controller.controller_result import ControllerConfig
from millrace.broker.controller.election import LeaderRecoveryState
from millrace.broker.controller.event_engine import ControllerStateError
from millrace.broker.controller.kafka_controller import KafkaController
from millrace.broker.controller.zk_writes import (
    CreatePartitionState,
    DeleteTopicZnodes,
    UpdatePartitionState,
    ZkWriteError,
    ZkWriteResult,
)
from millrace.common.errors import Errors
from millrace.common.topic_partition import TopicPartition
from tests.unit.broker.controller.ctlgen import (
    T0,
    Cluster,
    ZkStore,
    broker,
    state,
    summary,
    topic,
)

T = [TopicPartition("t", p) for p in range(3)]


def three_brokers(config: ControllerConfig | None = None, /, **topic_configs: str) -> Cluster:
    """Brokers 1-3; topic t with three partitions, RF 3, each led by its preferred replica."""
    zk = ZkStore({T[0]: state(1, [1, 2, 3], controller_epoch=0),
                  T[1]: state(2, [2, 3, 1], controller_epoch=0),
                  T[2]: state(3, [3, 1, 2], controller_epoch=0)})
    c = Cluster(KafkaController(1, config), zk, [broker(1), broker(2), broker(3)],
                [topic("t", {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}, **topic_configs)])
    c.failover()
    return c


def test_failover_sends_update_metadata_to_all_before_any_leader_and_isr() -> None:
    zk = ZkStore({T[0]: state(1, [1, 2, 3], controller_epoch=0),
                  T[1]: state(2, [2, 3, 1], controller_epoch=0),
                  T[2]: state(3, [3, 1, 2], controller_epoch=0)})
    c = Cluster(KafkaController(1), zk, [broker(1), broker(2), broker(3)],
                [topic("t", {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}),
                 topic("n", {0: [2, 1]})])
    result = c.failover(epoch=5)
    existing = ("t-0:1/0", "t-1:2/0", "t-2:3/0")
    assert summary(result.requests) == [
        ("UpdateMetadata", 1, ()), ("UpdateMetadata", 2, ()), ("UpdateMetadata", 3, ()),
        ("LeaderAndIsr", 1, existing), ("LeaderAndIsr", 2, existing),
        ("LeaderAndIsr", 3, existing),
        ("UpdateMetadata", 1, existing), ("UpdateMetadata", 2, existing),
        ("UpdateMetadata", 3, existing),
        # the New partition n-0 is created, then its replicas learn it (isNew)
        ("LeaderAndIsr", 1, ("n-0:2/0",)), ("LeaderAndIsr", 2, ("n-0:2/0",)),
        ("UpdateMetadata", 1, ("n-0:2/0",)), ("UpdateMetadata", 2, ("n-0:2/0",)),
        ("UpdateMetadata", 3, ("n-0:2/0",)),
    ]
    n0 = TopicPartition("n", 0)
    assert result.zk_writes == [CreatePartitionState(n0, state(2, [2, 1], controller_epoch=5))]
    assert c.leadership(n0) == state(2, [2, 1], controller_epoch=5, zk_version=0)
    lai = result.requests[-5]
    assert isinstance(lai, LeaderAndIsr)
    assert lai.partition_states[0].is_new and lai.controller_epoch == 5
    assert lai.broker_epoch == 101 and lai.controller_id == 1
    assert [b.node_id for b in lai.live_leaders] == [2]
    assert result.done


def test_leader_death_elects_the_next_live_isr_member() -> None:
    c = three_brokers()
    result = c.change_brokers([broker(2), broker(3)])
    # t-0 lost its leader: 2 is next in AR and in the ISR; epoch +1, 1 leaves the ISR.
    assert c.leadership(T[0]) == state(2, [2, 3], leader_epoch=1, zk_version=1)
    # t-1 and t-2 keep their leader; only the dead follower leaves the ISR (epoch +1).
    assert c.leadership(T[1]) == state(2, [2, 3], leader_epoch=1, zk_version=1)
    assert c.leadership(T[2]) == state(3, [3, 2], leader_epoch=1, zk_version=1)
    assert summary(result.requests) == [
        ("LeaderAndIsr", 2, ("t-0:2/1", "t-1:2/1", "t-2:3/1")),
        ("LeaderAndIsr", 3, ("t-0:2/1", "t-1:2/1", "t-2:3/1")),
        ("UpdateMetadata", 2, ("t-0:2/1", "t-1:2/1", "t-2:3/1")),
        ("UpdateMetadata", 3, ("t-0:2/1", "t-1:2/1", "t-2:3/1")),
    ]
    um = result.requests[-1]
    assert isinstance(um, UpdateMetadata)
    assert [b.node_id for b in um.live_brokers] == [2, 3]
    assert um.partition_states[0].offline_replicas == (1,)


def test_no_live_isr_member_leaves_the_partition_offline_keeping_the_last_isr_member() -> None:
    c = three_brokers()
    c.change_brokers([broker(1), broker(3)])             # 2 leaves every ISR
    c.change_brokers([broker(1)])                        # 3 too
    assert c.leadership(T[1]) == state(1, [1], leader_epoch=2, zk_version=2)
    c.change_brokers([broker(2)])                        # 1, the last ISR member, dies
    # 2 is live but not in sync: no clean candidate.  The ISR keeps 1; nobody leads.
    assert c.leadership(T[1]) == state(-1, [1], leader_epoch=3, zk_version=3)
    # Broker 1 comes back: a clean election picks it.
    c.change_brokers([broker(2), broker(1, epoch=500)])
    assert c.leadership(T[1]) == state(1, [1], leader_epoch=4, zk_version=4)


def test_unclean_election_when_enabled_for_the_topic() -> None:
    c = three_brokers(None, unclean_leader_election_enable="true")
    c.change_brokers([broker(1), broker(3)])
    c.change_brokers([broker(1)])
    c.change_brokers([broker(2)])
    s = c.leadership(T[0])
    assert (s.leader, s.isr, s.leader_epoch) == (2, (2,), 3)
    assert s.leader_recovery_state is LeaderRecoveryState.RECOVERING


def test_unclean_election_from_the_broker_default() -> None:
    c = three_brokers(ControllerConfig(unclean_leader_election_enable=True))
    c.change_brokers([broker(1)])
    c.change_brokers([broker(3)])
    assert c.leadership(T[2]).leader == 3
    assert c.leadership(T[0]) == LeaderIsrAndControllerEpoch(
        3, 2, (3,), 1, 2, LeaderRecoveryState.RECOVERING)


def test_bounced_broker_is_handled_as_failure_then_startup() -> None:
    c = three_brokers()
    result = c.change_brokers([broker(1, epoch=900), broker(2), broker(3)])
    # Failure: 1 loses leadership of t-0 and leaves every ISR ...
    assert c.leadership(T[0]) == state(2, [2, 3], leader_epoch=1, zk_version=1)
    assert c.leadership(T[2]) == state(3, [3, 2], leader_epoch=1, zk_version=1)
    # ... startup: it is told its replicas (with its new broker epoch) after the writes.
    to_1 = [r for r in result.requests if isinstance(r, LeaderAndIsr) and r.broker_id == 1]
    assert [(r.broker_epoch, [(s.partition, s.leader, s.leader_epoch) for s in
                              r.partition_states]) for r in to_1] == [
        (900, [(0, 2, 1), (1, 2, 1), (2, 3, 1)])]
    assert c.controller.context.broker_epoch(1) == 900
    # A smaller or equal epoch is not a bounce.
    for epoch in (900, 50):
        again = c.change_brokers([broker(1, epoch=epoch), broker(2), broker(3)])
        assert again.requests == [] and again.zk_writes == []


def test_new_topic_goes_new_then_online() -> None:
    c = three_brokers()
    u = TopicPartition("u", 0)
    c.topics.append(topic("u", {0: [3, 2]}))
    result = c.run(c.controller.on_topic_change(c.topics))
    assert result.zk_writes == [CreatePartitionState(u, state(3, [3, 2], controller_epoch=1))]
    assert summary(result.requests) == [
        ("LeaderAndIsr", 2, ("u-0:3/0",)), ("LeaderAndIsr", 3, ("u-0:3/0",)),
        ("UpdateMetadata", 1, ("u-0:3/0",)), ("UpdateMetadata", 2, ("u-0:3/0",)),
        ("UpdateMetadata", 3, ("u-0:3/0",))]
    # Added partitions of an existing topic take the same path.
    c.topics[-1] = topic("u", {0: [3, 2], 1: [1, 3]})
    result = c.run(c.controller.on_topic_change(c.topics))
    assert result.zk_writes == [CreatePartitionState(TopicPartition("u", 1),
                                                     state(1, [1, 3], controller_epoch=1))]
    # A topic that vanished is forgotten, its partitions with it.
    c.topics.pop()
    c.run(c.controller.on_topic_change(c.topics))
    assert c.controller.context.all_topics == {"t"}
    assert u not in c.controller.context.leadership


def test_new_partition_without_live_replica_waits_for_its_broker() -> None:
    c = three_brokers()
    c.change_brokers([broker(1), broker(2)])
    v = TopicPartition("v", 0)
    c.topics.append(topic("v", {0: [3]}))
    result = c.run(c.controller.on_topic_change(c.topics))
    assert result.zk_writes == [] and v not in c.zk.states
    c.change_brokers([broker(1), broker(2), broker(3, epoch=700)])
    assert c.leadership(v) == state(3, [3], controller_epoch=1, zk_version=0)


def test_topic_deletion_stops_replicas_then_deletes_znodes() -> None:
    c = three_brokers()
    result = c.run(c.controller.on_topic_deletion(["t", "missing"]))
    assert summary(result.requests)[:3] == [
        ("UpdateMetadata", 1, ("t-0:-2/0", "t-1:-2/0", "t-2:-2/0")),
        ("UpdateMetadata", 2, ("t-0:-2/0", "t-1:-2/0", "t-2:-2/0")),
        ("UpdateMetadata", 3, ("t-0:-2/0", "t-1:-2/0", "t-2:-2/0"))]
    assert summary(result.requests)[3:] == [
        ("StopReplica", b, ("t-0:delete", "t-1:delete", "t-2:delete")) for b in (1, 2, 3)]
    stop = result.requests[3]
    assert isinstance(stop, StopReplica) and stop.partition_states[0].leader_epoch == -2
    ok = {tp: Errors.NONE for tp in T}
    c.run(c.controller.on_stop_replica_response(1, ok))
    c.run(c.controller.on_stop_replica_response(2, ok))
    # Broker 3 failed one partition: the topic waits.
    r3 = c.run(c.controller.on_stop_replica_response(3, {**ok, T[2]: Errors.KAFKA_STORAGE_ERROR}))
    assert not any(isinstance(w, DeleteTopicZnodes) for w in r3.zk_writes)
    # Broker 3 restarts: it is asked again, answers, and the znodes go.
    again = c.change_brokers([broker(1), broker(2), broker(3, epoch=600)])
    assert ("StopReplica", 3, ("t-2:delete",)) in summary(again.requests)
    done = c.run(c.controller.on_stop_replica_response(3, {T[2]: Errors.NONE}))
    assert done.zk_writes == [DeleteTopicZnodes("t")]
    assert "t" not in c.controller.context.all_topics


def test_bad_version_is_retried_from_the_stored_state() -> None:
    c = three_brokers()
    # A leader shrank t-1's ISR in ZooKeeper behind the controller's back (IBP < 2.7).
    c.zk.states[T[1]] = state(2, [2, 1], leader_epoch=0, controller_epoch=1, zk_version=1)
    c.change_brokers([broker(1), broker(3)])             # 2, the leader, dies
    # The first write (at version 0) failed; the retry is decided from [2, 1], not [2, 3, 1].
    assert c.leadership(T[1]) == state(1, [1], leader_epoch=1, zk_version=2)


def test_stale_controller_never_overwrites_newer_state() -> None:
    c = three_brokers()
    # Another controller (epoch 2) wrote t-0 meanwhile; this one still thinks epoch 1.
    newer = state(3, [3, 2], leader_epoch=7, controller_epoch=2, zk_version=4)
    c.zk.states[T[0]] = newer
    ctl = c.controller
    first = ctl.on_broker_change([broker(2), broker(3)], T0)
    w0 = next(w for w in first.zk_writes if isinstance(w, UpdatePartitionState) and w.tp == T[0])
    outcomes = [ZkWriteResult.bad_version(w, newer) if w == w0
                else c.zk.execute_for(ctl)(w) for w in first.zk_writes]
    nxt = ctl.on_zk_write_results(outcomes)
    assert not any(getattr(w, "tp", None) == T[0] for w in nxt.zk_writes)
    assert c.zk.states[T[0]] == newer and nxt.done
    assert not any(s.partition == 0 for r in nxt.requests if isinstance(r, LeaderAndIsr)
                   for s in r.partition_states)


def test_stale_controller_loaded_newer_state_and_does_not_elect() -> None:
    # The state of t-0 was written by controller epoch 3; this controller won epoch 2 (it is
    # a zombie that has not noticed yet).  Its leader dies: no write, no request for t-0.
    newer = state(1, [1, 2], leader_epoch=9, controller_epoch=3, zk_version=5)
    c = Cluster(KafkaController(2), ZkStore({T[0]: newer}), [broker(1), broker(2)],
                [topic("t", {0: [1, 2]})])
    c.failover(epoch=2)
    result = c.change_brokers([broker(2)])
    assert result.zk_writes == [] and c.zk.states[T[0]] == newer
    assert all(s.partition_states == () for s in result.requests
               if isinstance(s, UpdateMetadata))


def test_failed_epoch_check_resigns() -> None:
    c = three_brokers()
    c.zk.epoch_zk_version = 99                           # someone else won /controller_epoch
    result = c.change_brokers([broker(2), broker(3)])
    assert result.resigned and not c.controller.active
    assert c.zk.states[T[0]] == state(1, [1, 2, 3], controller_epoch=0)
    assert c.controller.on_broker_change([broker(3)], T0).error is Errors.NOT_CONTROLLER


def test_an_event_during_writes_in_flight_is_refused() -> None:
    c = three_brokers()
    first = c.controller.on_broker_change([broker(2), broker(3)], T0)
    assert first.zk_writes and not first.done
    with pytest.raises(ControllerStateError):
        c.controller.on_broker_change([broker(3)], T0)


def test_controller_moved_outcome_resigns_mid_event() -> None:
    c = three_brokers()
    first = c.controller.on_broker_change([broker(2), broker(3)], T0)
    nxt = c.controller.on_zk_write_results(
        [ZkWriteResult.failed(first.zk_writes[0], ZkWriteError.CONTROLLER_MOVED)])
    assert nxt.resigned and nxt.requests == [] and nxt.zk_writes == []
