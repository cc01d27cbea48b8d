"""An immutable view of the cluster: brokers, topics, partitions and their leaders.

Java counterparts: ``org.apache.kafka.common.Cluster``, ``Node``, ``PartitionInfo`` and
``TopicPartition``.  ``Metadata`` replaces its ``Cluster`` as a whole on every update, so
a reader on another thread always sees one consistent snapshot without taking a lock.
The indexes the producer's hot path needs (partition count by topic, partitions led by
a node, available partitions) are built once per snapshot.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from millrace.common.topic_partition import TopicPartition


class Node(NamedTuple):
    """A broker.  Bootstrap addresses get negative ids (-1, -2, ...) until metadata arrives."""

    id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def __str__(self) -> str:
        return f"{self.host}:{self.port} (id: {self.id} rack: {self.rack})"


class PartitionInfo(NamedTuple):
    topic: str
    partition: int
    leader: Node | None
    replicas: tuple[int, ...] = ()
    in_sync_replicas: tuple[int, ...] = ()
    offline_replicas: tuple[int, ...] = ()
    leader_epoch: int = -1


class Cluster:
    """Immutable; build a new one to change anything."""

    __slots__ = (
        "_available",
        "_by_node",
        "_by_topic",
        "_leaders",
        "_nodes",
        "cluster_id",
        "controller",
        "internal_topics",
        "invalid_topics",
        "is_bootstrap",
        "partition_counts",
        "topic_errors",
        "unauthorized_topics",
    )

    def __init__(
        self,
        nodes: Iterable[Node] = (),
        partitions: Iterable[PartitionInfo] = (),
        *,
        cluster_id: str | None = None,
        controller: Node | None = None,
        unauthorized_topics: Iterable[str] = (),
        invalid_topics: Iterable[str] = (),
        internal_topics: Iterable[str] = (),
        topic_errors: dict[str, int] | None = None,
        is_bootstrap: bool = False,
    ) -> None:
        self._nodes: dict[int, Node] = {n.id: n for n in nodes}
        self.cluster_id = cluster_id
        self.controller = controller
        self.unauthorized_topics = frozenset(unauthorized_topics)
        self.invalid_topics = frozenset(invalid_topics)
        self.internal_topics = frozenset(internal_topics)
        self.topic_errors = dict(topic_errors or {})
        self.is_bootstrap = is_bootstrap
        by_topic: dict[str, list[PartitionInfo]] = {}
        by_node: dict[int, list[PartitionInfo]] = {}
        leaders: dict[TopicPartition, Node] = {}
        for p in partitions:
            by_topic.setdefault(p.topic, []).append(p)
            if p.leader is not None:
                by_node.setdefault(p.leader.id, []).append(p)
                leaders[TopicPartition(p.topic, p.partition)] = p.leader
        for infos in by_topic.values():
            infos.sort(key=lambda i: i.partition)
        self._by_topic = {t: tuple(ps) for t, ps in by_topic.items()}
        self._by_node = {n: tuple(ps) for n, ps in by_node.items()}
        self._leaders = leaders
        # topic -> number of partitions; read on the producer's per-record path
        self.partition_counts: dict[str, int] = {t: len(ps) for t, ps in self._by_topic.items()}
        self._available = {t: tuple(p for p in ps if p.leader is not None)
                           for t, ps in self._by_topic.items()}

    @staticmethod
    def empty() -> Cluster:
        return Cluster()

    @staticmethod
    def bootstrap(addresses: Iterable[tuple[str, int]]) -> Cluster:
        nodes = [Node(-(i + 1), host, port) for i, (host, port) in enumerate(addresses)]
        return Cluster(nodes, is_bootstrap=True)

    # -- nodes
    @property
    def nodes(self) -> list[Node]:
        return list(self._nodes.values())

    def node_by_id(self, node_id: int) -> Node | None:
        return self._nodes.get(node_id)

    # -- topics and partitions
    @property
    def topics(self) -> frozenset[str]:
        return frozenset(self._by_topic)

    def partition_count(self, topic: str) -> int | None:
        """Number of partitions, or None when the topic is not in this snapshot."""
        return self.partition_counts.get(topic)

    def partitions_for_topic(self, topic: str) -> tuple[PartitionInfo, ...]:
        return self._by_topic.get(topic, ())

    def available_partitions_for_topic(self, topic: str) -> tuple[PartitionInfo, ...]:
        return self._available.get(topic, ())

    def partitions_for_node(self, node_id: int) -> tuple[PartitionInfo, ...]:
        return self._by_node.get(node_id, ())

    def leader_for(self, tp: TopicPartition) -> Node | None:
        return self._leaders.get(tp)

    def partition(self, tp: TopicPartition) -> PartitionInfo | None:
        infos = self._by_topic.get(tp.topic, ())
        if 0 <= tp.partition < len(infos) and infos[tp.partition].partition == tp.partition:
            return infos[tp.partition]
        for info in infos:
            if info.partition == tp.partition:
                return info
        return None

    def __repr__(self) -> str:
        return (f"Cluster(id={self.cluster_id}, nodes={sorted(self._nodes)}, "
                f"topics={sorted(self._by_topic)})")
