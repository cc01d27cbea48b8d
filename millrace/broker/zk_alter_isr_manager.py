"""``ZkAlterIsrManager``: a leader's ISR changes, written to ZooKeeper (Kafka's
``ZkAlterPartitionManager``, the path brokers take before AlterPartition).

The leader rewrites the partition's ``state`` znode on the condition that its version is
still the partition epoch the leader holds; the leader epoch and controller epoch stay
as they are (a leader-driven ISR change bumps only the znode version).  On success the
partition adopts the new ISR and partition epoch, and an ``isr_change_<n>`` notification
tells the controller to push the change to every broker with UpdateMetadata.  On a
version conflict the znode is read again: identical content means our write had landed
(a retry after a lost answer) and counts as success; anything else means the controller
moved the partition on, and the change is dropped (the controller's next LeaderAndIsr
brings the truth).  The replica manager's ISR meters (``IsrChangeMeters``) count each
written change as a shrink or an expansion, and each refused or failed write as a failed
ISR update (Kafka's ``FailedIsrUpdatesPerSec``).

The ZooKeeper round trip runs in a worker thread so the broker's loop never waits on
it; the result comes back to the loop, which is the only thread touching partitions.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from millrace.broker.metadata import PartitionState
from millrace.broker.partition import IsrChangeMeters, Partition
from millrace.broker.partition_state_log import PartitionStateLog
from millrace.broker.zk import KafkaZkClient
from millrace.broker.zk.errors import ZkBadVersionError, ZkError
from millrace.broker.zk.zk_data import LeaderIsrAndControllerEpoch
from millrace.common.topic_partition import TopicPartition

log = logging.getLogger(__name__)


class ZkAlterIsrManager:
    def __init__(self, zk: KafkaZkClient, loop: asyncio.AbstractEventLoop,
                 on_committed: Callable[[tuple[str, int]], None],
                 meters: IsrChangeMeters | None = None,
                 state_log: PartitionStateLog | None = None) -> None:
        self._zk = zk
        self._loop = loop
        self._on_committed = on_committed  # the replica manager wakes parked requests
        self._meters = meters
        self._state_log = state_log

    def submit(self, partition: Partition, new_isr: tuple[int, ...]) -> None:
        tp = TopicPartition(partition.topic, partition.index)
        wanted = LeaderIsrAndControllerEpoch(
            leader=partition.leader_id, leader_epoch=partition.leader_epoch, isr=new_isr,
            controller_epoch=partition.controller_epoch,
            partition_epoch=partition.partition_epoch)
        log.info("%s-%d: proposing ISR %s (was %s)", tp[0], tp[1], list(new_isr),
                 list(partition.isr))
        old_isr, why = partition.isr, partition.pending_isr_reason
        future = self._loop.run_in_executor(None, self._write, tp, wanted)
        future.add_done_callback(lambda f: self._done(partition, tp, f, old_isr, why))

    def _write(self, tp: TopicPartition, wanted: LeaderIsrAndControllerEpoch
               ) -> PartitionState | None:
        try:
            version = self._zk.conditional_update_partition_state(tp, wanted)
        except ZkBadVersionError:
            current = self._zk.get_topic_partition_state(tp)
            if current is None or (current.leader, current.leader_epoch, current.isr) != (
                    wanted.leader, wanted.leader_epoch, wanted.isr):
                return None
            version = current.partition_epoch
        self._zk.propagate_isr_changes([tp])
        return PartitionState(wanted.leader, wanted.leader_epoch, wanted.isr,
                              wanted.controller_epoch, version)

    def _done(self, partition: Partition, tp: TopicPartition,
              future: asyncio.Future[PartitionState | None],
              old_isr: tuple[int, ...], why: str = "") -> None:
        try:
            state = future.result()
        except ZkError as e:
            log.warning("%s-%d: ISR change failed: %s", tp[0], tp[1], e)
            state = None
        except Exception:
            log.exception("%s-%d: ISR change failed", tp[0], tp[1])
            state = None
        if state is None:
            log.info("%s-%d: ISR change not applied (the partition state moved on)", *tp)
        if self._meters is not None:
            if state is None:
                self._meters.failed.mark()
            else:
                self._meters.committed(old_isr, state.isr)
        if self._state_log is not None and state is not None:
            self._state_log.isr_changed(tp[0], tp[1], state.leader, old_isr, state.isr,
                                        why or "proposed by the leader")
        if partition.on_isr_change_completed(state) or state is not None:
            self._on_committed(tp)
