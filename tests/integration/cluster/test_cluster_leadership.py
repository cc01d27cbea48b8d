"""Leadership moves on a real three-broker cluster, judged by confluent-kafka.

* Controlled shutdown: a broker stopped with SIGTERM asks the controller to move the
  leadership of its partitions before it exits, so the state znodes name other leaders
  the moment its process is gone, and an acks=all producer sees no error.
* Preferred leadership returns: the first assigned replica leads again once it is back
  in the ISR, by the controller's auto rebalance (``leader.imbalance.check.interval.seconds``
  made small) or on request (ElectLeaders through confluent-kafka's AdminClient).

Every test starts its own cluster.
"""

from __future__ import annotations

import pytest
from cluster_support import (
    ClusterFactory,
    ContinuousProducer,
    admin,
    broker_admin,
    consume_all,
    create_topic,
    log_tails,
    partitions,
    wait_in_sync,
    wait_until,
    zk_partition_state,
)
from confluent_kafka import ElectionType
from confluent_kafka import TopicPartition as CkTopicPartition

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_controlled_shutdown_moves_leadership_first_and_it_comes_back(
        fresh_cluster: ClusterFactory) -> None:
    cluster = fresh_cluster(overrides={"leader.imbalance.check.interval.seconds": "1"})
    client = admin(cluster.bootstrap)
    view = create_topic(client, "moving", 3, 3)
    victim = view[0].leader
    led = [p for p, v in view.items() if v.leader == victim]
    producer = ContinuousProducer(cluster.bootstrap, "moving").start()
    try:
        wait_until("200 acknowledged records", lambda: producer.acked_count >= 200)
        assert cluster.stop_broker(victim) == 0
        # the process is gone: its partitions were already handed over
        for p in led:
            state = zk_partition_state(cluster, "moving", p)
            assert state["leader"] not in (victim, -1), state
            assert victim not in state["isr"], state
        assert "controlled shutdown succeeded" in cluster.broker(victim).logs()
        before = producer.acked_count
        wait_until("acks=all writes to go on", lambda: producer.acked_count >= before + 200)

        cluster.restart_broker(victim)
        wait_until(f"broker {victim} to lead its preferred partitions again",
                   lambda: (v := partitions(client, "moving")) and all(
                       q.in_sync and q.leader == q.replicas[0] for q in v.values()),
                   diagnostics=lambda: log_tails(cluster))
        before = producer.acked_count
        wait_until("acks=all writes on the returned leader",
                   lambda: producer.acked_count >= before + 200)
    finally:
        producer.stop()
    assert producer.errors == []
    acked = producer.by_partition()
    assert consume_all(cluster.bootstrap, "moving", 3,
                       sum(len(v) for v in acked.values())) == acked


def test_preferred_leader_election_on_request(fresh_cluster: ClusterFactory) -> None:
    cluster = fresh_cluster(overrides={"auto.leader.rebalance.enable": "false"})
    client = admin(cluster.bootstrap)
    view = create_topic(client, "pref", 1, 3)
    preferred = view[0].replicas[0]
    assert view[0].leader == preferred
    cluster.kill_broker(preferred)
    other = broker_admin(cluster, min(b for b in cluster.brokers if b != preferred))
    wait_until("a new leader after the kill",
               lambda: (v := partitions(other, "pref")) and v[0].leader not in (-1, preferred),
               diagnostics=lambda: log_tails(cluster))
    cluster.restart_broker(preferred)
    back = wait_in_sync(other, "pref", 1)
    assert back[0].leader != preferred  # no auto rebalance here

    tp = CkTopicPartition("pref", 0)
    results = other.elect_leaders(ElectionType.PREFERRED, [tp]).result(timeout=30)
    assert list(results.values()) == [None], results
    wait_until("the preferred replica to lead again",
               lambda: (v := partitions(other, "pref")) and v[0].leader == preferred)
    state = zk_partition_state(cluster, "pref", 0)
    assert state["leader"] == preferred and state["leader_epoch"] == 2  # kill, then election
