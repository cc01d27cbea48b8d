"""The in-sync replica set on a real three-broker cluster, judged by confluent-kafka.

* A follower frozen with SIGSTOP stops fetching; once it has lagged for
  ``replica.lag.time.max.ms`` the leader drops it from the ISR (a conditional write of the
  partition state znode) while acks=all writes carry on with the two others, and it
  rejoins once SIGCONT lets it catch up.  The frozen broker's ZooKeeper session is made
  longer than the lag so that it is the leader's rule, not a session expiry, that acts.
* Below ``min.insync.replicas`` the leader refuses acks=all writes with
  NOT_ENOUGH_REPLICAS and nothing is appended, while acks=1 writes still succeed.

Every test starts its own cluster.
"""

from __future__ import annotations

import pytest
from cluster_support import (
    ClusterFactory,
    ContinuousProducer,
    admin,
    broker_admin,
    controller_id,
    create_topic,
    log_tails,
    partitions,
    wait_in_sync,
    wait_until,
    zk_partition_state,
)
from confluent_kafka import KafkaError, Producer
from kazoo.client import KazooClient

from millrace.launcher.local_cluster import CHROOT

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_paused_follower_leaves_the_isr_and_rejoins(fresh_cluster: ClusterFactory) -> None:
    cluster = fresh_cluster(overrides={"replica.lag.time.max.ms": "2000",
                                       "zookeeper.session.timeout.ms": "15000"})
    client = admin(cluster.bootstrap)
    view = create_topic(client, "steady", 1, 3)
    leader = view[0].leader
    # Not the controller: a frozen controller cannot push the shrunk ISR to the brokers'
    # metadata (UpdateMetadata) until its session expires and another one takes over.
    ctrl = controller_id(client)
    follower = next(r for r in view[0].replicas if r not in (leader, ctrl))
    on_leader = broker_admin(cluster, leader)
    # traffic, so that the frozen follower falls behind the leader's log end
    producer = ContinuousProducer(cluster.bootstrap, "steady").start()
    try:
        wait_until("100 acknowledged records", lambda: producer.acked_count >= 100)
        cluster.pause_broker(follower)
        try:
            shrunk = wait_until(
                f"the leader to drop broker {follower} from the ISR",
                lambda: (p := partitions(on_leader, "steady")) and follower not in p[0].isr
                and p[0], diagnostics=lambda: log_tails(cluster))
            assert shrunk.leader == leader
            assert sorted(shrunk.isr) == sorted(set(view[0].replicas) - {follower})
            state = zk_partition_state(cluster, "steady", 0)
            assert state["leader"] == leader and follower not in state["isr"]
            assert state["leader_epoch"] == 0  # an ISR shrink is no leader change
            zk = KazooClient(hosts=cluster.zookeeper.connect_string, timeout=10)
            zk.start(timeout=10)
            try:  # still registered: its session outlives the lag
                assert zk.exists(f"{CHROOT}/brokers/ids/{follower}") is not None
            finally:
                zk.stop()
                zk.close()
            before = producer.acked_count
            wait_until("acks=all writes to go on with two in-sync replicas",
                       lambda: producer.acked_count >= before + 100)
        finally:
            cluster.resume_broker(follower)
        wait_until(f"broker {follower} back in the ISR",
                   lambda: (p := partitions(on_leader, "steady")) and p[0].in_sync,
                   diagnostics=lambda: log_tails(cluster))
    finally:
        producer.stop()
    assert producer.errors == []
    state = zk_partition_state(cluster, "steady", 0)
    assert sorted(state["isr"]) == [1, 2, 3] and state["leader"] == leader


def produce_one(bootstrap: str, acks: str, **config: object) -> tuple[KafkaError | None, int]:
    """One record to min-isr-0; (delivery error, offset)."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, **config})
    out: list[tuple[KafkaError | None, int]] = []
    p.produce("min-isr", value=b"x", partition=0,
              on_delivery=lambda err, msg: out.append((err, msg.offset() or 0)))
    assert p.flush(60) == 0
    return out[0]


@pytest.mark.parametrize("where", ["topic", "broker"])
def test_acks_all_refused_below_min_insync_replicas(fresh_cluster: ClusterFactory,
                                                    where: str) -> None:
    """``min.insync.replicas=2`` as the topic's override (over a broker default of 1), or
    as the broker's default for a topic without one."""
    broker_default, topic_config = ("1", {"min.insync.replicas": "2"}) if where == "topic" \
        else ("2", {})
    cluster = fresh_cluster(overrides={"min.insync.replicas": broker_default})
    client = admin(cluster.bootstrap)
    view = create_topic(client, "min-isr", 1, 3, topic_config)
    leader = view[0].leader
    followers = [b for b in view[0].replicas if b != leader]
    assert produce_one(cluster.bootstrap, "all") == (None, 0)

    for b in followers:  # SIGTERM: each leaves the ISR through controlled shutdown
        assert cluster.stop_broker(b) == 0
    on_leader = broker_admin(cluster, leader)
    wait_until("the ISR to shrink to the leader",
               lambda: (p := partitions(on_leader, "min-isr")) and p[0].isr == (leader,),
               diagnostics=lambda: log_tails(cluster))

    bootstrap = cluster.broker(leader).bootstrap
    # Without retries librdkafka reports the broker's error as it is...
    err, _ = produce_one(bootstrap, "all", retries=0)
    assert err is not None and err.code() == KafkaError.NOT_ENOUGH_REPLICAS, err
    # ...with them (the default) it retries this retriable error until the record expires.
    err, _ = produce_one(bootstrap, "all", **{"message.timeout.ms": 2000})
    assert err is not None and err.code() == KafkaError._MSG_TIMED_OUT, err
    # Nothing was appended by the refused writes: acks=1 gets the next offset, 1.
    assert produce_one(bootstrap, "1") == (None, 1)

    cluster.restart_broker(followers[0])
    wait_until("two in-sync replicas again",
               lambda: (p := partitions(on_leader, "min-isr")) and len(p[0].isr) == 2)
    assert produce_one(cluster.bootstrap, "all") == (None, 2)
    cluster.restart_broker(followers[1])
    wait_in_sync(client, "min-isr", 1)
