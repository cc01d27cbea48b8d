"""``ControllerContext``: the controller's cached view of the cluster, read from ZooKeeper.

Java counterpart: ``kafka.controller.ControllerContext``.  Owned by the controller's
single event thread; nothing here does I/O.

What it holds:

- the controller's own epoch and the zkVersion of ``/controller_epoch`` it won with (every
  write the controller makes is checked against that version: KAFKA-6082);
- the live brokers with their registrations (whose ``epoch`` is the czxid of
  ``/brokers/ids/<id>``) and the set of brokers in controlled shutdown;
- every topic's id and replica assignment (AR, the preferred leader first), and for the
  partitions being reassigned (KIP-455) their full ``ReplicaAssignment``: RS = TRS + ORS
  with the adding (TRS - ORS) and removing (ORS - TRS) replicas, as the topic znode
  stores them;
- every partition's ``LeaderIsrAndControllerEpoch`` (the ``state`` znode and its version);
- the topics queued for deletion.

The partition state of Kafka's ``PartitionStateMachine`` is derived, not stored: a
partition with an assignment but no state znode is *New*; one whose leader is -1 or not a
registered broker is *Offline*; otherwise *Online*.  Deriving it keeps the two from ever
disagreeing.

"Live" for elections means registered and not shutting down (Kafka's ``isReplicaOnline``);
requests still go to shutting-down brokers until their registration disappears.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from millrace.broker.controller.election import LeaderRecoveryState
from millrace.broker.metadata.cluster_metadata import BrokerRegistration, PartitionState
from millrace.common.topic_partition import TopicPartition

NO_LEADER = -1
LEADER_DURING_DELETE = -2  # the leader (and StopReplica's epoch) of a partition being deleted
INITIAL_LEADER_EPOCH = 0
INITIAL_ZK_VERSION = 0


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    """A partition's replica set (RS) and, during a reassignment, the replicas being added
    and removed (Kafka's controller ``ReplicaAssignment``).  The original set (ORS) is RS
    without the adding replicas, the target set (TRS) RS without the removing ones."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    @property
    def origin_replicas(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.adding_replicas)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing_replicas)

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    def reassign_to(self, target: Iterable[int]) -> ReplicaAssignment:
        """RS = TRS then ORS (target first, in its order; duplicates dropped), with
        adding = RS - ORS and removing = RS - TRS.  Cancelling is ``reassign_to(ORS)``,
        which cannot always restore ORS's order (Kafka's documented limit)."""
        target = tuple(target)
        origin = self.origin_replicas
        full = tuple(dict.fromkeys((*target, *origin)))
        return ReplicaAssignment(full, tuple(r for r in full if r not in origin),
                                 tuple(r for r in full if r not in target))


