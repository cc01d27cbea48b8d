"""The requests the controller sends to brokers, and the batch that builds them.

Java counterpart: ``ControllerBrokerRequestBatch`` (``ControllerChannelManager.scala``)
and the request data of LeaderAndIsr (key 4), StopReplica (5) and UpdateMetadata (6).
These are plain values, one per destination broker; the controller service turns each
into the wire message (choosing the version) and sends it on that broker's channel.

A batch collects per-broker partition states while the controller handles one event and
is flushed in Kafka's order: every LeaderAndIsr, then every UpdateMetadata, then every
StopReplica.  Adding a LeaderAndIsr for a partition also adds that partition to the
UpdateMetadata every live (or shutting-down) broker gets, so all brokers learn the new
leader.  Requests go only to registered brokers; each carries the destination's broker
epoch so a bounced broker ignores requests meant for its previous incarnation (KIP-380).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from millrace.broker.controller.controller_context import (
    LEADER_DURING_DELETE,
    ControllerContext,
    LeaderIsrAndControllerEpoch,
)
from millrace.broker.metadata.cluster_metadata import BrokerRegistration
from millrace.common.topic_partition import TopicPartition


@dataclass(frozen=True, slots=True)
class LeaderAndIsrPartitionState:
    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int                   # the state znode's version
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    is_new: bool = False
    leader_recovery_state: int = 0


@dataclass(frozen=True)
class LeaderAndIsr:
    broker_id: int                         # destination
    broker_epoch: int
    controller_id: int
    controller_epoch: int
    partition_states: tuple[LeaderAndIsrPartitionState, ...]
    topic_ids: dict[str, uuid.UUID]
    live_leaders: tuple[BrokerRegistration, ...]


@dataclass(frozen=True, slots=True)
class UpdateMetadataPartitionState:
    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()


@dataclass(frozen=True)
class UpdateMetadata:
    broker_id: int                         # destination
    broker_epoch: int
    controller_id: int
    controller_epoch: int
    partition_states: tuple[UpdateMetadataPartitionState, ...]
    live_brokers: tuple[BrokerRegistration, ...]
    topic_ids: dict[str, uuid.UUID]


@dataclass(frozen=True, slots=True)
class StopReplicaPartitionState:
    topic: str
    partition: int
    leader_epoch: int                      # -2 (LEADER_DURING_DELETE) while deleting
    delete_partition: bool


@dataclass(frozen=True)
class StopReplica:
    broker_id: int                         # destination
    broker_epoch: int
    controller_id: int
    controller_epoch: int
    partition_states: tuple[StopReplicaPartitionState, ...]


ControllerRequest = LeaderAndIsr | UpdateMetadata | StopReplica


@dataclass
class ControllerBrokerRequestBatch:
    """Requests collected while one event is handled.  Owned by the controller."""

    controller_id: int
    context: ControllerContext
    leader_and_isr: dict[int, dict[TopicPartition, LeaderAndIsrPartitionState]] = field(
        default_factory=dict)
    update_metadata_brokers: set[int] = field(default_factory=set)
    update_metadata_partitions: dict[TopicPartition, UpdateMetadataPartitionState] = field(
        default_factory=dict)
    stop_replica: dict[int, dict[TopicPartition, StopReplicaPartitionState]] = field(
        default_factory=dict)

    def add_leader_and_isr(self, broker_ids: tuple[int, ...] | list[int] | set[int],
                           tp: TopicPartition, state: LeaderIsrAndControllerEpoch,
                           is_new: bool = False) -> None:
        full = self.context.full_replica_assignment(tp)
        for b in sorted(set(broker_ids)):
            if b < 0:
                continue
            per_broker = self.leader_and_isr.setdefault(b, {})
            already_new = per_broker[tp].is_new if tp in per_broker else False
            per_broker[tp] = LeaderAndIsrPartitionState(
                tp.topic, tp.partition, state.controller_epoch, state.leader,
                state.leader_epoch, state.isr, state.zk_version, full.replicas,
                full.adding_replicas, full.removing_replicas,
                is_new=is_new or already_new,
                leader_recovery_state=state.leader_recovery_state.value)
        self.add_update_metadata(self.context.live_or_shutting_down_broker_ids, [tp])

    def add_update_metadata(self, broker_ids: set[int] | list[int],
                            partitions: list[TopicPartition] | tuple[TopicPartition, ...] = ()
                            ) -> None:
        self.update_metadata_brokers |= {b for b in broker_ids if b >= 0}
        for tp in partitions:
            state = self.context.leadership.get(tp)
            if state is None:
                continue                   # no leader yet: nothing to tell
            leader = state.leader
            if self.context.is_topic_queued_for_deletion(tp.topic):
                leader = LEADER_DURING_DELETE
            self.update_metadata_partitions[tp] = UpdateMetadataPartitionState(
                tp.topic, tp.partition, state.controller_epoch, leader, state.leader_epoch,
                state.isr,
                state.zk_version, self.context.replica_assignment(tp),
                self.context.offline_replicas(tp))

    def add_stop_replica(self, broker_ids: list[int] | tuple[int, ...], tp: TopicPartition,
                         delete_partition: bool) -> None:
        state = self.context.leadership.get(tp)
        epoch = state.leader_epoch if state is not None else -1
        if self.context.is_topic_queued_for_deletion(tp.topic):
            epoch = LEADER_DURING_DELETE
        for b in broker_ids:
            per_broker = self.stop_replica.setdefault(b, {})
            already = per_broker[tp].delete_partition if tp in per_broker else False
            per_broker[tp] = StopReplicaPartitionState(tp.topic, tp.partition, epoch,
                                                       already or delete_partition)

    def flush(self, controller_epoch: int) -> list[ControllerRequest]:
        """The collected requests in Kafka's order; the batch is empty afterwards.
        Brokers that are no longer registered are skipped."""
        ctx = self.context
        out: list[ControllerRequest] = []
        live = ctx.live_brokers
        for b in sorted(self.leader_and_isr):
            if b not in live:
                continue
            states = self.leader_and_isr[b]
            leader_ids = {s.leader for s in states.values()}
            out.append(LeaderAndIsr(
                b, live[b].epoch, self.controller_id, controller_epoch,
                tuple(states[tp] for tp in sorted(states)),
                {tp.topic: ctx.topic_ids.get(tp.topic, uuid.UUID(int=0)) for tp in states},
                tuple(live[i] for i in sorted(leader_ids) if i in live)))
        if self.update_metadata_brokers:
            parts = tuple(self.update_metadata_partitions[tp]
                          for tp in sorted(self.update_metadata_partitions))
            brokers = tuple(live[i] for i in sorted(live))
            topic_ids = {p.topic: ctx.topic_ids[p.topic] for p in parts
                         if p.topic in ctx.topic_ids}
            for b in sorted(self.update_metadata_brokers & set(live)):
                out.append(UpdateMetadata(b, live[b].epoch, self.controller_id,
                                          controller_epoch, parts, brokers, topic_ids))
        for b in sorted(self.stop_replica):
            if b not in live:
                continue
            states2 = self.stop_replica[b]
            out.append(StopReplica(b, live[b].epoch, self.controller_id, controller_epoch,
                                   tuple(states2[tp] for tp in sorted(states2))))
        self.leader_and_isr.clear()
        self.update_metadata_brokers.clear()
        self.update_metadata_partitions.clear()
        self.stop_replica.clear()
        return out
