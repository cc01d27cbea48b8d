"""``MetadataCache``: a cluster broker's view of the cluster, as the controller sends it.

Java counterpart: ``ZkMetadataCache``.  In ZooKeeper mode brokers do not read partition
state from ZooKeeper to answer clients: the controller pushes it with UpdateMetadata
(live brokers with their endpoints and racks, and per partition its leader, leader epoch,
ISR, replicas and offline replicas).  Each request replaces the live-broker list and
overwrites the partitions it names; a partition whose leader is ``LEADER_DURING_DELETE``
(-2) is being deleted and leaves the cache.  Metadata, FindCoordinator and the replica
fetchers (a leader's endpoint) read it.

Owned by the event-loop thread.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from millrace.broker.metadata.cluster_metadata import BrokerRegistration, PartitionState

LEADER_DURING_DELETE = -2


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    """One partition as UpdateMetadata describes it."""

    topic: str
    partition: int
    state: PartitionState
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()


class MetadataCache:
    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.controller_id = -1
        self.controller_epoch = -1
        self.alive_brokers: dict[int, BrokerRegistration] = {}
        self.topic_ids: dict[str, uuid.UUID] = {}
        self._partitions: dict[str, dict[int, PartitionMetadata]] = {}

    def update_metadata(self, controller_id: int, controller_epoch: int,
                        brokers: Iterable[BrokerRegistration],
                        partitions: Iterable[PartitionMetadata],
                        topic_ids: dict[str, uuid.UUID] | None = None
                        ) -> list[tuple[str, int]]:
        """Apply one UpdateMetadata; returns the partitions deleted by it."""
        self.controller_id = controller_id
        self.controller_epoch = controller_epoch
        self.alive_brokers = {b.node_id: b for b in brokers}
        deleted: list[tuple[str, int]] = []
        for p in partitions:
            if p.state.leader == LEADER_DURING_DELETE:
                parts = self._partitions.get(p.topic)
                if parts is not None and parts.pop(p.partition, None) is not None:
                    deleted.append((p.topic, p.partition))
                    if not parts:
                        del self._partitions[p.topic]
                        self.topic_ids.pop(p.topic, None)
                continue
            self._partitions.setdefault(p.topic, {})[p.partition] = p
        for name, topic_id in (topic_ids or {}).items():
            if name in self._partitions:
                self.topic_ids[name] = topic_id
        return deleted

    # ------------------------------------------------------------------ reads
    def topic_names(self) -> list[str]:
        return sorted(self._partitions)

    def partitions(self, topic: str) -> dict[int, PartitionMetadata]:
        return dict(self._partitions.get(topic, {}))

    def partition(self, topic: str, partition: int) -> PartitionMetadata | None:
        return self._partitions.get(topic, {}).get(partition)

    def alive_broker(self, node_id: int) -> BrokerRegistration | None:
        return self.alive_brokers.get(node_id)

    def leader_of(self, topic: str, partition: int) -> BrokerRegistration | None:
        p = self.partition(topic, partition)
        return None if p is None else self.alive_brokers.get(p.state.leader)
