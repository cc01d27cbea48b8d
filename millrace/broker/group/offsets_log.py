"""``ReplicatedOffsetsLog``: a coordinator's log over its internal topic -- the group
coordinator's ``OffsetsLog`` over ``__consumer_offsets`` (the default), and the transaction
coordinator's over ``__transaction_state``.

Java counterpart: the coordinator runtime's ``CoordinatorPartitionWriter``.  Records the
coordinator persists are appended like any other writer's: through the partition's
leader (``ReplicaManager.append_to_local_log`` with origin COORDINATOR), so they get the
same high-watermark rule and wake the same fetchers; replay reads the partition's log
from its start.

A transactional offset commit (TxnOffsetCommit) is appended as a transactional batch of
the committing producer (``append(..., producer=(id, epoch))``, base sequence 0 as
Kafka's coordinator writes it); the partition's producer state then holds the open
transaction until the transaction coordinator's marker (a control batch) closes it.
``replay_batches`` hands each batch with its producer id and end offset, and each
COMMIT/ABORT marker, so the coordinator can rebuild pending transactional offsets;
``replay`` yields the data records alone.
"""

from __future__ import annotations

from collections.abc import Iterator

from millrace.broker.group.records import LoggedBatch
from millrace.broker.metadata import ClusterMetadata
from millrace.broker.replica_manager import ReplicaManager
from millrace.common.errors import InvalidProducerEpochError, KafkaError, for_code
from millrace.record import RecordBatch, RecordBatchBuilder
from millrace.record.batch import iter_batches
from millrace.record.compression import CompressionType
from millrace.record.control import ControlRecordType, parse_control_record
from millrace.storage import AppendOrigin

TOPIC = "__consumer_offsets"


class ReplicatedOffsetsLog:
    def __init__(self, replica_manager: ReplicaManager, metadata: ClusterMetadata,
                 default_partitions: int, commit_timeout_ms: int = 5000, *,
                 topic: str = TOPIC) -> None:
        self.topic = topic
        self._rm = replica_manager
        self._metadata = metadata
        self._default_partitions = default_partitions
        self._commit_timeout_ms = commit_timeout_ms

    def num_partitions(self) -> int:
        info = self._metadata.topics.get(self.topic)
        return info.partitions if info else self._default_partitions

    def append(self, partition: int, records: list[tuple[bytes, bytes | None]],
               producer: tuple[int, int] | None = None) -> int:
        """Append one batch as leader; returns the offset after it (what the ISR must
        reach).  ``producer``: (id, epoch) makes it a transactional batch of that
        producer.  Raises the partition's KafkaError (e.g. NOT_LEADER_OR_FOLLOWER, or
        INVALID_PRODUCER_EPOCH for a fenced producer) when it cannot."""
        p = self._rm.get_partition(self.topic, partition)
        if p is None:
            raise KafkaError(f"{self.topic}-{partition} is not hosted here")
        now = self._rm.time.milliseconds()
        if producer is None:
            builder = RecordBatchBuilder(compression=CompressionType.NONE)
        else:
            producer_id, producer_epoch = producer
            # Kafka's ProducerAppendInfo refuses an older epoch for coordinator appends
            # too; our log checks only client appends, so the zombie is fenced here.
            entry = p.log.producer_state_manager.last_entry(producer_id)
            if entry is not None and producer_epoch < entry.producer_epoch:
                raise InvalidProducerEpochError(
                    f"epoch {producer_epoch} of producer {producer_id} is older than "
                    f"{entry.producer_epoch} on {self.topic}-{partition}")
            builder = RecordBatchBuilder(compression=CompressionType.NONE,
                                         producer_id=producer_id,
                                         producer_epoch=producer_epoch, base_sequence=0,
                                         is_transactional=True)
        for key, value in records:
            builder.append(now, key, value)
        result = self._rm.append_to_local_log(
            {(self.topic, partition): builder.build()}, origin=AppendOrigin.COORDINATOR,
            internal_topics_allowed=True, now_ms=now)
        resp, end = result[(self.topic, partition)]
        if resp.error:
            raise for_code(resp.error)(resp.error_message or "")
        return end

    async def wait_replicated(self, partition: int, end_offset: int) -> int:
        """Wait (up to ``offsets.commit.timeout.ms``) until the ISR has everything before
        ``end_offset``; the Kafka error code of the outcome (0 at once on one node)."""
        return await self._rm.wait_for_isr((self.topic, partition), end_offset,
                                           self._commit_timeout_ms)

    def replay(self, partition: int) -> Iterator[tuple[bytes, bytes | None]]:
        """Key and value of every data record with a key, in offset order."""
        for batch in self.replay_batches(partition):
            for key, value in batch.records:
                if key is not None:
                    yield key, value

    def replay_batches(self, partition: int) -> Iterator[LoggedBatch]:
        """Every batch of the partition in offset order: data batches with their records
        (keyed ones), transaction markers as COMMIT/ABORT (other control batches are
        skipped)."""
        p = self._rm.get_partition(self.topic, partition)
        if p is None:
            return
        lg = p.log
        offset = lg.log_start_offset
        end = lg.log_end_offset
        while offset < end:
            info = lg.read(offset, 1 << 20, max_offset=end, min_one_message=True)
            if info.length <= 0:
                return
            data = info.read()
            last = offset
            for pos, header in iter_batches(data):
                last = header.last_offset + 1
                if last <= offset:
                    continue
                batch = RecordBatch(data, pos)
                if header.is_control:
                    kind = next((parse_control_record(r.key) for r in batch.records()),
                                ControlRecordType.UNKNOWN)
                    if kind in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
                        yield LoggedBatch(last, header.producer_id,
                                          kind == ControlRecordType.COMMIT, [])
                    continue
                yield LoggedBatch(
                    last, header.producer_id if header.is_transactional else -1, None,
                    [(rec.key, rec.value) for rec in batch.records()
                     if rec.key is not None and rec.offset >= offset])
            if last <= offset:
                return
            offset = last
