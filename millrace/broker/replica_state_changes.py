"""``ReplicaStateChanges``: what the controller's LeaderAndIsr and StopReplica do to the
replicas this broker hosts.

Java counterpart: ``ReplicaManager.becomeLeaderOrFollower`` (with ``makeLeaders`` /
``makeFollowers``) and ``ReplicaManager.stopReplicas``, which Kafka keeps inside
``ReplicaManager``; here they are a collaborator of ``ReplicaManager`` (which keeps its
``become_leader_or_follower`` and ``stop_replicas``, delegating) over the same state:
its partitions, its controller epoch, its fetcher manager and its leadership listeners.

Theory.  The controller decides; a broker applies.  A request from an older controller
epoch than the last one seen is refused whole (STALE_CONTROLLER_EPOCH, KAFKA-6082); a
newer one becomes the epoch seen.  Per partition of a LeaderAndIsr:

- not assigned here: UNKNOWN_TOPIC_OR_PARTITION;
- not hosted yet: its log is opened (or created) with the topic's configs and a
  ``Partition`` made for it; hosted, and the leader epoch is not newer than the one held:
  ignored (STALE_CONTROLLER_EPOCH, as Kafka answers);
- leader here: ``Partition.make_leader`` (it records the epoch's start offset before
  anything is written, KAFKA-7415) and no fetching;
- follower: only once its leader is a live broker (Kafka's rule: recording the epoch
  without a leader to fetch from would make the controller's retry look stale);
  ``Partition.make_follower``, and if that changed anything the fetcher (re)starts from
  the log end, truncating first by OffsetForLeaderEpoch;
- an offline log dir: KAFKA_STORAGE_ERROR, so the controller learns this replica cannot
  serve.

Then the fetchers stop for the new leaders (and for followers that need no restart),
start for the rest, every changed partition wakes the purgatories
(``ReplicaManager.partition_changed``), and the leadership listeners hear (leaders,
followers) -- the group and transaction coordinators load and unload their partitions.
StopReplica stops fetching for each partition (an older leader epoch than held:
FENCED_LEADER_EPOCH; -2: the topic is being deleted) and, with delete, drops it and its
log.

Owned by the event-loop thread, like ``ReplicaManager``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from millrace.broker.delayed_produce import TopicPartition
from millrace.broker.metadata import PartitionState
from millrace.broker.partition import Partition
from millrace.broker.replica_fetcher import BrokerEndpoint, PartitionFetchState
from millrace.common.errors import Errors, KafkaStorageError

if TYPE_CHECKING:
    from millrace.broker.partition_state_log import PartitionStateLog
    from millrace.broker.replica_manager import ReplicaManager

# Kafka's state-change log: the same logger as before this code left replica_manager.py
log = logging.getLogger("millrace.broker.replica_manager")


@dataclass(frozen=True, slots=True)
class LeaderAndIsrPartition:
    """One partition of a LeaderAndIsr request: its state and assigned replicas."""

    topic: str
    partition: int
    state: PartitionState
    replicas: tuple[int, ...]
    is_new: bool = False


class ReplicaStateChanges:
    """The controller's partition states applied to a ``ReplicaManager``'s replicas."""

    def __init__(self, replica_manager: ReplicaManager) -> None:
        self.rm = replica_manager

    def become_leader_or_follower(self, controller_epoch: int,
                                  partitions: Sequence[LeaderAndIsrPartition],
                                  live_brokers: Mapping[int, BrokerEndpoint],
                                  topic_configs: Mapping[str, dict[str, str]] | None = None
                                  ) -> dict[TopicPartition, int]:
        """Kafka's ``becomeLeaderOrFollower``: apply the controller's partition states.

        A request from an older controller epoch is refused whole
        (STALE_CONTROLLER_EPOCH).  A partition state whose leader epoch is not newer than
        the one held is ignored (STALE_CONTROLLER_EPOCH, as Kafka answers); a partition not
        assigned here is UNKNOWN_TOPIC_OR_PARTITION.  Leaders stop fetching and take over;
        followers start fetching from their leader, truncating first.
        """
        rm = self.rm
        if controller_epoch < rm.controller_epoch:
            return {(p.topic, p.partition): Errors.STALE_CONTROLLER_EPOCH for p in partitions}
        rm.controller_epoch = controller_epoch
        now = rm.time.milliseconds()
        errors: dict[TopicPartition, int] = {}
        leaders: list[Partition] = []
        followers: list[Partition] = []
        fetch: dict[TopicPartition, tuple[BrokerEndpoint, PartitionFetchState]] = {}
        for lp in partitions:
            tp = (lp.topic, lp.partition)
            if rm.local_broker_id not in lp.replicas:
                errors[tp] = Errors.UNKNOWN_TOPIC_OR_PARTITION
                continue
            try:
                fetch_state = self._become_leader_or_follower(lp, live_brokers, topic_configs,
                                                              now, errors, leaders, followers)
            except KafkaStorageError as e:
                # the log dir is offline (its failure is the broker's to handle): the
                # controller learns this replica cannot serve (Kafka answers the same)
                log.error("cannot take %s-%d as %s: %s", lp.topic, lp.partition,
                          "leader" if lp.state.leader == rm.local_broker_id else "follower",
                          e)
                errors[tp] = Errors.KAFKA_STORAGE_ERROR
                continue
            if fetch_state is not None:
                fetch[tp] = fetch_state
        # Kafka's state-change log, in one line per request
        log.info("LeaderAndIsr (controller epoch %d): leading %s; following %s; fetching %s "
                 "(leaders known: %s)", controller_epoch,
                 [f"{p.topic}-{p.index}@{p.leader_epoch}" for p in leaders] or "-",
                 [f"{p.topic}-{p.index}@{p.leader_epoch}->{p.leader_id}"
                  for p in followers] or "-",
                 sorted(f"{t}-{i}" for t, i in fetch) or "-", sorted(live_brokers))
        if rm.fetcher_manager is not None:
            rm.fetcher_manager.remove_fetcher_for_partitions(
                [(p.topic, p.index) for p in leaders]
                + [(p.topic, p.index) for p in followers if (p.topic, p.index) not in fetch])
            if fetch:
                rm.fetcher_manager.add_fetcher_for_partitions(fetch)
        for p in leaders + followers:
            rm.partition_changed((p.topic, p.index))
        for listener in rm.leadership_listeners:
            listener(leaders, followers)
        return errors

    def _become_leader_or_follower(
            self, lp: LeaderAndIsrPartition, live_brokers: Mapping[int, BrokerEndpoint],
            topic_configs: Mapping[str, dict[str, str]] | None, now: int,
            errors: dict[TopicPartition, int], leaders: list[Partition],
            followers: list[Partition]) -> tuple[BrokerEndpoint, PartitionFetchState] | None:
        """One partition of a LeaderAndIsr: its error goes to ``errors``, the partition to
        ``leaders`` or ``followers``; returns where to fetch from if it must (re)start."""
        rm = self.rm
        tp = (lp.topic, lp.partition)
        partition = rm.partitions.get(tp)
        if partition is None:
            overrides = (topic_configs or {}).get(lp.topic)
            if overrides is None:
                info = rm.metadata.topics.get(lp.topic)
                overrides = info.configs if info is not None else {}
            lg = rm.log_manager.get_or_create_log(
                lp.topic, lp.partition, rm.topic_configs.log_config(overrides))
            partition = rm.partitions[tp] = Partition(
                lp.topic, lp.partition, lg, rm.local_broker_id, rm.alter_isr_manager)
        elif lp.state.leader_epoch <= partition.leader_epoch:
            errors[tp] = Errors.STALE_CONTROLLER_EPOCH
            return None
        if lp.state.leader == rm.local_broker_id:
            was_leader, old_epoch, old_isr = (partition.is_leader, partition.leader_epoch,
                                              partition.isr)
            partition.make_leader(lp.state, list(lp.replicas), now)
            _record_leadership(rm.state_log, partition, was_leader, old_epoch, old_isr,
                               lp.state.controller_epoch)
            errors[tp] = Errors.NONE
            leaders.append(partition)
            return None
        leader = live_brokers.get(lp.state.leader)
        if leader is None and not partition.is_leader:
            # Kafka's rule: a follower changes state only when its new leader is among the
            # live brokers.  Recording the epoch without a leader to fetch from would make
            # the controller's next request with that epoch look stale, and the replica
            # would never fetch; left as it is, that request applies.
            log.warning("%s-%d: leader %d (epoch %d) is not a live broker here yet; "
                        "waiting for the controller's next LeaderAndIsr", lp.topic,
                        lp.partition, lp.state.leader, lp.state.leader_epoch)
            errors[tp] = Errors.NONE
            return None
        changed = partition.make_follower(lp.state, list(lp.replicas))
        errors[tp] = Errors.NONE
        followers.append(partition)
        if changed and leader is not None and not partition.log.offline:
            return leader, PartitionFetchState(partition.log.log_end_offset,
                                               lp.state.leader_epoch)
        return None

    def stop_replicas(self, controller_epoch: int,
                      partitions: Sequence[tuple[TopicPartition, int, bool]]
                      ) -> dict[TopicPartition, int]:
        """Kafka's ``stopReplicas``: stop fetching for each (partition, leader epoch,
        delete) and, with delete, remove it and its log.  A leader epoch of -2 means the
        topic is being deleted; an older epoch than held is refused
        (FENCED_LEADER_EPOCH)."""
        rm = self.rm
        if controller_epoch < rm.controller_epoch:
            return {tp: Errors.STALE_CONTROLLER_EPOCH for tp, _, _ in partitions}
        rm.controller_epoch = controller_epoch
        errors: dict[TopicPartition, int] = {}
        stopped: list[TopicPartition] = []
        for tp, leader_epoch, delete in partitions:
            partition = rm.partitions.get(tp)
            if partition is not None and 0 <= leader_epoch < partition.leader_epoch:
                errors[tp] = Errors.FENCED_LEADER_EPOCH
                continue
            errors[tp] = Errors.NONE
            stopped.append(tp)
            if delete and partition is not None:
                del rm.partitions[tp]
                rm.log_manager.delete_log(*tp)
            elif partition is not None:
                partition.stop()
        if rm.fetcher_manager is not None:
            rm.fetcher_manager.remove_fetcher_for_partitions(stopped)
        for tp in stopped:
            rm.partition_changed(tp)
        return errors


def _record_leadership(state_log: PartitionStateLog, partition: Partition, was_leader: bool,
                       old_epoch: int, old_isr: tuple[int, ...], controller_epoch: int) -> None:
    """A new leadership term, or the controller's ISR change within this one."""
    topic, index = partition.topic, partition.index
    if not was_leader or partition.leader_epoch != old_epoch:
        state_log.record(topic, index, "leader", partition.leader_id, partition.isr,
                         f"broker {partition.leader_id} leads at leader epoch "
                         f"{partition.leader_epoch} (controller epoch {controller_epoch}), "
                         f"replicas {list(partition.assigned_replicas)}")
    if was_leader and partition.isr != old_isr:
        state_log.isr_changed(topic, index, partition.leader_id, old_isr, partition.isr,
                              f"set by the controller at leader epoch {partition.leader_epoch}")
