"""``AdminManager``: topic creation, deletion, new partitions and config changes.

Java counterpart: ``ZkAdminManager`` (the broker side of CreateTopics, DeleteTopics,
CreatePartitions and the config APIs).  It validates a request (names, partition counts,
replication factor against the live brokers, configs against the log's config table),
writes the result into the cluster metadata and lets the replica manager host the new
partitions.  On one node this broker is the only replica of everything; with a
controller, the metadata write is what the controller reacts to.

Thread ownership: the event-loop thread.
"""

from __future__ import annotations

import logging
import uuid

from millrace.broker.config import KafkaConfig
from millrace.broker.controller.replica_assignment import (
    BrokerMetadata,
    assign_added_partitions,
    assign_replicas_to_brokers,
)
from millrace.broker.metadata import (
    INTERNAL_TOPICS,
    ClusterMetadata,
    TopicInfo,
    validate_topic_name,
)
from millrace.broker.replica_manager import ReplicaManager
from millrace.broker.topic_config import TopicConfigs
from millrace.common.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)

log = logging.getLogger("millrace.broker")


class AdminManager:
    def __init__(self, config: KafkaConfig, metadata: ClusterMetadata,
                 replica_manager: ReplicaManager, topic_configs: TopicConfigs,
                 cluster: bool = False) -> None:
        self._config = config
        self._metadata = metadata
        self._rm = replica_manager
        self._topic_configs = topic_configs
        # In a cluster the controller hosts new partitions (LeaderAndIsr) once the
        # metadata write lands; on one node this broker hosts them at once.
        self._cluster = cluster

    def _brokers(self) -> list[BrokerMetadata]:
        return [BrokerMetadata(b.node_id, b.rack) for b in self._metadata.brokers()]

    def _assign(self, partitions: range, replication_factor: int) -> dict[int, list[int]]:
        """Replica assignment for new partitions: Kafka's spread over the live brokers
        (rack-aware when they have racks); on one node, this broker."""
        if self._cluster:
            return assign_replicas_to_brokers(self._brokers(), len(partitions),
                                              replication_factor)
        node = self._config.node_id
        return {p: [node] for p in partitions}

    def create_topic(self, name: str, partitions: int, configs: dict[str, str],
                     replication_factor: int = -1, validate_only: bool = False,
                     assignment: dict[int, list[int]] | None = None) -> TopicInfo:
        """Create ``name`` with ``partitions`` x ``replication_factor`` replicas (-1: the
        broker defaults), or with an explicit ``assignment`` (partition -> broker ids),
        checked as Kafka checks it: partitions numbered from 0, the same replication
        factor everywhere, no broker twice in a partition, every broker live."""
        if name in self._metadata.topics:
            raise TopicExistsError(f"Topic '{name}' already exists.")
        if partitions == -1:
            partitions = self._config["num.partitions"]
        if partitions < 1:
            raise InvalidPartitionsError("Number of partitions must be larger than 0.")
        rf = self._config["default.replication.factor"] if replication_factor == -1 else (
            replication_factor)
        if rf < 1:
            raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
        brokers = max(1, len(self._metadata.brokers()))
        if rf > brokers and (self._cluster or name not in INTERNAL_TOPICS):
            raise InvalidReplicationFactorError(
                f"Replication factor: {rf} larger than available brokers: {brokers}.")
        self._topic_configs.validate(configs)
        validate_topic_name(name)
        if assignment is None:
            assignment = self._assign(range(partitions), rf)
        else:
            self._check_assignment(assignment)
        if validate_only:
            return TopicInfo(name, uuid.UUID(int=0), assignment, dict(configs))
        info = self._metadata.create_topic(name, assignment, configs)
        if not self._cluster:
            self._rm.create_partitions(info, 0, partitions)
        log.info("created topic %s with %d partition(s)", name, partitions)
        return info

    def _check_assignment(self, assignment: dict[int, list[int]]) -> None:
        if sorted(assignment) != list(range(len(assignment))):
            raise InvalidReplicaAssignmentError(
                "Unexpected existing partitions: partitions must be numbered consecutively "
                f"from 0, got {sorted(assignment)}")
        sizes = {len(r) for r in assignment.values()}
        if len(sizes) != 1 or 0 in sizes:
            raise InvalidReplicaAssignmentError(
                "All partitions should have the same number of replicas")
        live = {b.node_id for b in self._metadata.brokers()}
        for p, replicas in sorted(assignment.items()):
            if len(set(replicas)) != len(replicas):
                raise InvalidReplicaAssignmentError(
                    f"Duplicate brokers not allowed in replica assignment: {replicas} "
                    f"for partition {p}")
            unknown = sorted(r for r in replicas if r not in live)
            if unknown:
                raise InvalidReplicaAssignmentError(
                    f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}.")

    def delete_topic(self, name: str) -> None:
        if name not in self._metadata.topics:
            raise UnknownTopicOrPartitionError("This server does not host this topic.")
        if not self._cluster:
            self._rm.delete_topic(name)
        self._metadata.delete_topic(name)
        log.info("deleted topic %s", name)

    def create_partitions(self, name: str, count: int, assignments: list[list[int]] | None,
                          validate_only: bool) -> None:
        """Grow ``name`` to ``count`` partitions (Kafka's messages for each refusal)."""
        info = self._metadata.topics.get(name)
        if info is None:
            raise UnknownTopicOrPartitionError(f"The topic '{name}' does not exist.")
        if count <= info.partitions:
            raise InvalidPartitionsError(
                f"Topic currently has {info.partitions} partitions, which is higher than or "
                f"equal to the requested {count}.")
        if assignments is not None and len(assignments) != count - info.partitions:
            raise InvalidPartitionsError(
                f"Increasing the number of partitions by {count - info.partitions} but "
                f"{len(assignments)} assignments provided.")
        if validate_only:
            return
        start = info.partitions
        if self._cluster:
            added = {p: list(r) for p, r in zip(range(start, count), assignments)} \
                if assignments is not None else \
                assign_added_partitions(self._brokers(), info.assignment, count)
            self._metadata.add_partitions(name, added)
            return
        info = self._metadata.add_partitions(name, self._assign(range(start, count), 1))
        self._rm.create_partitions(info, start, count)

    def alter_topic_configs(self, name: str, configs: dict[str, str],
                            validate_only: bool) -> None:
        """Replace the topic's overrides; raises ConfigError naming a bad key."""
        self._topic_configs.validate(configs)
        if validate_only:
            return
        self._metadata.set_topic_configs(name, configs)
        self._rm.update_topic_config(self._metadata.topics[name])
