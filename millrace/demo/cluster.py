"""``millrace demo --brokers 3``: the demo on a replicated cluster, with a leader killed
half-way through producing.

The cluster is a ``LocalCluster`` (ZooKeeper and N ``millrace broker`` processes) in
``<data_dir>/cluster``; the topic is replicated on 3 brokers with
``min.insync.replicas=2`` and the producer sends with ``acks=all`` and idempotence, so an
acknowledged event is on at least two brokers and a retried batch is never written twice.
Half-way through producing, ``LeaderKill`` kills (SIGKILL, as ``kill -9``) the broker that
leads one partition -- one that is not also the controller when there is a choice, so the
run shows a partition failover rather than a controller election.  The controller notices
when the dead broker's ZooKeeper session expires (``zookeeper.session.timeout.ms``,
lowered here to ``DEMO_SESSION_TIMEOUT_MS`` so the pause stays short), elects a new leader
from the ISR, and the producer retries its unacknowledged batches there.  The verification
at the end then proves that nothing acknowledged was lost or duplicated.

The killed broker stays down for the rest of the run (the pipeline reads from the
survivors); the next run on the same data dir starts all N again, and it catches up.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from millrace.launcher.local_cluster import LocalCluster

CLUSTER_DIR = "cluster"
REPLICATION_FACTOR = 3
MIN_INSYNC_REPLICAS = 2
DEMO_SESSION_TIMEOUT_MS = 6000
CLUSTER_PRODUCER_CONFIG = {"acks": "all", "enable.idempotence": True}


class ClusterDemoError(Exception):
    """The cluster did not start, or no leader could be found to kill."""


def cluster_overrides(brokers: int) -> dict[str, str]:
    return {
        "zookeeper.session.timeout.ms": str(DEMO_SESSION_TIMEOUT_MS),
        "offsets.topic.replication.factor": str(min(REPLICATION_FACTOR, brokers)),
        "transaction.state.log.replication.factor": str(min(REPLICATION_FACTOR, brokers)),
        "num.partitions": "1",
        # the last broker to stop has nobody to hand its leaderships to: retry briefly
        "controlled.shutdown.retry.backoff.ms": "1000",
    }


@contextmanager
def demo_cluster(data_dir: Path, brokers: int, *, secured: bool = False
                 ) -> Iterator[LocalCluster]:
    """ZooKeeper and ``brokers`` brokers under ``data_dir``; stopped on the way out
    (controlled shutdown, one broker at a time), killed if the demo fails.  ``secured``:
    every listener SASL_SSL with SCRAM-SHA-512 (``DevSecurity`` under
    ``data_dir/security``; ``cluster.security.client_properties()`` connects a client)."""
    from millrace.launcher.dev_security import DevSecurity
    from millrace.launcher.zookeeper_process import zookeeper_missing

    missing = zookeeper_missing()
    if missing:
        raise ClusterDemoError(missing)
    security = DevSecurity.create(data_dir) if secured else None
    cluster = LocalCluster(data_dir, brokers, overrides=cluster_overrides(brokers),
                           security=security, http=True)  # /metrics on every broker
    try:
        cluster.start()
        if security is not None:
            security.write_client_properties(cluster.bootstrap)
    except (RuntimeError, OSError) as e:
        cluster.kill_all()
        raise ClusterDemoError(f"the demo cluster did not start; see the logs in {data_dir}: "
                               f"{str(e).splitlines()[0]}") from None
    try:
        yield cluster
    except BaseException:
        cluster.kill_all()
        raise
    cluster.stop()


@dataclass
class KilledLeader:
    broker_id: int
    topic: str
    partition: int

    def describe(self) -> str:
        return (f"killed broker {self.broker_id} (kill -9), the leader of "
                f"{self.topic}-{self.partition}, while producing")


class LeaderKill:
    """Called once, half-way through producing: kill the leader of one partition."""

    def __init__(self, cluster: LocalCluster, topic: str,
                 client: Mapping[str, Any] | None = None) -> None:
        self.cluster = cluster
        self.topic = topic
        self.client = dict(client or {})  # the clients' settings (security)
        self.killed: KilledLeader | None = None

    def choose(self) -> KilledLeader:
        from millrace.demo.run import admin_client

        with admin_client(self.cluster.bootstrap, self.client) as admin:
            controller = admin.describe_cluster().controller
            partitions = admin.describe_topics([self.topic]).all()[self.topic].partitions
        led = [(p.partition, p.leader.id) for p in partitions if p.leader is not None]
        if not led:
            raise ClusterDemoError(f"no partition of {self.topic!r} has a leader to kill")
        others = [pl for pl in led if controller is None or pl[1] != controller.id]
        partition, leader = (others or led)[0]
        return KilledLeader(leader, self.topic, partition)

    def __call__(self) -> KilledLeader:
        victim = self.choose()
        self.cluster.kill_broker(victim.broker_id)
        self.killed = victim
        return victim
