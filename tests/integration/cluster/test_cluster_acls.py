"""ACLs in a 3-broker cluster: written once, enforced by every broker.

A SASL_SSL cluster (``DevSecurity``) with the ACL authorizer, ``admin`` (the brokers'
own user) the super user.  A topic with three partitions, one led by each broker, is
produced to as ``client``: refused by every leader before the ACL exists; accepted by
every leader shortly after CreateAcls went to one of them (the others learn it through
the ``/kafka-acl-changes`` notifications); refused again by every leader after
DeleteAcls.  Restarted brokers read the ACLs back from ZooKeeper.
"""

from __future__ import annotations

from typing import Any

from cluster_support import ClusterFactory, admin, create_topic, wait_in_sync, wait_until
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from millrace.launcher.dev_security import ADMIN_USER, CLIENT_USER
from millrace.launcher.local_cluster import LocalCluster

TOPIC = "acl-ledger"
AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
              "super.users": f"User:{ADMIN_USER}"}


def _config(cluster: LocalCluster, user: str) -> dict[str, Any]:
    assert cluster.security is not None
    return {"bootstrap.servers": cluster.bootstrap,
            **cluster.security.client_properties(user=user)}


def _produce_each_partition(cluster: LocalCluster) -> dict[int, int]:
    """One record to each partition as ``client``: partition -> error code (0: stored)."""
    outcome: dict[int, int] = {}

    def report(err: KafkaError | None, msg: Any) -> None:
        outcome[msg.partition()] = 0 if err is None else err.code()
    producer = Producer({**_config(cluster, CLIENT_USER), "enable.idempotence": False,
                         "message.timeout.ms": 15_000, "retries": 0})
    for p in range(3):
        producer.produce(TOPIC, b"v%d" % p, partition=p, on_delivery=report)
    producer.flush(30)
    return outcome


def test_an_acl_written_through_one_broker_is_enforced_by_all(
        fresh_cluster: ClusterFactory) -> None:
    cluster = fresh_cluster(secured=True, overrides=AUTHORIZER)
    boss = admin(cluster.bootstrap, cluster.security.client_properties(user=ADMIN_USER)
                 if cluster.security else None)
    view = create_topic(boss, TOPIC, 3, 3)
    assert len({p.leader for p in view.values()}) == 3, view  # one leader per broker

    denied = {p: KafkaError.TOPIC_AUTHORIZATION_FAILED for p in range(3)}
    assert _produce_each_partition(cluster) == denied

    allow = AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL,
                       f"User:{CLIENT_USER}", "*", AclOperation.WRITE,
                       AclPermissionType.ALLOW)
    for future in boss.create_acls([allow], request_timeout=15).values():
        future.result(15)
    wait_until("every leader accepts client's writes",
               lambda: _produce_each_partition(cluster) == {0: 0, 1: 0, 2: 0}, timeout=15)

    # every broker restarted (one at a time) reads the ACL back from ZooKeeper: whichever
    # leads a partition now is a broker that started after the ACL was written
    for broker_id in sorted(cluster.brokers):
        cluster.stop_broker(broker_id)
        cluster.restart_broker(broker_id)
        wait_in_sync(boss, TOPIC, 3)
    wait_until("the restarted brokers accept client's writes",
               lambda: _produce_each_partition(cluster) == {0: 0, 1: 0, 2: 0}, timeout=30)

    flt = AclBindingFilter(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL,
                           f"User:{CLIENT_USER}", None, AclOperation.ANY,
                           AclPermissionType.ANY)
    deleted = [b for f in boss.delete_acls([flt], request_timeout=15).values()
               for b in f.result(15)]
    assert deleted == [allow]
    wait_until("every leader refuses client's writes again",
               lambda: _produce_each_partition(cluster) == denied, timeout=15)