@dataclass(frozen=True, slots=True)
class LeaderIsrAndControllerEpoch:
    """One partition's ``state`` znode (Kafka's ``LeaderAndIsr`` plus the controller epoch
    that wrote it); ``zk_version`` is the znode's version, the partition epoch."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int = INITIAL_ZK_VERSION
    leader_recovery_state: LeaderRecoveryState = LeaderRecoveryState.RECOVERED

    def new_leader_and_isr(self, leader: int, isr: Iterable[int], controller_epoch: int,
                           recovery: LeaderRecoveryState | None = None
                           ) -> LeaderIsrAndControllerEpoch:
        """The state a controller-driven change writes: leader epoch + 1, version + 1."""
        return replace(self, leader=leader, isr=tuple(isr), leader_epoch=self.leader_epoch + 1,
                       controller_epoch=controller_epoch, zk_version=self.zk_version + 1,
                       leader_recovery_state=(self.leader_recovery_state if recovery is None
                                              else recovery))

    def to_partition_state(self) -> PartitionState:
        """The broker-side value type (``ClusterMetadata.partition_state``)."""
        return PartitionState(self.leader, self.leader_epoch, self.isr, self.controller_epoch,
                              self.zk_version)

    @classmethod
    def from_partition_state(cls, state: PartitionState) -> LeaderIsrAndControllerEpoch:
        return cls(state.leader, state.leader_epoch, tuple(state.isr), state.controller_epoch,
                   state.partition_epoch)


class ControllerContext:
    """The controller's cache.  Owned by the controller's event thread."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Forget everything (a new controller epoch reloads from ZooKeeper)."""
        self.epoch = 0
        self.epoch_zk_version = 0
        self.live_brokers: dict[int, BrokerRegistration] = {}
        self.shutting_down_broker_ids: set[int] = set()
        self.topic_ids: dict[str, uuid.UUID] = {}
        self.topic_configs: dict[str, dict[str, str]] = {}
        self.assignments: dict[str, dict[int, tuple[int, ...]]] = {}
        self.leadership: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        # Kafka's OfflinePartition: partitions whose leader this controller saw dead and
        # that have not had an election since.  One stays here when its old leader comes
        # back, so it is elected again (a new leader epoch) instead of keeping a state
        # some replicas were sent while its leader was unreachable.
        self.offline_partitions: set[TopicPartition] = set()
        self.topics_to_be_deleted: set[str] = set()
        # partitions being reassigned -> their full assignment (RS is also in assignments)
        self.partitions_being_reassigned: dict[TopicPartition, ReplicaAssignment] = {}

    # ------------------------------------------------------------------ brokers
    @property
    def live_or_shutting_down_broker_ids(self) -> set[int]:
        return set(self.live_brokers)

    @property
    def live_broker_ids(self) -> set[int]:
        """Brokers eligible for leadership and ISR membership: registered, not shutting down."""
        return set(self.live_brokers) - self.shutting_down_broker_ids

    def broker_epoch(self, broker_id: int) -> int | None:
        reg = self.live_brokers.get(broker_id)
        return None if reg is None else reg.epoch

    def is_replica_online(self, broker_id: int, include_shutting_down: bool = False) -> bool:
        if broker_id not in self.live_brokers:
            return False
        return include_shutting_down or broker_id not in self.shutting_down_broker_ids

    def add_live_brokers(self, registrations: Iterable[BrokerRegistration]) -> None:
        for reg in registrations:
            self.live_brokers[reg.node_id] = reg

    def remove_live_brokers(self, broker_ids: Iterable[int]) -> None:
        for b in broker_ids:
            self.live_brokers.pop(b, None)
            self.shutting_down_broker_ids.discard(b)

    # ------------------------------------------------------------------ topics
    @property
    def all_topics(self) -> set[str]:
        return set(self.assignments)

    def add_topic(self, name: str, topic_id: uuid.UUID,
                  assignment: dict[int, tuple[int, ...]], configs: dict[str, str]) -> None:
        self.topic_ids[name] = topic_id
        self.topic_configs[name] = dict(configs)
        self.assignments.setdefault(name, {}).update(assignment)

    def remove_topic(self, name: str) -> None:
        for p in self.assignments.pop(name, {}):
            self.leadership.pop(TopicPartition(name, p), None)
            self.partitions_being_reassigned.pop(TopicPartition(name, p), None)
        self.topic_ids.pop(name, None)
        self.topic_configs.pop(name, None)
        self.topics_to_be_deleted.discard(name)

    def is_topic_queued_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_be_deleted

    # ------------------------------------------------------------------ partitions
    def all_partitions(self) -> Iterator[TopicPartition]:
        for topic in sorted(self.assignments):
            for p in sorted(self.assignments[topic]):
                yield TopicPartition(topic, p)

    def partitions_for_topic(self, topic: str) -> list[TopicPartition]:
        return [TopicPartition(topic, p) for p in sorted(self.assignments.get(topic, {}))]

    def replica_assignment(self, tp: TopicPartition) -> tuple[int, ...]:
        return self.assignments.get(tp.topic, {}).get(tp.partition, ())

    def full_replica_assignment(self, tp: TopicPartition) -> ReplicaAssignment:
        """RS with the adding/removing replicas of an ongoing reassignment, if any."""
        ongoing = self.partitions_being_reassigned.get(tp)
        return ongoing if ongoing is not None else ReplicaAssignment(self.replica_assignment(tp))

    def update_full_replica_assignment(self, tp: TopicPartition,
                                       assignment: ReplicaAssignment) -> None:
        """Adopt ``assignment`` (once ZooKeeper holds it): RS into ``assignments``, the
        partition in or out of ``partitions_being_reassigned``."""
        if tp.topic not in self.assignments:
            return
        self.assignments[tp.topic][tp.partition] = assignment.replicas
        if assignment.is_being_reassigned:
            self.partitions_being_reassigned[tp] = assignment
        else:
            self.partitions_being_reassigned.pop(tp, None)

    def is_topic_being_reassigned(self, topic: str) -> bool:
        return any(tp.topic == topic for tp in self.partitions_being_reassigned)

    def partitions_on_broker(self, broker_id: int) -> list[TopicPartition]:
        return [tp for tp in self.all_partitions() if broker_id in self.replica_assignment(tp)]

    def partition_leaders_on_broker(self, broker_id: int) -> list[TopicPartition]:
        return [tp for tp, s in sorted(self.leadership.items()) if s.leader == broker_id
                and not self.is_topic_queued_for_deletion(tp.topic)]

    def is_new(self, tp: TopicPartition) -> bool:
        return tp not in self.leadership

    def is_offline(self, tp: TopicPartition) -> bool:
        state = self.leadership.get(tp)
        return state is not None and (tp in self.offline_partitions or not self.is_replica_online(
            state.leader, include_shutting_down=True))

    def mark_offline_if_leaderless(self, tps: Iterable[TopicPartition]) -> None:
        """Remember the partitions among ``tps`` whose leader is not live now."""
        for tp in tps:
            state = self.leadership.get(tp)
            if state is not None and not self.is_replica_online(state.leader,
                                                                include_shutting_down=True):
                self.offline_partitions.add(tp)

    def partitions_needing_election(self, topic: str | None = None) -> list[TopicPartition]:
        """New and Offline partitions (of ``topic``, or all), minus topics being deleted."""
        parts = self.partitions_for_topic(topic) if topic is not None else self.all_partitions()
        return [tp for tp in parts if not self.is_topic_queued_for_deletion(tp.topic)
                and (self.is_new(tp) or self.is_offline(tp))]

    def offline_replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        return tuple(r for r in self.replica_assignment(tp) if not self.is_replica_online(r))

    def unclean_election_enabled(self, topic: str, default: bool) -> bool:
        value = self.topic_configs.get(topic, {}).get("unclean.leader.election.enable")
        return default if value is None else value.strip().lower() == "true"
