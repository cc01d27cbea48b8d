"""``Partition``: one partition replica hosted by this broker (Kafka's ``Partition``).

It holds the partition's log and its replication state as this broker knows it: the
assigned replicas (AR), the leader and its epoch, and the in-sync replicas (ISR).  Every
leader append goes through ``append_records_to_leader`` — producers' batches and the
coordinators' own records alike — and the high watermark moves in exactly one place,
``maybe_increment_leader_hw``: the smallest log end offset over the ISR, never backwards.
On one node the ISR is this replica alone, so the high watermark follows the log end
offset after every append; with followers, their fetch positions join that minimum.

``check_enough_replicas_reach_offset`` is what an ``acks=all`` produce waits on
(``DelayedProduce``): done once the high watermark has reached the batch's end, with
NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below ``min.insync.replicas``
meanwhile.

Thread ownership: the event-loop thread.
"""

from __future__ import annotations

from millrace.broker.metadata import PartitionState
from millrace.common.errors import Errors, NotEnoughReplicasError, NotLeaderOrFollowerError
from millrace.storage import AppendOrigin, Log, LogAppendInfo


class Partition:
    def __init__(self, topic: str, index: int, log: Log, local_broker_id: int) -> None:
        self.topic = topic
        self.index = index
        self.log = log
        self.local_broker_id = local_broker_id
        self.assigned_replicas: tuple[int, ...] = ()
        self.leader_id = -1
        self.leader_epoch = -1
        self.isr: tuple[int, ...] = ()

    def __repr__(self) -> str:
        return (f"Partition({self.topic}-{self.index}, leader={self.leader_id}, "
                f"epoch={self.leader_epoch}, isr={list(self.isr)})")

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    def make_leader(self, state: PartitionState, replicas: list[int]) -> None:
        """Take leadership as ``state`` says (Kafka's ``makeLeader``).  A new leader
        whose ISR is itself alone commits its whole log at once: the checkpointed high
        watermark may be stale after a crash."""
        self.assigned_replicas = tuple(replicas)
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.isr = state.isr
        self.maybe_increment_leader_hw()

    def append_records_to_leader(self, records: bytearray, now_ms: int, *,
                                 origin: AppendOrigin = AppendOrigin.CLIENT,
                                 required_acks: int = 1) -> LogAppendInfo:
        """Append as leader and move the high watermark; refuses with
        NOT_LEADER_OR_FOLLOWER off the leader and NOT_ENOUGH_REPLICAS when
        ``required_acks == -1`` and the ISR is smaller than ``min.insync.replicas``."""
        if not self.is_leader:
            raise NotLeaderOrFollowerError(
                f"Leader not local for partition {self.topic}-{self.index} on broker "
                f"{self.local_broker_id}")
        min_isr = self.log.config.min_insync_replicas
        if required_acks == -1 and len(self.isr) < min_isr:
            raise NotEnoughReplicasError(
                f"The size of the current ISR {list(self.isr)} is insufficient to satisfy "
                f"the min.isr requirement of {min_isr} for partition "
                f"{self.topic}-{self.index}")
        info = self.log.append_as_leader(records, self.leader_epoch, now_ms, origin)
        self.maybe_increment_leader_hw()
        return info

    def maybe_increment_leader_hw(self) -> bool:
        """The one place the high watermark moves: up to the smallest log end offset
        over the ISR (on one node, this replica's own).  True if it moved."""
        if not self.is_leader:
            return False
        return self.log.maybe_increment_high_watermark(self.log.log_end_offset)

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, Errors]:
        """(done, error) for an acks=all produce whose batch ends before ``required_offset``."""
        if not self.is_leader:
            return True, Errors.NOT_LEADER_OR_FOLLOWER
        if self.log.high_watermark >= required_offset:
            if len(self.isr) < self.log.config.min_insync_replicas:
                return True, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            return True, Errors.NONE
        return False, Errors.NONE
