"""``ClusterMetadata``: what the broker reads and writes about the cluster, behind one interface.

Kafka keeps this state in ZooKeeper (``/brokers/ids``, ``/brokers/topics/<t>`` and its
partitions' ``state`` znodes, ``/config/topics``, ``/controller``, ``/cluster/id``,
``/latest_producer_id_block``) or in its KRaft metadata log.  Every handler and service
of the broker sees it only through this interface, so the single-node store
(``LocalMetadataStore``, a JSON file in the first log dir) and a ZooKeeper-backed store
are interchangeable and no handler knows which one it has.

The value types mirror Kafka's:

- ``TopicInfo``: name, topic id, the replica assignment (AR: partition -> broker ids,
  the preferred leader first) and the topic's config overrides;
- ``PartitionState``: Kafka's ``LeaderIsrAndControllerEpoch`` (the partition ``state``
  znode): leader, leader epoch, ISR, the controller epoch that wrote it, and the
  partition epoch (the znode version in ZooKeeper mode) that fences stale writers;
- ``BrokerRegistration``: a live broker's id, client endpoint, rack and epoch (the
  ``/brokers/ids/<id>`` znode, whose creation zxid is the broker epoch).
"""

from __future__ import annotations

import re
import uuid
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field

from millrace.common.errors import InvalidTopicError

TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME = 249
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
NO_LEADER = -1


def validate_topic_name(name: str) -> None:
    if not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError("Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_TOPIC_NAME:
        raise InvalidTopicError(f"Topic name is longer than {MAX_TOPIC_NAME} characters")
    if not TOPIC_NAME.match(name):
        raise InvalidTopicError(f"Topic name {name!r} is illegal, it contains a character "
                                "other than ASCII alphanumerics, '.', '_' and '-'")


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    assignment: dict[int, list[int]]  # partition -> replicas (AR), preferred leader first
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def partitions(self) -> int:
        return len(self.assignment)

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS

    def replicas(self, partition: int) -> list[int]:
        return self.assignment.get(partition, [])


@dataclass(frozen=True, slots=True)
class PartitionState:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int = 0
    partition_epoch: int = 0


# SecurityProtocol's wire ids (UpdateMetadata endpoints)
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
SECURITY_PROTOCOL_NAMES = {v: k for k, v in SECURITY_PROTOCOL_IDS.items()}


_ENDPOINT = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")


@dataclass(frozen=True, slots=True)
class EndPoint:
    """One listener of a broker (Kafka's ``kafka.cluster.EndPoint``)."""

    host: str
    port: int
    listener_name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"

    @property
    def connection_string(self) -> str:
        """``LISTENER://host:port``; an IPv6 host in brackets (``Utils.formatAddress``)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"

    @staticmethod
    def parse(connection_string: str,
              security_protocol_map: Mapping[str, str] | None = None) -> EndPoint:
        """``EndPoint.createEndPoint``: without a map the listener name is the protocol."""
        m = _ENDPOINT.match(connection_string)
        if m is None:
            raise ValueError(f"Unable to parse {connection_string} to a broker endpoint")
        listener = m.group(1)
        if security_protocol_map is None:
            protocol = listener
        elif listener in security_protocol_map:
            protocol = security_protocol_map[listener]
        else:
            raise ValueError(f"No security protocol defined for listener {listener}")
        return EndPoint(m.group(2), int(m.group(3)), listener, protocol)


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """A live broker.  ``host``/``port`` are its inter-broker endpoint (what replica
    fetchers, the controller and transaction markers connect to); ``endpoints`` are all
    its advertised listeners (empty: just ``host``/``port`` on the inter-broker
    listener)."""

    node_id: int
    host: str
    port: int
    rack: str | None = None
    epoch: int = 0
    endpoints: tuple[EndPoint, ...] = ()

    def endpoint_for(self, listener: str) -> tuple[str, int] | None:
        """(host, port) of the broker on ``listener``, None if it has no such listener."""
        if not self.endpoints:
            return self.host, self.port
        for e in self.endpoints:
            if e.listener_name == listener:
                return e.host, e.port
        return None


class ClusterMetadata(ABC):
    """The cluster state one broker reads and (on its own behalf) writes.

    Thread ownership: used from the broker's event-loop thread only.
    """

    @property
    @abstractmethod
    def cluster_id(self) -> str: ...

    @property
    @abstractmethod
    def controller_id(self) -> int:
        """The broker id of the active controller (``-1`` while there is none)."""

    # ------------------------------------------------------------------ brokers
    @abstractmethod
    def register_broker(self, registration: BrokerRegistration) -> None:
        """Announce this broker as alive with its client endpoint."""

    @abstractmethod
    def brokers(self) -> list[BrokerRegistration]:
        """The live brokers, by id."""

    def broker_endpoint(self, node_id: int) -> tuple[str, int] | None:
        """(host, port) of live broker ``node_id``, or None."""
        return next(((b.host, b.port) for b in self.brokers() if b.node_id == node_id), None)

    # ------------------------------------------------------------------ topics
    @property
    @abstractmethod
    def topics(self) -> Mapping[str, TopicInfo]:
        """Every topic by name (read-only view)."""

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        for t in self.topics.values():
            if t.topic_id == topic_id:
                return t
        return None

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The name of the topic with ``topic_id`` (None: no such topic)."""
        info = self.topic_by_id(topic_id)
        return info.name if info is not None else None

    @abstractmethod
    def create_topic(self, name: str, assignment: dict[int, list[int]],
                     configs: dict[str, str]) -> TopicInfo: ...

    @abstractmethod
    def delete_topic(self, name: str) -> TopicInfo: ...

    @abstractmethod
    def add_partitions(self, name: str, assignment: dict[int, list[int]]) -> TopicInfo:
        """Add partitions (new partition ids -> replicas) to an existing topic."""

    @abstractmethod
    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """Replace the topic's config overrides."""

    # ------------------------------------------------------------------ partitions
    @abstractmethod
    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        """Leader, leader epoch and ISR of one partition (None: no such partition)."""

    # ------------------------------------------------------------------ producer ids
    @abstractmethod
    def reserve_producer_ids(self, count: int) -> tuple[int, int]:
        """Reserve a block ``[start, end)`` of producer ids, durably: no id is ever
        handed out twice in the cluster, across restarts."""
