"""The values that go into and come out of ``KafkaController``.

- ``ControllerConfig``: the broker settings the controller reads, with Kafka's defaults;
- ``FailoverState``: everything a new controller reads from ZooKeeper before it acts;
- ``AlterPartitionItem``: one partition of an AlterPartition request (key 56);
- ``ElectionType``: the ElectLeaders (key 43) election types, with Kafka's codes;
- ``ControllerResult``: what one step of the controller asks for -- ZooKeeper writes to
  run (each under the controller-epoch check) and requests to send -- plus the answers of
  the event once it is done (``done``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from millrace.broker.controller.broker_requests import ControllerRequest
from millrace.broker.controller.controller_context import (
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
)
from millrace.broker.controller.zk_writes import ZkWrite
from millrace.broker.metadata.cluster_metadata import BrokerRegistration, TopicInfo
from millrace.common.errors import Errors
from millrace.common.topic_partition import TopicPartition

AUTO_REBALANCE_FIRST_DELAY_MS = 5_000  # Kafka schedules the first check 5 s after failover


class ElectionType(IntEnum):
    PREFERRED = 0
    UNCLEAN = 1


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    unclean_leader_election_enable: bool = False
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_per_broker_percentage: int = 10
    leader_imbalance_check_interval_seconds: int = 300
    delete_topic_enable: bool = True

    @classmethod
    def from_config(cls, config: Any) -> ControllerConfig:
        """From a ``KafkaConfig`` (or any mapping-like ``config[key]``); keys it does not
        declare keep Kafka's defaults."""
        def get(key: str, default: Any) -> Any:
            try:
                value = config[key]
            except KeyError:
                return default
            return default if value is None else value
        d = cls()
        return cls(
            bool(get("unclean.leader.election.enable", d.unclean_leader_election_enable)),
            bool(get("auto.leader.rebalance.enable", d.auto_leader_rebalance_enable)),
            int(get("leader.imbalance.per.broker.percentage",
                    d.leader_imbalance_per_broker_percentage)),
            int(get("leader.imbalance.check.interval.seconds",
                    d.leader_imbalance_check_interval_seconds)),
            bool(get("delete.topic.enable", d.delete_topic_enable)))


@dataclass(frozen=True)
class FailoverState:
    """What ``on_controller_failover`` needs, read from ZooKeeper after winning the election:
    the epoch written to ``/controller_epoch`` and that znode's new version, the brokers
    under ``/brokers/ids`` (epoch = czxid), every topic, every partition ``state`` znode,
    the children of ``/admin/delete_topics``, the partitions in
    ``/admin/preferred_replica_election``, the ``isr_change_<n>`` names to clear, and the
    partitions whose topic znode has adding or removing replicas (reassignments the
    previous controller left in progress: ``TopicInfo`` carries RS only)."""

    epoch: int
    epoch_zk_version: int
    brokers: Sequence[BrokerRegistration]
    topics: Sequence[TopicInfo]
    partition_states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch]
    topics_to_be_deleted: Collection[str] = ()
    preferred_replica_election: Collection[TopicPartition] = ()
    isr_change_notifications: Sequence[str] = ()
    reassignments: Mapping[TopicPartition, ReplicaAssignment] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AlterPartitionItem:
    """One partition of AlterPartition: the leader's view and the ISR it wants."""

    tp: TopicPartition
    leader_epoch: int
    new_isr: tuple[int, ...]
    partition_epoch: int
    leader_recovery_state: int = 0


@dataclass
class ControllerResult:
    """One step's output.  Run ``zk_writes`` in order, each as
    ``multi[check(/controller_epoch, epoch_zk_version), op]``, and hand every outcome to
    ``KafkaController.on_zk_write_results``, which returns the next step; send
    ``requests`` in order.  Requests never depend on the writes of their own result
    (those that do come in a later result), so sending them first is safe.

    The event's answers are set on the result whose ``done`` is true: no write of the
    event is still in flight.
    """

    zk_writes: list[ZkWrite] = field(default_factory=list)
    requests: list[ControllerRequest] = field(default_factory=list)
    done: bool = False
    resigned: bool = False
    error: Errors = Errors.NONE
    # controlled shutdown: the partitions the broker still leads
    remaining_partitions: list[TopicPartition] = field(default_factory=list)
    # ElectLeaders: the new leader or the error, per partition
    election_results: dict[TopicPartition, int | Errors] = field(default_factory=dict)
    # AlterPartition: the stored state or the error, per partition
    alter_partition_results: dict[TopicPartition, LeaderIsrAndControllerEpoch | Errors] = field(
        default_factory=dict)
    # AlterPartitionReassignments: NONE (submitted) or the error, per partition
    reassignment_results: dict[TopicPartition, Errors] = field(default_factory=dict)
    # ListPartitionReassignments: the ongoing reassignments asked for
    ongoing_reassignments: dict[TopicPartition, ReplicaAssignment] = field(default_factory=dict)

    def extend(self, later: ControllerResult) -> None:
        """Fold a later step into this one (used by ``KafkaController.run``)."""
        self.zk_writes += later.zk_writes
        self.requests += later.requests
        self.done, self.resigned, self.error = later.done, later.resigned, later.error
        self.remaining_partitions = later.remaining_partitions
        self.election_results = later.election_results
        self.alter_partition_results = later.alter_partition_results
        self.reassignment_results = later.reassignment_results
        self.ongoing_reassignments = later.ongoing_reassignments
