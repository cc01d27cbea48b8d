"""``ZkClusterMetadata``: ``ClusterMetadata`` for a broker in a ZooKeeper cluster.

Reads come from what the controller pushed (``MetadataCache``: live brokers, partition
leaders, epochs, ISRs and replicas, topic ids, the controller's id) plus the topics'
config overrides, read from ``/config/topics/<t>`` when a topic is first seen (off the
event loop, when LeaderAndIsr or UpdateMetadata brings it) and again when a config-change
notification names it.  Writes go to ZooKeeper, where the
controller reacts to them: a new topic is its config znode and then its assignment
znode, new partitions extend the assignment, a config change is the config znode plus a
``config_change`` notification; producer-id blocks are reserved with a conditional
write so two brokers never get the same block.

ZooKeeper calls block the calling thread for a round trip to the ensemble; on the
broker's loop they are admin-path operations (topic creation, config changes, one call
per thousand producer ids), never on the produce or fetch path.

Owned by the event-loop thread.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping
from types import MappingProxyType

from millrace.broker.metadata.cluster_metadata import (
    BrokerRegistration,
    ClusterMetadata,
    PartitionState,
    TopicInfo,
    validate_topic_name,
)
from millrace.broker.metadata.local_store import new_topic_id
from millrace.broker.metadata.metadata_cache import MetadataCache
from millrace.broker.zk import KafkaZkClient
from millrace.broker.zk.errors import ZkNodeExistsError
from millrace.broker.zk.zk_data import BrokerInfo, EndPoint
from millrace.common.errors import TopicExistsError

log = logging.getLogger(__name__)


class ZkClusterMetadata(ClusterMetadata):
    def __init__(self, zk: KafkaZkClient, cache: MetadataCache, cluster_id: str,
                 listener_name: str = "PLAINTEXT") -> None:
        self.zk = zk
        self.cache = cache
        self._cluster_id = cluster_id
        self._listener = listener_name
        self._configs: dict[str, dict[str, str]] = {}
        self.broker_epoch = -1
        self._registration: BrokerRegistration | None = None

    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    @property
    def controller_id(self) -> int:
        return self.cache.controller_id

    # ------------------------------------------------------------------ brokers
    def register_broker(self, registration: BrokerRegistration) -> None:
        self._registration = registration
        endpoints = registration.endpoints or (
            EndPoint(registration.host, registration.port, self._listener),)
        info = BrokerInfo(registration.node_id, endpoints, registration.rack)
        self.broker_epoch = self.zk.register_broker(info)
        log.info("registered broker %d at %s:%d (broker epoch %d)", registration.node_id,
                 registration.host, registration.port, self.broker_epoch)

    def reregister(self) -> int:
        """Register again after the ZooKeeper session expired (its ephemeral registration
        went with it); returns the new broker epoch."""
        assert self._registration is not None, "register_broker first"
        self.register_broker(self._registration)
        return self.broker_epoch

    def brokers(self) -> list[BrokerRegistration]:
        return [self.cache.alive_brokers[i] for i in sorted(self.cache.alive_brokers)]

    # ------------------------------------------------------------------ topics
    @property
    def topics(self) -> Mapping[str, TopicInfo]:
        out: dict[str, TopicInfo] = {}
        for name in self.cache.topic_names():
            parts = self.cache.partitions(name)
            out[name] = TopicInfo(
                name, self.cache.topic_ids.get(name, uuid.UUID(int=0)),
                {i: list(p.replicas) for i, p in sorted(parts.items())},
                self.topic_configs(name))
        return MappingProxyType(out)

    def topic_configs(self, name: str) -> dict[str, str]:
        configs = self._configs.get(name)
        if configs is None:
            configs = self._configs[name] = dict(self.zk.get_entity_configs("topics", name))
        return configs

    def topics_without_configs(self, names: Iterable[str]) -> list[str]:
        """Which of ``names`` have no config overrides cached yet."""
        return sorted({n for n in names if n not in self._configs})

    def read_topic_configs(self, names: Iterable[str]) -> dict[str, dict[str, str]]:
        """Read the overrides of ``names`` from ZooKeeper without caching them: blocking,
        so called from an executor thread, never the event loop; the loop hands the
        result to ``remember_topic_configs``."""
        return {n: dict(self.zk.get_entity_configs("topics", n)) for n in names}

    def remember_topic_configs(self, configs: Mapping[str, dict[str, str]]) -> None:
        """Cache overrides read off the loop (``read_topic_configs``) when the controller
        told this broker about the topics: a Metadata request must be answered from
        memory, since a broker cut off from ZooKeeper would otherwise freeze its event
        loop on the read until its session expires.  A cached entry is newer (a
        config-change notification) and wins."""
        for name, c in configs.items():
            self._configs.setdefault(name, dict(c))

    def config_changed(self, name: str) -> dict[str, str]:
        """A config-change notification named ``name``: read its overrides again."""
        self._configs.pop(name, None)
        return self.topic_configs(name)

    def create_topic(self, name: str, assignment: dict[int, list[int]],
                     configs: dict[str, str]) -> TopicInfo:
        validate_topic_name(name)
        topic_id = new_topic_id(set(self.cache.topic_ids.values()))
        try:
            self.zk.create_topic(name, topic_id, assignment, configs)
        except ZkNodeExistsError:  # another broker created it first
            raise TopicExistsError(f"Topic '{name}' already exists.") from None
        self._configs[name] = dict(configs)
        return TopicInfo(name, topic_id, dict(assignment), dict(configs))

    def delete_topic(self, name: str) -> TopicInfo:
        info = self.topics[name]
        self.zk.create_delete_topic_path(name)
        return info

    def add_partitions(self, name: str, assignment: dict[int, list[int]]) -> TopicInfo:
        result = self.zk.add_partitions(name, assignment)
        info = self.topics.get(name)
        return TopicInfo(name, info.topic_id if info else uuid.UUID(int=0),
                         result.replicas(), self.topic_configs(name))

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        self.zk.change_topic_config(name, configs)
        self._configs[name] = dict(configs)

    # ------------------------------------------------------------------ partitions
    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        p = self.cache.partition(topic, partition)
        return None if p is None else p.state

    # ------------------------------------------------------------------ producer ids
    def reserve_producer_ids(self, count: int) -> tuple[int, int]:
        block = self.zk.allocate_producer_id_block(self.cache.broker_id, count)
        return block.first_producer_id, block.first_producer_id + block.size
