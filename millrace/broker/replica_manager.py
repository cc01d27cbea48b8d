"""``ReplicaManager``: the partitions this broker hosts, and produce and fetch against them.

Java counterpart: ``kafka.server.ReplicaManager``.  It owns

- the ``Partition`` objects (one per hosted replica; made leader from the partition
  state in the cluster metadata),
- ``append_records``: the whole produce path after decoding — acks check, internal-topic
  check, per-partition append through ``Partition.append_records_to_leader``, then an
  ``acks=all`` request waits for the ISR as a ``DelayedProduce`` in the produce
  purgatory,
- ``fetch_messages``: reads bounded by the high watermark, ``partition_max_bytes`` and
  ``max_bytes`` (the first batch of the first non-empty partition is returned whole so a
  consumer always makes progress), parked as a ``DelayedFetch`` while below
  ``min_bytes``,
- ListOffsets and DeleteRecords against the logs, and the periodic log maintenance
  (flush, retention, compaction, checkpoints).

Every change to a partition (append, high-watermark move, deletion) goes through
``_partition_changed``, which wakes both purgatories.

Thread ownership: the event-loop thread; periodic work runs as a task on that loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from millrace.broker.config import KafkaConfig
from millrace.broker.delayed_fetch import DelayedFetch, FetchPartitionData, LogReadResults
from millrace.broker.delayed_produce import (
    DelayedProduce,
    PartitionResponse,
    ProducePartitionStatus,
    TopicPartition,
)
from millrace.broker.file_region import FileRegion
from millrace.broker.metadata import ClusterMetadata, TopicInfo
from millrace.broker.partition import Partition
from millrace.broker.purgatory import DelayedOperationPurgatory
from millrace.broker.topic_config import TopicConfigs
from millrace.common.errors import (
    CorruptBatchError,
    CorruptRecordError,
    Errors,
    InvalidRecordError,
    KafkaError,
    UnsupportedCompressionTypeError,
)
from millrace.common.time import Time
from millrace.record.batch import MAGIC_OFFSET, iter_batches
from millrace.record.compression import CompressionType
from millrace.storage import AppendOrigin, LogCleaner, LogManager

log = logging.getLogger(__name__)

INLINE_READ_BYTES = 64 * 1024  # smaller reads are copied; larger ones go by sendfile
VALID_ACKS = (-1, 0, 1)


@dataclass(slots=True)
class PartitionFetchInfo:
    """What a fetch asks of one partition (Kafka's ``FetchRequest.PartitionData``)."""

    fetch_offset: int
    max_bytes: int


@dataclass(slots=True)
class FetchParams:
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int = 0


def validate_produce_records(records: bytes | bytearray | None, version: int) -> bytearray:
    """A Produce request's records for one partition, checked as Kafka checks them before
    the log sees them: exactly one magic-2 batch (v3+), no zstd before v7.  Returns a
    mutable copy for the log to assign offsets in place."""
    if records is None or len(records) == 0:
        raise InvalidRecordError("Produce request carries no record batch")
    batches = 0
    try:
        for _, header in iter_batches(records):
            batches += 1
            if header.compression == CompressionType.ZSTD and version < 7:
                raise UnsupportedCompressionTypeError(
                    "Produce requests with version < 7 may not use zstd compression")
    except CorruptBatchError as e:  # a partition error, as in Kafka; never a crash
        if len(records) > MAGIC_OFFSET and records[MAGIC_OFFSET] in (0, 1):
            raise InvalidRecordError(
                f"Produce requests with version {version} may only carry record batches "
                f"with magic 2 (got magic {records[MAGIC_OFFSET]})") from None
        raise CorruptRecordError(str(e)) from None
    if batches != 1:
        raise InvalidRecordError(
            "Produce requests with version 3 and above must carry exactly one record "
            f"batch per partition (got {batches})")
    return bytearray(records)


class ReplicaManager:
    def __init__(self, config: KafkaConfig, time: Time, metadata: ClusterMetadata,
                 log_manager: LogManager, topic_configs: TopicConfigs) -> None:
        self.config = config
        self.time = time
        self.metadata = metadata
        self.log_manager = log_manager
        self.topic_configs = topic_configs
        self.local_broker_id = config.node_id
        self.partitions: dict[TopicPartition, Partition] = {}
        self.produce_purgatory = DelayedOperationPurgatory("Produce", time)
        self.fetch_purgatory = DelayedOperationPurgatory("Fetch", time)
        self.cleaner: LogCleaner | None = None

    # ------------------------------------------------------------------ lifecycle
    def startup(self) -> None:
        """Host every partition the metadata assigns to this broker (its logs were opened
        and recovered by the log manager)."""
        for info in self.metadata.topics.values():
            self.create_partitions(info, 0, info.partitions)
        if self.config["log.cleaner.enable"]:
            self.cleaner = LogCleaner(self.log_manager, time=self.time)

    def shutdown(self) -> None:
        self.produce_purgatory.shutdown()
        self.fetch_purgatory.shutdown()

    async def run_periodic(self) -> None:
        """Retention, compaction, flushes and checkpoints on their intervals."""
        retention_every = self.config["log.retention.check.interval.ms"] / 1000
        cleaner_every = self.config["log.cleaner.backoff.ms"] / 1000
        loop = asyncio.get_running_loop()
        next_retention = loop.time() + retention_every
        next_clean = loop.time() + cleaner_every
        while True:
            await asyncio.sleep(1.0)
            now = self.time.milliseconds()
            try:
                self.log_manager.flush_dirty_logs(now)
                if loop.time() >= next_retention:
                    next_retention = loop.time() + retention_every
                    self.log_manager.cleanup_logs(now)
                if self.cleaner is not None and loop.time() >= next_clean:
                    next_clean = loop.time() + cleaner_every
                    self.cleaner.clean_once(now)
                self.log_manager.checkpoint_all()
            except Exception:
                log.exception("periodic log maintenance failed")

    # ------------------------------------------------------------------ partitions
    def create_partitions(self, info: TopicInfo, start: int, end: int) -> None:
        """Open (or create) the logs of partitions ``[start, end)`` assigned here and
        take the role their partition state gives this broker."""
        config = self.topic_configs.log_config(info.configs)
        for i in range(start, end):
            key = (info.name, i)
            replicas = info.replicas(i)
            if key in self.partitions or self.local_broker_id not in replicas:
                continue
            lg = self.log_manager.get_or_create_log(info.name, i, config)
            partition = Partition(info.name, i, lg, self.local_broker_id)
            state = self.metadata.partition_state(info.name, i)
            if state is not None and state.leader == self.local_broker_id:
                partition.make_leader(state, replicas)
            self.partitions[key] = partition

    def update_topic_config(self, info: TopicInfo) -> None:
        config = self.topic_configs.log_config(info.configs)
        for i in range(info.partitions):
            p = self.partitions.get((info.name, i))
            if p is not None:
                p.log.update_config(config)

    def delete_topic(self, name: str) -> None:
        for key in [k for k in self.partitions if k[0] == name]:
            del self.partitions[key]
            self.log_manager.delete_log(name, key[1])
            self._partition_changed(key)

    def get_partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def _partition_changed(self, key: TopicPartition) -> None:
        """An append, a high-watermark move or a deletion: parked requests try again."""
        self.fetch_purgatory.check_and_complete(key)
        self.produce_purgatory.check_and_complete(key)

    # ------------------------------------------------------------------ produce
    def append_to_local_log(self, entries: Mapping[TopicPartition, bytes | bytearray | None],
                            *,
                            origin: AppendOrigin = AppendOrigin.CLIENT,
                            required_acks: int = 1, internal_topics_allowed: bool = False,
                            produce_version: int | None = None,
                            now_ms: int | None = None
                            ) -> dict[TopicPartition, tuple[PartitionResponse, int]]:
        """Append each partition's records as leader: (response, end offset + 1) each.
        ``produce_version`` given: the records come from a Produce request and are
        checked as such first."""
        now = self.time.milliseconds() if now_ms is None else now_ms
        out: dict[TopicPartition, tuple[PartitionResponse, int]] = {}
        for (topic, index), records in entries.items():
            resp = PartitionResponse()
            end = -1
            if topic in ("__consumer_offsets", "__transaction_state") \
                    and not internal_topics_allowed:
                resp.error = Errors.INVALID_TOPIC_EXCEPTION
                resp.error_message = f"Cannot append records to internal topic {topic}"
            else:
                partition = self.partitions.get((topic, index))
                if partition is None:
                    resp.error = Errors.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    try:
                        if produce_version is not None:
                            buf = validate_produce_records(records, produce_version)
                        else:
                            buf = bytearray(records or b"")
                        info = partition.append_records_to_leader(
                            buf, now, origin=origin, required_acks=required_acks)
                        resp.base_offset = info.first_offset
                        resp.log_append_time = info.log_append_time
                        resp.log_start_offset = info.log_start_offset
                        end = info.last_offset + 1
                        self._partition_changed((topic, index))
                    except KafkaError as e:
                        resp.error = e.code
                        resp.error_message = e.message
            out[(topic, index)] = (resp, end)
        return out

    async def append_records(self, timeout_ms: int, required_acks: int,
                             entries: dict[TopicPartition, bytes | None], *,
                             origin: AppendOrigin = AppendOrigin.CLIENT,
                             internal_topics_allowed: bool = False,
                             produce_version: int | None = None
                             ) -> dict[TopicPartition, PartitionResponse]:
        """Kafka's ``appendRecords``: append, then with ``acks=-1`` wait (up to
        ``timeout_ms``) until the ISR has every appended batch."""
        if required_acks not in VALID_ACKS:
            return {tp: PartitionResponse(error=Errors.INVALID_REQUIRED_ACKS)
                    for tp in entries}
        appended = self.append_to_local_log(
            entries, origin=origin, required_acks=required_acks,
            internal_topics_allowed=internal_topics_allowed, produce_version=produce_version)
        responses = {tp: resp for tp, (resp, _) in appended.items()}
        if required_acks != -1 or not any(r.error == Errors.NONE for r in responses.values()):
            return responses
        statuses = {tp: ProducePartitionStatus(end, resp, acks_pending=resp.error == Errors.NONE)
                    for tp, (resp, end) in appended.items()}
        op = DelayedProduce(timeout_ms, statuses, self.get_partition)
        if not self.produce_purgatory.try_complete_else_watch(op, list(statuses)):
            await op.wait()
        return responses

    # ------------------------------------------------------------------ fetch
    async def fetch_messages(self, params: FetchParams,
                             fetch_infos: Sequence[tuple[TopicPartition, PartitionFetchInfo]]
                             ) -> list[FetchPartitionData]:
        """Kafka's ``fetchMessages``: read now; answer at once if there is enough (or an
        error, or no wait allowed), else park a ``DelayedFetch`` until there is."""
        def read() -> LogReadResults:
            return self.read_from_local_log(params, fetch_infos)

        result = read()
        if (params.max_wait_ms <= 0 or not fetch_infos or result.has_error
                or result.bytes_read >= params.min_bytes):
            return result.partitions
        op = DelayedFetch(params.max_wait_ms, params.min_bytes, read)
        if not self.fetch_purgatory.try_complete_else_watch(op, [tp for tp, _ in fetch_infos]):
            await op.wait()
        assert op.result is not None
        return op.result.partitions

    def read_from_local_log(self, params: FetchParams,
                            fetch_infos: Sequence[tuple[TopicPartition, PartitionFetchInfo]]
                            ) -> LogReadResults:
        partitions = []
        total = 0
        has_error = False
        for (topic, index), info in fetch_infos:
            budget = max(0, min(info.max_bytes, params.max_bytes - total))
            data = self.read(topic, index, info.fetch_offset, budget,
                             min_one_message=(total == 0), isolation=params.isolation_level)
            if data.error:
                has_error = True
            else:
                total += len(data.records)
            partitions.append(data)
        return LogReadResults(partitions, total, has_error)

    def read(self, topic: str, index: int, fetch_offset: int, max_bytes: int,
             min_one_message: bool, isolation: int) -> FetchPartitionData:
        p = self.partitions.get((topic, index))
        if p is None:
            return FetchPartitionData(Errors.UNKNOWN_TOPIC_OR_PARTITION)
        lg = p.log
        hw = lg.high_watermark
        result = FetchPartitionData(Errors.NONE, hw, hw, lg.log_start_offset)
        if fetch_offset < lg.log_start_offset or fetch_offset > lg.log_end_offset:
            result.error = Errors.OFFSET_OUT_OF_RANGE
            return result
        if fetch_offset >= hw or (max_bytes <= 0 and not min_one_message):
            return result
        try:
            info = lg.read(fetch_offset, max_bytes, min_one_message=min_one_message,
                           max_offset=hw)
        except KafkaError as e:
            result.error = e.code
            return result
        if info.length <= 0:
            return result
        if info.length <= INLINE_READ_BYTES:
            result.records = info.read()
        else:
            result.records = FileRegion(info)
        return result

    # ------------------------------------------------------------------ offsets
    def offset_for_timestamp(self, topic: str, index: int, timestamp: int,
                             isolation: int) -> tuple[int, int, int, int]:
        """(error, timestamp, offset, leader_epoch) for ListOffsets."""
        p = self.partitions.get((topic, index))
        if p is None:
            return Errors.UNKNOWN_TOPIC_OR_PARTITION, -1, -1, -1
        lg = p.log
        if timestamp == -1:
            return Errors.NONE, -1, lg.high_watermark, p.leader_epoch
        if timestamp in (-2, -4):
            return Errors.NONE, -1, lg.log_start_offset, p.leader_epoch
        found = lg.fetch_offset_by_timestamp(timestamp)
        if found is None or found.offset >= lg.high_watermark:  # consumers see committed only
            return Errors.NONE, -1, -1, -1
        return Errors.NONE, found.timestamp, found.offset, found.leader_epoch

    def delete_records(self, topic: str, index: int, offset: int) -> tuple[int, int]:
        """(error, new low watermark) for DeleteRecords; offset -1 means the high watermark."""
        p = self.partitions.get((topic, index))
        if p is None:
            return Errors.UNKNOWN_TOPIC_OR_PARTITION, -1
        lg = p.log
        target = lg.high_watermark if offset == -1 else offset
        if target < 0 or target > lg.high_watermark:
            return Errors.OFFSET_OUT_OF_RANGE, -1
        try:
            lg.delete_records_before(target)
        except KafkaError as e:
            return e.code, -1
        return Errors.NONE, lg.log_start_offset

