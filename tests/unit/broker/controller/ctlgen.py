"""Helpers for the controller tests: brokers, topics, and ``ZkStore`` -- a dict that applies
the controller's writes with ZooKeeper's version rules (conditional setData, create that
fails on an existing node, the controller-epoch check), so a test can step the controller
through a whole event.  It stands in for ZooKeeper only in these unit tests."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from millrace.broker.controller.broker_requests import (
    ControllerRequest,
    LeaderAndIsr,
    StopReplica,
    UpdateMetadata,
)
from millrace.broker.controller.controller_context import (
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
)
from millrace.broker.controller.controller_result import ControllerResult, FailoverState
from millrace.broker.controller.kafka_controller import KafkaController
from millrace.broker.controller.zk_writes import (
    CreatePartitionState,
    UpdatePartitionState,
    ZkWrite,
    ZkWriteError,
    ZkWriteResult,
)
from millrace.broker.metadata.cluster_metadata import BrokerRegistration, TopicInfo
from millrace.common.topic_partition import TopicPartition

T0 = 1_700_000_000_000


def broker(node_id: int, epoch: int | None = None, rack: str | None = None) -> BrokerRegistration:
    return BrokerRegistration(node_id, f"b{node_id}", 9090 + node_id, rack,
                              epoch if epoch is not None else 100 + node_id)


def topic(name: str, assignment: dict[int, list[int]], **configs: str) -> TopicInfo:
    return TopicInfo(name, uuid.uuid5(uuid.NAMESPACE_DNS, name), assignment,
                     {k.replace("_", "."): v for k, v in configs.items()})


def state(leader: int, isr: list[int], leader_epoch: int = 0, controller_epoch: int = 1,
          zk_version: int = 0) -> LeaderIsrAndControllerEpoch:
    return LeaderIsrAndControllerEpoch(leader, leader_epoch, tuple(isr), controller_epoch,
                                       zk_version)


@dataclass
class ZkStore:
    """Partition state znodes with versions, and the controller epoch znode's version."""

    states: dict[TopicPartition, LeaderIsrAndControllerEpoch] = field(default_factory=dict)
    epoch_zk_version: int = 0
    other_writes: list[ZkWrite] = field(default_factory=list)

    def execute_for(self, controller: KafkaController) -> Callable[[ZkWrite], ZkWriteResult]:
        def execute(w: ZkWrite) -> ZkWriteResult:
            if controller.context.epoch_zk_version != self.epoch_zk_version:
                return ZkWriteResult.failed(w, ZkWriteError.CONTROLLER_MOVED)
            if isinstance(w, CreatePartitionState):
                if w.tp in self.states:
                    return ZkWriteResult(w, ZkWriteError.NODE_EXISTS, stored=self.states[w.tp])
                self.states[w.tp] = replace(w.state, zk_version=0)
                return ZkWriteResult.ok(w, 0)
            if isinstance(w, UpdatePartitionState):
                cur = self.states.get(w.tp)
                if cur is None:
                    return ZkWriteResult.failed(w, ZkWriteError.NO_NODE)
                if cur.zk_version != w.expected_zk_version:
                    return ZkWriteResult.bad_version(w, cur)
                self.states[w.tp] = replace(w.new_state, zk_version=cur.zk_version + 1)
                return ZkWriteResult.ok(w, cur.zk_version + 1)
            self.other_writes.append(w)
            return ZkWriteResult.ok(w)
        return execute


@dataclass
class Cluster:
    """A controller, its ZkStore, and the brokers/topics it was started with."""

    controller: KafkaController
    zk: ZkStore
    brokers: list[BrokerRegistration]
    topics: list[TopicInfo]

    def run(self, result: ControllerResult) -> ControllerResult:
        return self.controller.run(result, self.zk.execute_for(self.controller))

    def failover(self, epoch: int = 1, now_ms: int = T0,
                 reassignments: dict[TopicPartition, ReplicaAssignment] | None = None
                 ) -> ControllerResult:
        self.zk.epoch_zk_version = epoch
        return self.run(self.controller.on_controller_failover(FailoverState(
            epoch, epoch, self.brokers, self.topics, dict(self.zk.states),
            reassignments=reassignments or {}), now_ms))

    def change_brokers(self, brokers: list[BrokerRegistration]) -> ControllerResult:
        self.brokers = brokers
        return self.run(self.controller.on_broker_change(brokers, T0))

    def leadership(self, tp: TopicPartition) -> LeaderIsrAndControllerEpoch:
        stored = self.zk.states[tp]
        assert self.controller.context.leadership[tp] == stored  # cache agrees with ZK
        return stored


def summary(requests: list[ControllerRequest]) -> list[tuple[str, int, tuple[str, ...]]]:
    """Each request as (kind, destination, partitions it carries as 't-p:leader/epoch')."""
    out: list[tuple[str, int, tuple[str, ...]]] = []
    for r in requests:
        if isinstance(r, LeaderAndIsr):
            out.append(("LeaderAndIsr", r.broker_id, tuple(
                f"{s.topic}-{s.partition}:{s.leader}/{s.leader_epoch}" for s in r.partition_states)))
        elif isinstance(r, UpdateMetadata):
            out.append(("UpdateMetadata", r.broker_id, tuple(
                f"{s.topic}-{s.partition}:{s.leader}/{s.leader_epoch}" for s in r.partition_states)))
        elif isinstance(r, StopReplica):
            out.append(("StopReplica", r.broker_id, tuple(
                f"{s.topic}-{s.partition}:{'delete' if s.delete_partition else 'stop'}"
                for s in r.partition_states)))
    return out
