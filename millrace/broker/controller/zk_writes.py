"""The ZooKeeper writes the controller asks for, and how each one turned out.

The controller is pure: it never talks to ZooKeeper.  Its results list these plain values
in the order they must run; whoever drives it (the ZooKeeper-backed controller service)
executes each one as ``multi[check(/controller_epoch, epoch_zk_version), op]`` so a
controller that lost its epoch can never write (KAFKA-6082), then reports each outcome
back as a ``ZkWriteResult``.

Paths (reference §1; all under the chroot, if any):

- ``CreatePartitionState`` creates ``/brokers/topics/<t>/partitions/<p>/state`` (and
  the missing parents) with ``{"version":1,"leader","leader_epoch","isr",
  "controller_epoch"}`` (plus ``"leader_recovery_state":1`` while RECOVERING);
- ``UpdatePartitionState`` is a setData on that znode at ``expected_zk_version``;
- ``UpdateTopicAssignment`` is a setData (any version) of ``/brokers/topics/<t>`` with
  every partition's replicas and the ``adding_replicas`` / ``removing_replicas`` of the
  partitions being reassigned (KIP-455; Kafka's ``setTopicAssignmentRaw``);
- ``DeleteTopicZnodes`` deletes ``/brokers/topics/<t>`` recursively, then
  ``/config/topics/<t>``, then ``/admin/delete_topics/<t>``;
- ``DeleteTopicDeletionFlag`` deletes ``/admin/delete_topics/<t>`` alone (a topic that
  no longer exists, or deletion disabled);
- ``DeleteIsrChangeNotifications`` deletes ``/isr_change_notification/isr_change_<n>``;
- ``DeletePreferredReplicaElection`` deletes ``/admin/preferred_replica_election``.

Outcomes: a state write that succeeded reports the znode's new version; one that failed
with BADVERSION reports the state re-read from ZooKeeper (the controller retries from it,
or gives up if another controller wrote it); a failed epoch check reports
CONTROLLER_MOVED and the controller resigns.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from enum import Enum

from millrace.broker.controller.controller_context import (
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
)
from millrace.common.topic_partition import TopicPartition


@dataclass(frozen=True, slots=True)
class CreatePartitionState:
    tp: TopicPartition
    state: LeaderIsrAndControllerEpoch


@dataclass(frozen=True, slots=True)
class UpdatePartitionState:
    tp: TopicPartition
    new_state: LeaderIsrAndControllerEpoch   # its zk_version is expected_zk_version + 1
    expected_zk_version: int


@dataclass(frozen=True, slots=True)
class UpdateTopicAssignment:
    """The whole topic znode: every partition's assignment (a reassignment changes one
    partition, but the znode holds them all)."""

    topic: str
    topic_id: uuid.UUID | None
    assignment: dict[int, ReplicaAssignment]


@dataclass(frozen=True, slots=True)
class DeleteTopicZnodes:
    topic: str


@dataclass(frozen=True, slots=True)
class DeleteTopicDeletionFlag:
    topic: str


@dataclass(frozen=True, slots=True)
class DeleteIsrChangeNotifications:
    sequence_numbers: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DeletePreferredReplicaElection:
    pass


ZkWrite = (CreatePartitionState | UpdatePartitionState | UpdateTopicAssignment
           | DeleteTopicZnodes
           | DeleteTopicDeletionFlag | DeleteIsrChangeNotifications
           | DeletePreferredReplicaElection)


class ZkWriteError(Enum):
    BAD_VERSION = "BADVERSION"          # setData: the znode moved on; ``stored`` has it
    NO_NODE = "NONODE"                  # the znode is gone
    NODE_EXISTS = "NODEEXISTS"          # create: someone created it first
    CONTROLLER_MOVED = "CONTROLLER_MOVED"  # the /controller_epoch check failed


@dataclass(frozen=True, slots=True)
class ZkWriteResult:
    write: ZkWrite
    error: ZkWriteError | None = None
    zk_version: int = -1                               # after success: the znode's version
    stored: LeaderIsrAndControllerEpoch | None = None  # after BAD_VERSION: the re-read state

    @classmethod
    def ok(cls, write: ZkWrite, zk_version: int = -1) -> ZkWriteResult:
        return cls(write, None, zk_version)

    @classmethod
    def bad_version(cls, write: ZkWrite, stored: LeaderIsrAndControllerEpoch | None
                    ) -> ZkWriteResult:
        return cls(write, ZkWriteError.BAD_VERSION, -1, stored)

    @classmethod
    def failed(cls, write: ZkWrite, error: ZkWriteError) -> ZkWriteResult:
        return cls(write, error)
