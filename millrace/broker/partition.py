"""``Partition``: one partition replica hosted by this broker (Kafka's ``Partition``).

It holds the partition's log and its replication state as this broker knows it: the
assigned replicas (AR), the leader and its epoch, the in-sync replicas (ISR) and the
partition epoch (the state znode's version in ZooKeeper mode).

**As leader** every append goes through ``append_records_to_leader`` — producers' batches
and the coordinators' own records alike — and the high watermark moves in exactly one
place, ``maybe_increment_leader_hw``: the smallest log end offset over the ISR (counting a
follower whose addition is in flight: Kafka's *maximal* ISR), never backwards.  The
leader learns followers' log end offsets from their fetches
(``update_follower_fetch_state``); a follower that has caught up to the high watermark
and to the start of the current leader epoch joins the ISR (``maybe_expand_isr``,
KAFKA-7128), one that has not caught up within ``replica.lag.time.max.ms`` leaves it
(``maybe_shrink_isr``).  ISR changes are proposed to an ``AlterIsrManager`` (which writes
them where the cluster keeps them) and take effect when it reports them committed; one
change is in flight at a time.  On one node the ISR is this replica alone, so the high
watermark follows the log end offset after every append.

**As follower** the partition only takes what the leader's fetches return
(``append_records_to_follower``) and keeps its high watermark at
min(leader's high watermark, own log end offset).

``check_enough_replicas_reach_offset`` is what an ``acks=all`` produce waits on
(``DelayedProduce``): done once the high watermark has reached the batch's end, with
NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below ``min.insync.replicas``
meanwhile.

``trace`` is None unless the partition's topic is armed for record tracing here
(``record_tracer.PartitionTrace``): the append, high-watermark and follower hooks cost
one ``is not None`` check otherwise.

Thread ownership: the event-loop thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from millrace.broker.metadata import PartitionState
from millrace.broker.replica import Replica
from millrace.common.errors import Errors, NotEnoughReplicasError, NotLeaderOrFollowerError
from millrace.storage import AppendOrigin, Log, LogAppendInfo
from millrace.storage.producer_state_manager import VerificationGuard

if TYPE_CHECKING:
    from millrace.broker.record_tracer import PartitionTrace


class AlterIsrManager(Protocol):
    """Where a leader's ISR change goes (ZooKeeper in a cluster).  It must eventually call
    ``partition.on_isr_change_completed`` with the committed state or with None."""

    def submit(self, partition: Partition, new_isr: tuple[int, ...]) -> None: ...


class Marker(Protocol):
    def mark(self, n: int = 1) -> None: ...


@dataclass(frozen=True, slots=True)
class IsrChangeMeters:
    """The replica manager's ISR meters, marked by the ISR manager once ZooKeeper has
    answered (Kafka's ``IsrShrinksPerSec``, ``IsrExpandsPerSec`` and
    ``FailedIsrUpdatesPerSec`` of ``kafka.server:type=ReplicaManager``)."""

    shrinks: Marker
    expands: Marker
    failed: Marker

    def committed(self, old_isr: tuple[int, ...], new_isr: tuple[int, ...]) -> None:
        """An ISR change was written: a shrink or an expansion by its size."""
        if len(new_isr) < len(old_isr):
            self.shrinks.mark()
        elif len(new_isr) > len(old_isr):
            self.expands.mark()


class Partition:
    def __init__(self, topic: str, index: int, log: Log, local_broker_id: int,
                 alter_isr_manager: AlterIsrManager | None = None) -> None:
        self.topic = topic
        self.index = index
        self.log = log
        self.local_broker_id = local_broker_id
        self.alter_isr_manager = alter_isr_manager
        self.assigned_replicas: tuple[int, ...] = ()
        self.leader_id = -1
        self.leader_epoch = -1
        self.leader_epoch_start_offset = -1
        self.partition_epoch = 0
        self.controller_epoch = 0  # of the controller that wrote the state we hold
        self.isr: tuple[int, ...] = ()
        self.pending_isr: tuple[int, ...] | None = None  # proposed, not yet committed
        self.pending_isr_reason = ""                     # why it was proposed
        self.remote_replicas: dict[int, Replica] = {}
        # set while the topic is armed for record tracing here (record_tracer.py); the
        # hot paths' only cost otherwise is the `is not None` check
        self.trace: PartitionTrace | None = None

    def __repr__(self) -> str:
        return (f"Partition({self.topic}-{self.index}, leader={self.leader_id}, "
                f"epoch={self.leader_epoch}, isr={list(self.isr)})")

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The ISR the high watermark must respect: the committed one plus any follower
        whose addition is in flight (a shrink counts only once committed)."""
        if self.pending_isr is None:
            return self.isr
        return tuple(dict.fromkeys(self.isr + self.pending_isr))

    # ------------------------------------------------------------------ role changes
    def make_leader(self, state: PartitionState, replicas: list[int], now_ms: int = 0) -> bool:
        """Take leadership as ``state`` says (Kafka's ``makeLeader``).  True if this is
        a new leadership term for this broker.  A new term remembers where its epoch
        starts (the follower ISR-join rule needs it) and resets what it knew of the
        followers; a leader whose ISR is itself alone commits its whole log at once
        (the checkpointed high watermark may be stale after a crash)."""
        new_term = not self.is_leader or state.leader_epoch != self.leader_epoch
        self.assigned_replicas = tuple(replicas)
        self.leader_id = state.leader
        self.isr = state.isr
        self.partition_epoch = state.partition_epoch
        self.controller_epoch = state.controller_epoch
        self.pending_isr = None
        leo = self.log.log_end_offset
        if state.leader_epoch != self.leader_epoch:
            self.leader_epoch = state.leader_epoch
            self.leader_epoch_start_offset = leo
            # KAFKA-7415: the new epoch starts here even before anything is written in it,
            # so a follower asking where its older epoch ends gets the right answer.
            self.log.maybe_assign_epoch_start_offset(state.leader_epoch, leo)
        keep = {r: self.remote_replicas.get(r) for r in replicas if r != self.local_broker_id}
        self.remote_replicas = {}
        for r, replica in keep.items():
            replica = replica or Replica(r)
            if new_term:
                replica.reset(now_ms, leo, r in self.isr)
            self.remote_replicas[r] = replica
        self.maybe_increment_leader_hw()
        return new_term

    def make_follower(self, state: PartitionState, replicas: list[int]) -> bool:
        """Follow ``state.leader``; True if the leader or its epoch changed (the fetcher
        must then truncate and start over against the new leader)."""
        changed = self.leader_id != state.leader or self.leader_epoch != state.leader_epoch
        self.assigned_replicas = tuple(replicas)
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.leader_epoch_start_offset = -1
        self.isr = state.isr
        self.partition_epoch = state.partition_epoch
        self.controller_epoch = state.controller_epoch
        self.pending_isr = None
        self.remote_replicas = {}
        return changed

    def stop(self) -> None:
        """Neither lead nor follow (StopReplica without delete): serve nothing until the
        next LeaderAndIsr."""
        self.leader_id = -1
        self.pending_isr = None
        self.remote_replicas = {}

    # ------------------------------------------------------------------ leader appends
    def append_records_to_leader(self, records: bytearray | memoryview, now_ms: int, *,
                                 origin: AppendOrigin = AppendOrigin.CLIENT,
                                 required_acks: int = 1,
                                 verification_guard: VerificationGuard | None = None,
                                 require_verification: bool = False) -> LogAppendInfo:
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
        info = self.log.append_as_leader(records, self.leader_epoch, now_ms, origin,
                                         verification_guard=verification_guard,
                                         require_verification=require_verification)
        self.maybe_increment_leader_hw()
        return info

    def maybe_increment_leader_hw(self) -> bool:
        """The one place the high watermark moves: up to the smallest log end offset
        over the (maximal) ISR.  True if it moved."""
        if not self.is_leader:
            return False
        log = self.log
        hw = log.log_end_offset
        for r in self.maximal_isr:
            if r == self.local_broker_id:
                continue
            replica = self.remote_replicas.get(r)
            if replica is None or replica.log_end_offset < 0:
                return False  # a member whose position is unknown holds the HW back
            hw = min(hw, replica.log_end_offset)
        # a follower's fetch that moved nothing (most of a fetch of many partitions) stops
        # here; the high watermark changes only on this (the loop's) thread
        if hw > log.high_watermark and log.maybe_increment_high_watermark(hw):
            if self.trace is not None:
                self.trace.high_watermark_advanced(self, hw)
            return True
        return False

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, Errors]:
        """(done, error) for an acks=all produce whose batch ends before ``required_offset``."""
        if not self.is_leader:
            return True, Errors.NOT_LEADER_OR_FOLLOWER
        if self.log.high_watermark >= required_offset:
            if len(self.isr) < self.log.config.min_insync_replicas:
                return True, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            return True, Errors.NONE
        return False, Errors.NONE

    # ------------------------------------------------------------------ followers' fetches
    def update_follower_fetch_state(self, replica_id: int, fetch_offset: int, now_ms: int,
                                    broker_epoch: int = -1) -> bool:
        """A follower fetched from ``fetch_offset``: record its position, maybe add it to
        the ISR, maybe move the high watermark.  True if the high watermark moved.
        Raises NOT_LEADER_OR_FOLLOWER when ``replica_id`` is not an assigned follower."""
        replica = self.remote_replicas.get(replica_id) if self.is_leader else None
        if replica is None:
            raise NotLeaderOrFollowerError(
                f"Broker {replica_id} is not a follower of {self.topic}-{self.index} led "
                f"by {self.local_broker_id}")
        replica.update_fetch_state(fetch_offset, self.log.log_end_offset, now_ms, broker_epoch)
        self.maybe_expand_isr(replica)
        return self.maybe_increment_leader_hw()

    def maybe_expand_isr(self, replica: Replica) -> None:
        """Propose adding ``replica`` once it holds everything up to the high watermark
        and to the start of this leader's epoch (KAFKA-7128)."""
        if (self.alter_isr_manager is None or self.pending_isr is not None
                or replica.broker_id in self.isr):
            return
        if (replica.log_end_offset >= self.log.high_watermark
                and replica.log_end_offset >= self.leader_epoch_start_offset):
            self._propose((*self.isr, replica.broker_id),
                          f"caught up to the high watermark {self.log.high_watermark}")

    def out_of_sync_replicas(self, now_ms: int, lag_time_max_ms: int) -> list[int]:
        leo = self.log.log_end_offset
        return [r for r in self.isr if r != self.local_broker_id
                and (r not in self.remote_replicas
                     or not self.remote_replicas[r].is_caught_up(leo, now_ms, lag_time_max_ms))]

    def maybe_shrink_isr(self, now_ms: int, lag_time_max_ms: int) -> list[int]:
        """Propose dropping the followers that have not caught up within the lag time
        (Kafka's isr-expiration task); the ISR never loses the leader.  Returns the
        followers proposed for removal."""
        if not self.is_leader or self.alter_isr_manager is None or self.pending_isr is not None:
            return []
        out = self.out_of_sync_replicas(now_ms, lag_time_max_ms)
        if out:
            self._propose(tuple(r for r in self.isr if r not in out),
                          f"not caught up to the log end within replica.lag.time.max.ms="
                          f"{lag_time_max_ms}")
        return out

    def _propose(self, new_isr: tuple[int, ...], reason: str) -> None:
        assert self.alter_isr_manager is not None
        self.pending_isr = new_isr
        self.pending_isr_reason = reason
        self.alter_isr_manager.submit(self, new_isr)

    def on_isr_change_completed(self, state: PartitionState | None) -> bool:
        """The ISR manager's answer: the committed state, or None when the change was
        refused (a newer state exists; the next LeaderAndIsr brings it).  True if the
        high watermark moved."""
        self.pending_isr = None
        if state is None or state.leader_epoch != self.leader_epoch or not self.is_leader:
            return False
        self.isr = state.isr
        self.partition_epoch = state.partition_epoch
        return self.maybe_increment_leader_hw()

    # ------------------------------------------------------------------ follower appends
    def append_records_to_follower(self, records: bytes | bytearray | memoryview,
                                   leader_high_watermark: int, now_ms: int) -> LogAppendInfo:
        """Append what the leader's fetch returned (offsets already assigned) and follow
        the leader's high watermark as far as this log reaches."""
        info = self.log.append_as_follower(records, now_ms)
        if self.trace is not None:
            self.trace.follower_appended(self, records)
        self.update_follower_high_watermark(leader_high_watermark)
        return info

    def update_follower_high_watermark(self, leader_high_watermark: int) -> None:
        self.log.update_high_watermark(min(leader_high_watermark, self.log.log_end_offset))
