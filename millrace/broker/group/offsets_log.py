"""``ReplicatedOffsetsLog``: a coordinator's log over its internal topic -- the group
coordinator's ``OffsetsLog`` over ``__consumer_offsets`` (the default), and the transaction
coordinator's over ``__transaction_state``.

Java counterpart: the coordinator runtime's ``CoordinatorPartitionWriter``.  Records the
coordinator persists are appended like any other writer's: through the partition's
leader (``ReplicaManager.append_to_local_log`` with origin COORDINATOR), so they get the
same high-watermark rule and wake the same fetchers; replay reads the partition's log
from its start.
"""

from __future__ import annotations

from collections.abc import Iterator

from millrace.broker.metadata import ClusterMetadata
from millrace.broker.replica_manager import ReplicaManager
from millrace.common.errors import KafkaError, for_code
from millrace.record import RecordBatch, RecordBatchBuilder
from millrace.record.batch import iter_batches
from millrace.record.compression import CompressionType
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

    def append(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> int:
        """Append one batch as leader; returns the offset after it (what the ISR must
        reach).  Raises the partition's KafkaError (e.g. NOT_LEADER_OR_FOLLOWER) when it
        cannot."""
        if self._rm.get_partition(self.topic, partition) is None:
            raise KafkaError(f"{self.topic}-{partition} is not hosted here")
        now = self._rm.time.milliseconds()
        builder = RecordBatchBuilder(compression=CompressionType.NONE)
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
                if header.is_control:
                    continue
                for rec in RecordBatch(data, pos).records():
                    if rec.key is not None and rec.offset >= offset:
                        yield rec.key, rec.value
            if last <= offset:
                return
            offset = last
