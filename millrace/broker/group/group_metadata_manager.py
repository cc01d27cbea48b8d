"""The groups of the hosted ``__consumer_offsets`` partitions and their persisted form.

Java counterpart: ``GroupMetadataManager`` (Kafka's classic coordinator: ``partitionFor``,
loading, storing groups and offsets) together with the record replay of the rewritten
coordinator's shards.  ``GroupCoordinator`` (the request logic) extends this class.

Theory of operation -- every operation is a pure step:

* a request handler ``x(body, version, ..., now_ms)`` returns a ``CoordinatorResult``:
  the records to persist, and either the response (valid once the records are durable)
  or a waiter token whose response comes later;
* the owner appends the records to ``__consumer_offsets-<partition>`` and then feeds each
  one to ``replay(key, value)``; persisted facts (committed offsets, the outcome of a
  rebalance, the existence of a group) change only there -- the same path ``load`` uses
  to rebuild everything at start-up from the partition's records;
* responses that were waiting (parked JoinGroup/SyncGroup) come out of
  ``take_completions()`` once an operation, a replay or ``poll(now_ms)`` completed them.

Transactional offsets (KIP-98/KIP-447): a TxnOffsetCommit step's records form one
transactional batch of the producer (``CoordinatorResult.producer``).  Replaying a record
of such a batch (``replay(..., producer_id=)``) holds the offset *pending* for that
producer in its group; the producer's transaction marker on the partition --
``replay_end_txn_marker``, live from the replica manager's marker listener or met in the
log while loading -- moves the pending offsets into the committed ones (COMMIT; a
partition whose committed offset was written later in the log keeps it) or drops them
(ABORT).  A transaction still open when the log ends stays pending, so a new coordinator
after a failover completes it when the marker arrives.

Time enters only as ``now_ms`` arguments, so tests drive the whole machine step by step.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from millrace.broker.group.group_metadata import GroupMetadata, GroupState
from millrace.broker.group.member import MemberMetadata
from millrace.broker.group.records import (
    GroupKey,
    GroupValue,
    LoggedBatch,
    OffsetAndMetadata,
    OffsetKey,
    UnknownRecordVersion,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
)
from millrace.broker.group.responses import join_error, sync_error
from millrace.common.errors import Errors, ProtocolDecodeError

if TYPE_CHECKING:
    from millrace.broker.config import KafkaConfig

log = logging.getLogger("millrace.broker.group")

INT_MAX = (1 << 31) - 1


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: 31*h + c over UTF-16 code units, int32 wrap-around."""
    data = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """The ``__consumer_offsets`` partition (= coordinator) of a group, as Kafka computes it:
    ``Utils.abs(hashCode) % n`` where ``Utils.abs(Integer.MIN_VALUE)`` is 0."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """The broker settings the coordinator reads (Kafka's ``GroupCoordinatorConfig``)."""

    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = INT_MAX
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096
    # KIP-394: a new member whose JoinGroup never completed is dropped after this.
    new_member_join_timeout_ms: int = 300_000

    @classmethod
    def from_kafka_config(cls, config: KafkaConfig) -> GroupConfig:
        return cls(
            min_session_timeout_ms=config["group.min.session.timeout.ms"],
            max_session_timeout_ms=config["group.max.session.timeout.ms"],
            initial_rebalance_delay_ms=config["group.initial.rebalance.delay.ms"],
            max_size=config["group.max.size"],
            offsets_retention_ms=config["offsets.retention.minutes"] * 60_000,
        )


class OffsetsRecord(NamedTuple):
    """One record for ``__consumer_offsets-<partition>`` (value None = tombstone)."""

    partition: int
    key: bytes
    value: bytes | None


@dataclass(slots=True)
class CoordinatorResult:
    """What one step produced.

    ``records``: to append (grouped by partition, in order) and then replay.
    ``response``: the answer, to send once the records are durable; or None and
    ``waiter``: the token the answer will be delivered under via ``take_completions``.
    ``on_failure``: if the records could not be written, call it with an error code;
    it undoes what the step began and returns the answer to send instead (None when the
    answer goes to the waiter).
    ``producer``: (producer id, epoch) when the records are one transactional batch of
    that producer (TxnOffsetCommit); None for the coordinator's own writes."""

    records: list[OffsetsRecord] = field(default_factory=list)
    response: Any = None
    waiter: int | None = None
    on_failure: Callable[[int], Any] | None = None
    producer: tuple[int, int] | None = None


class GroupMetadataManager:
    """Hosted partitions, their groups and offsets, records and replay, parked answers."""

    def __init__(self, config: GroupConfig, num_partitions: int) -> None:
        self.config = config
        self.num_partitions = num_partitions
        self.groups: dict[str, GroupMetadata] = {}
        self.hosted: set[int] = set()
        self.loading: set[int] = set()
        self._next_token = 0
        self._completions: dict[int, Any] = {}
        self._clock_ms = 0     # latest now_ms seen; timestamps state changes on replay
        self._next_offsets_expiry_ms: int | None = None
        # producer id -> groups that may hold its pending offsets (pruned by its markers)
        self._txn_groups: dict[int, set[str]] = {}

    # ------------------------------------------------------------------ placement
    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def coordinator_error(self, group_id: str) -> int:
        """NONE if this coordinator serves ``group_id`` now, else why not."""
        partition = self.partition_for(group_id)
        if partition in self.loading:
            return Errors.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self.hosted:
            return Errors.NOT_COORDINATOR
        return Errors.NONE

    def group(self, group_id: str) -> GroupMetadata | None:
        return self.groups.get(group_id)

    def _tick(self, now_ms: int) -> None:
        self._clock_ms = max(self._clock_ms, now_ms)

    # ------------------------------------------------------------------ loading
    def begin_loading(self, partitions: Iterable[int]) -> None:
        """Mark partitions as loading: their groups answer COORDINATOR_LOAD_IN_PROGRESS."""
        self.loading.update(partitions)

    def load(self, partition: int, records: Iterable[tuple[bytes | None, bytes | None]],
             now_ms: int) -> int:
        """Rebuild the groups of ``partition`` from plain records (in offset order, no
        transactions); see ``load_batches``."""
        return self.load_batches(partition, [LoggedBatch(-1, -1, None, list(records))],
                                 now_ms)

    def load_batches(self, partition: int, batches: Iterable[LoggedBatch],
                     now_ms: int) -> int:
        """Rebuild the groups of ``partition`` from its batches (in offset order): the
        same replay as live appends, markers included; it is hosted afterwards.  Returns
        the number of records replayed."""
        self._tick(now_ms)
        self.loading.add(partition)
        count = 0
        for batch in batches:
            if batch.marker is not None:
                self.replay_end_txn_marker(partition, batch.producer_id, batch.marker)
                continue
            end, producer_id = batch.end_offset, batch.producer_id
            for key, value in batch.records:
                if key is not None:
                    self.replay(key, value, end, producer_id)
                    count += 1
        self.loading.discard(partition)
        self.hosted.add(partition)
        for group in self.groups.values():
            if group.partition == partition:
                for member in group.members.values():
                    member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        if self._next_offsets_expiry_ms is None:
            self._next_offsets_expiry_ms = now_ms + self.config.offsets_retention_check_interval_ms
        return count

    def unload(self, partition: int) -> None:
        """Stop serving ``partition`` (shutdown, or leadership moved): parked requests of
        its groups are answered NOT_COORDINATOR and the groups are dropped from memory."""
        for group_id, group in list(self.groups.items()):
            if group.partition == partition:
                for member in group.members.values():
                    self._fail_waiters(member, Errors.NOT_COORDINATOR)
                del self.groups[group_id]
        for producer_id, group_ids in list(self._txn_groups.items()):
            group_ids.difference_update(
                [g for g in group_ids if self.partition_for(g) == partition])
            if not group_ids:
                del self._txn_groups[producer_id]
        self.hosted.discard(partition)
        self.loading.discard(partition)

    # ------------------------------------------------------------------ replay
    def replay(self, key: bytes, value: bytes | None, offset: int = -1,
               producer_id: int = -1) -> None:
        """Apply one persisted record (live, after its append, or while loading).

        ``offset``: the end offset of its batch in the log (-1 unknown); ``producer_id``:
        the producer of a transactional batch (its offsets stay pending), else -1."""
        try:
            k = decode_key(key)
            if isinstance(k, OffsetKey):
                v = None if value is None else decode_offset_value(value)
                if producer_id >= 0:
                    self._apply_txn_offset(producer_id, k, v, offset)
                else:
                    self._apply_offset(k, v, offset)
            elif isinstance(k, GroupKey):
                self._apply_group_value(k.group, None if value is None
                                        else decode_group_value(value))
        except UnknownRecordVersion as e:
            log.debug("skipping __consumer_offsets record: %s", e)
        except ProtocolDecodeError as e:
            log.warning("skipping malformed __consumer_offsets record: %s", e)

    def _apply_offset(self, key: OffsetKey, value: OffsetAndMetadata | None,
                      offset: int = -1) -> None:
        group = self.groups.get(key.group)
        tp = (key.topic, key.partition)
        if value is None:
            if group is not None:
                group.offsets.pop(tp, None)
                group.offset_positions.pop(tp, None)
                # A tombstone (deletion, expiry) ends pending transactional commits too.
                for producer_id, pending in list(group.pending_txn_offsets.items()):
                    if pending.pop(tp, None) is not None and not pending:
                        del group.pending_txn_offsets[producer_id]
            return
        if group is None:  # offsets of a group not (yet) known: a simple/standalone group
            group = GroupMetadata(key.group, self.partition_for(key.group), self._clock_ms)
            self.groups[key.group] = group
        elif 0 <= offset < group.offset_positions.get(tp, -1):
            return  # a committed transaction wrote this partition later in the log
        group.offsets[tp] = value
        group.offset_positions[tp] = offset

    def _apply_txn_offset(self, producer_id: int, key: OffsetKey,
                          value: OffsetAndMetadata | None, offset: int) -> None:
        """A transactional offset: pending for its producer until the marker."""
        group = self.groups.get(key.group)
        tp = (key.topic, key.partition)
        if value is None:
            pending = group.pending_txn_offsets.get(producer_id) if group else None
            if group is not None and pending is not None:
                pending.pop(tp, None)
                if not pending:
                    del group.pending_txn_offsets[producer_id]
            return
        if group is None:  # Kafka creates an Empty group for a TxnOffsetCommit too
            group = GroupMetadata(key.group, self.partition_for(key.group), self._clock_ms)
            self.groups[key.group] = group
        group.pending_txn_offsets.setdefault(producer_id, {})[tp] = (offset, value)
        self._txn_groups.setdefault(producer_id, set()).add(key.group)

    def replay_end_txn_marker(self, partition: int, producer_id: int,
                              committed: bool) -> int:
        """The transaction marker of ``producer_id`` on ``partition`` (Java:
        ``handleTxnCompletion`` / ``replayEndTransactionMarker``): its pending offsets in
        the partition's groups become committed (COMMIT) -- except where the committed
        offset was written later in the log -- or are dropped (ABORT).  A marker of a
        producer with nothing pending changes nothing.  Returns the groups completed."""
        group_ids = self._txn_groups.get(producer_id)
        if not group_ids:
            return 0
        done = [g for g in group_ids if self.partition_for(g) == partition]
        group_ids.difference_update(done)
        if not group_ids:
            del self._txn_groups[producer_id]
        completed = 0
        for group_id in done:
            group = self.groups.get(group_id)
            pending = None if group is None else group.pending_txn_offsets.pop(producer_id,
                                                                               None)
            if group is None or pending is None:
                continue
            completed += 1
            if not committed:
                continue
            for tp, (position, value) in pending.items():
                if tp not in group.offsets or position > group.offset_positions.get(tp, -1):
                    group.offsets[tp] = value
                    group.offset_positions[tp] = position
                else:
                    log.info("group %s: committed transactional offset of producer %d for "
                             "%s-%d not applied, a later commit holds the partition",
                             group_id, producer_id, tp[0], tp[1])
        return completed

    def fail_txn_offsets(self, producer_id: int, group_id: str, position: int) -> None:
        """A TxnOffsetCommit whose batch (ending at ``position``) did not reach the ISR:
        its pending offsets are dropped (Java ``failPendingTxnOffsetCommit``); the client
        hears the error and retries or aborts."""
        group = self.groups.get(group_id)
        pending = None if group is None else group.pending_txn_offsets.get(producer_id)
        if group is None or pending is None:
            return
        for tp in [tp for tp, (pos, _) in pending.items() if pos == position]:
            del pending[tp]
        if not pending:
            del group.pending_txn_offsets[producer_id]

    def _apply_group_value(self, group_id: str, value: GroupValue | None) -> None:
        """Default replay of a group record: install or delete (GroupCoordinator extends
        it to finish a rebalance whose assignment this record made durable)."""
        group = self.groups.get(group_id)
        if value is None:
            if group is not None:
                for member in group.members.values():
                    self._fail_waiters(member, Errors.UNKNOWN_MEMBER_ID)
                group.state = GroupState.DEAD
                del self.groups[group_id]
            return
        if group is None:
            group = GroupMetadata(group_id, self.partition_for(group_id), self._clock_ms)
            self.groups[group_id] = group
        group.install(value)

    # ------------------------------------------------------------------ records
    def offset_record(self, group_id: str, topic: str, partition: int,
                      value: OffsetAndMetadata | None) -> OffsetsRecord:
        return OffsetsRecord(self.partition_for(group_id), encode_offset_key(group_id, topic,
                             partition), None if value is None else encode_offset_value(value))

    def group_record(self, group: GroupMetadata,
                     assignments: dict[str, bytes] | None = None) -> OffsetsRecord:
        return OffsetsRecord(group.partition, encode_group_key(group.group_id),
                             encode_group_value(group.to_record(assignments)))

    def group_tombstones(self, group: GroupMetadata) -> list[OffsetsRecord]:
        """Delete a group: a tombstone per committed or pending offset, then one for the
        group (Kafka's ``deleteAllOffsets``: pending transactional offsets go too)."""
        records = [self.offset_record(group.group_id, topic, p, None)
                   for topic, p in sorted(set(group.offsets) | group.pending_txn_partitions())]
        records.append(OffsetsRecord(group.partition, encode_group_key(group.group_id), None))
        return records

    # ------------------------------------------------------------------ parked answers
    def _new_token(self) -> int:
        self._next_token += 1
        return self._next_token

    def _complete(self, token: int, response: Any) -> None:
        self._completions[token] = response

    def take_completions(self) -> list[tuple[int, Any]]:
        """Answers for waiter tokens that became ready, in completion order."""
        done = list(self._completions.items())
        self._completions.clear()
        return done

    def _finish(self, result: CoordinatorResult) -> CoordinatorResult:
        """If the step already completed its own waiter, hand the answer back directly."""
        if result.waiter is not None and result.waiter in self._completions:
            result.response = self._completions.pop(result.waiter)
            result.waiter = None
        return result

    def _fail_waiters(self, member: MemberMetadata, error: int) -> None:
        if member.join_waiter is not None:
            self._complete(member.join_waiter.token,
                           join_error(member.join_waiter.version, error, member.member_id))
            member.join_waiter = None
        if member.sync_waiter is not None:
            self._complete(member.sync_waiter.token, sync_error(error))
            member.sync_waiter = None

    # ------------------------------------------------------------------ validation
    @staticmethod
    def validate_member(group: GroupMetadata, member_id: str, instance_id: str | None) -> int:
        """A request naming (member_id, instance_id) comes from a current member?

        With an instance id it must map to ``member_id`` (else the sender was replaced:
        FENCED_INSTANCE_ID); without, ``member_id`` must be a member."""
        if instance_id is not None:
            current = group.static_member_id(instance_id)
            if current is None:
                return Errors.UNKNOWN_MEMBER_ID
            if current != member_id:
                return Errors.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return Errors.UNKNOWN_MEMBER_ID
        return Errors.NONE

    @staticmethod
    def touch(member: MemberMetadata, now_ms: int) -> None:
        """The member showed it is alive: restart its session timeout."""
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
