"""``ReplicaManager`` and ``Partition``: the broker's view of the partitions it hosts.

Seams for the cluster milestone are real already: every partition has a leader epoch,
a log end offset and a high watermark; appends go through ``Partition`` (which will wait
for ISR followers on acks=-1 there), reads are bounded by the high watermark, and
delayed fetches wait in a purgatory keyed by (topic, partition).  On one node this
broker is the whole ISR, so the high watermark follows the log end offset at once.

Thread ownership: the event-loop thread; periodic work (retention, compaction, flush,
checkpoints) runs as a task on that loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from millrace.broker.file_region import FileRegion
from millrace.broker.metadata import TopicInfo
from millrace.broker.purgatory import DelayedOperationPurgatory
from millrace.common.errors import (
    CorruptBatchError,
    CorruptRecordError,
    InvalidRecordError,
    KafkaError,
    UnsupportedCompressionTypeError,
)
from millrace.record import RecordBatch, RecordBatchBuilder
from millrace.record.batch import MAGIC_OFFSET, iter_batches
from millrace.record.compression import CompressionType
from millrace.storage import Log, LogCleaner, LogConfig, LogManager

if TYPE_CHECKING:
    from millrace.broker.server import KafkaServer

log = logging.getLogger(__name__)

UNKNOWN_TOPIC_OR_PARTITION = 3
OFFSET_OUT_OF_RANGE = 1
INLINE_READ_BYTES = 64 * 1024  # smaller reads are copied; larger ones go by sendfile


@dataclass(slots=True)
class ReadResult:
    error_code: int
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: Any = b""


class Partition:
    """One partition replica (always the leader on a single node)."""

    def __init__(self, topic: str, index: int, log_: Log) -> None:
        self.topic = topic
        self.index = index
        self.log = log_
        self.leader_epoch = 0
        # Becoming leader with ISR = {this replica} commits the whole log (Kafka's makeLeader
        # -> maybeIncrementLeaderHW): the checkpointed HW can be stale after a crash.
        log_.maybe_increment_high_watermark(log_.log_end_offset)

    def append_records_to_leader(self, records: bytes | None, version: int, now_ms: int,
                                 transactional_id: str | None = None) -> Any:
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
        info = self.log.append_as_leader(bytearray(records), self.leader_epoch, now_ms)
        # Single node: the ISR is this replica, so everything appended is committed.
        self.log.update_high_watermark(self.log.log_end_offset)
        return info


class ReplicaManager:
    def __init__(self, server: KafkaServer) -> None:
        self.server = server
        self.config = server.config
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.fetch_purgatory = DelayedOperationPurgatory("Fetch")
        self.log_manager: LogManager
        self.cleaner: LogCleaner | None = None

    # ------------------------------------------------------------------ lifecycle
    def startup(self) -> None:
        self.log_manager = LogManager(
            self.config.log_dirs, self._log_config_for, time=self.server.time,
            producer_id_expiration_ms=self.config["producer.id.expiration.ms"])
        self.log_manager.startup()
        for info in self.server.metadata.topics.values():
            self.create_partitions(info, 0, info.partitions)
        if self.config["log.cleaner.enable"]:
            self.cleaner = LogCleaner(self.log_manager, time=self.server.time)

    def shutdown(self) -> None:
        self.log_manager.shutdown()

    async def run_periodic(self) -> None:
        """Retention, compaction, flushes and checkpoints on their intervals."""
        retention_every = self.config["log.retention.check.interval.ms"] / 1000
        cleaner_every = self.config["log.cleaner.backoff.ms"] / 1000
        loop = asyncio.get_running_loop()
        next_retention = loop.time() + retention_every
        next_clean = loop.time() + cleaner_every
        while True:
            await asyncio.sleep(1.0)
            now = self.server.time.milliseconds()
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

    # ------------------------------------------------------------------ topics
    def _topic_props(self, configs: dict[str, str]) -> dict[str, str]:
        props = self.config.default_topic_config()
        props.update(configs)
        return props

    def _log_config_for(self, topic: str) -> LogConfig:
        info = self.server.metadata.topics.get(topic)
        return LogConfig.from_props(self._topic_props(info.configs if info else {}))

    def validate_topic_config(self, configs: dict[str, str]) -> None:
        LogConfig.from_props(self._topic_props(configs))

    def describe_topic_config(self, configs: dict[str, str]) -> list[tuple[str, str, int]]:
        """(name, value, source) for every topic config; source 1 = topic, 5 = broker."""
        merged = self._topic_props(configs)
        out = []
        for name in sorted(LogConfig.names()):
            value = merged.get(name, LogConfig.default_of(name))
            out.append((name, str(value), 1 if name in configs else 5))
        return out

    def create_partitions(self, info: TopicInfo, start: int, end: int) -> None:
        config = LogConfig.from_props(self._topic_props(info.configs))
        for i in range(start, end):
            key = (info.name, i)
            if key not in self.partitions:
                lg = self.log_manager.get_or_create_log(info.name, i, config)
                self.partitions[key] = Partition(info.name, i, lg)

    def update_topic_config(self, info: TopicInfo) -> None:
        config = LogConfig.from_props(self._topic_props(info.configs))
        for i in range(info.partitions):
            p = self.partitions.get((info.name, i))
            if p is not None:
                p.log.update_config(config)

    def delete_topic(self, name: str) -> None:
        for key in [k for k in self.partitions if k[0] == name]:
            del self.partitions[key]
            self.log_manager.delete_log(name, key[1])
            self.fetch_purgatory.check_and_complete(key)

    def get_partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def leader_epoch(self, topic: str, index: int) -> int:
        p = self.partitions.get((topic, index))
        return p.leader_epoch if p is not None else -1

    # ------------------------------------------------------------------ reads
    def read(self, topic: str, index: int, fetch_offset: int, max_bytes: int,
             min_one_message: bool, isolation: int) -> ReadResult:
        p = self.partitions.get((topic, index))
        if p is None:
            return ReadResult(UNKNOWN_TOPIC_OR_PARTITION)
        lg = p.log
        hw = lg.high_watermark
        result = ReadResult(0, hw, hw, lg.log_start_offset)
        if fetch_offset < lg.log_start_offset or fetch_offset > lg.log_end_offset:
            result.error_code = OFFSET_OUT_OF_RANGE
            return result
        if fetch_offset >= hw or (max_bytes <= 0 and not min_one_message):
            return result
        try:
            info = lg.read(fetch_offset, max_bytes, min_one_message=min_one_message,
                           max_offset=hw)
        except KafkaError as e:
            result.error_code = e.code
            return result
        if info.length <= 0:
            return result
        if info.length <= INLINE_READ_BYTES:
            result.records = info.read()
        else:
            result.records = FileRegion(info)
        return result

    def offset_for_timestamp(self, topic: str, index: int, timestamp: int,
                             isolation: int) -> tuple[int, int, int, int]:
        """(error, timestamp, offset, leader_epoch) for ListOffsets."""
        p = self.partitions.get((topic, index))
        if p is None:
            return UNKNOWN_TOPIC_OR_PARTITION, -1, -1, -1
        lg = p.log
        if timestamp == -1:
            return 0, -1, lg.high_watermark, p.leader_epoch
        if timestamp in (-2, -4):
            return 0, -1, lg.log_start_offset, p.leader_epoch
        found = lg.fetch_offset_by_timestamp(timestamp)
        if found is None:
            return 0, -1, -1, -1
        return 0, found.timestamp, found.offset, found.leader_epoch

    def delete_records(self, topic: str, index: int, offset: int) -> tuple[int, int]:
        """(error, new low watermark) for DeleteRecords; offset -1 means the high watermark."""
        p = self.partitions.get((topic, index))
        if p is None:
            return UNKNOWN_TOPIC_OR_PARTITION, -1
        lg = p.log
        target = lg.high_watermark if offset == -1 else offset
        if target < 0 or target > lg.high_watermark:
            return OFFSET_OUT_OF_RANGE, -1
        try:
            lg.delete_records_before(target)
        except KafkaError as e:
            return e.code, -1
        return 0, lg.log_start_offset

    def notify_append(self, topic: str, index: int) -> None:
        self.fetch_purgatory.check_and_complete((topic, index))

    # ------------------------------------------------------------------ __consumer_offsets
    def offsets_log(self) -> OffsetsLogAdapter:
        return OffsetsLogAdapter(self)


class OffsetsLogAdapter:
    """The group coordinator's view of ``__consumer_offsets`` (its ``OffsetsLog``)."""

    TOPIC = "__consumer_offsets"

    def __init__(self, rm: ReplicaManager) -> None:
        self.rm = rm

    def num_partitions(self) -> int:
        info = self.rm.server.metadata.topics.get(self.TOPIC)
        return info.partitions if info else int(self.rm.config["offsets.topic.num.partitions"])

    def append(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> None:
        p = self.rm.get_partition(self.TOPIC, partition)
        if p is None:
            raise KafkaError(f"{self.TOPIC}-{partition} is not hosted here")
        now = self.rm.server.time.milliseconds()
        builder = RecordBatchBuilder(compression=CompressionType.NONE)
        for key, value in records:
            builder.append(now, key, value)
        p.log.append_as_leader(bytearray(builder.build()), p.leader_epoch, now)
        p.log.update_high_watermark(p.log.log_end_offset)
        self.rm.notify_append(self.TOPIC, partition)

    def replay(self, partition: int) -> Iterator[tuple[bytes, bytes | None]]:
        p = self.rm.get_partition(self.TOPIC, partition)
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

