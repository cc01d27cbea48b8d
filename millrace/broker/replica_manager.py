"""``ReplicaManager``: the partitions this broker hosts, and produce and fetch against them.

Java counterpart: ``kafka.server.ReplicaManager``.  It owns

- the ``Partition`` objects (one per hosted replica; made leader from the partition
  state in the cluster metadata),
- ``append_records``: the whole produce path after decoding — acks check, internal-topic
  check, for a transactional request the KIP-890 verification with the transaction
  coordinator (``add_partitions_to_txn_manager``), per-partition append through
  ``Partition.append_records_to_leader``, then an ``acks=all`` request waits for the
  ISR as a ``DelayedProduce`` in the produce purgatory,
- ``fetch_messages``: reads bounded by the high watermark (the last stable offset for
  read_committed, with the aborted transactions in range), ``partition_max_bytes`` and
  ``max_bytes`` (the first batch of the first non-empty partition is returned whole so a
  consumer always makes progress), parked as a ``DelayedFetch`` while below
  ``min_bytes``,
- ``append_txn_markers``: WriteTxnMarkers on the leaders, through its ``TxnMarkerWriter``
  (``txn_marker_writer.py``: one COMMIT/ABORT control batch per partition appended with
  ``append_records``, then the ``txn_marker_listeners``),
- ``become_leader_or_follower`` / ``stop_replicas``: the controller's LeaderAndIsr and
  StopReplica, applied by its ``ReplicaStateChanges`` (``replica_state_changes.py``:
  make leader or follower, start and stop fetchers, tell the leadership listeners),
- ListOffsets and DeleteRecords against the logs, and the periodic log maintenance
  (flush, retention, compaction, checkpoints).

Every change to a partition (append, high-watermark move, deletion) goes through
``_partition_changed``, which wakes both purgatories.

Thread ownership: the event-loop thread; periodic work runs as a task on that loop.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from millrace.broker.add_partitions_to_txn_manager import (
    AddPartitionsToTxnManager,
    TransactionSupportedOperation,
    verify_transactions,
)
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
from millrace.broker.metrics.broker_topic_stats import EXPECTED_FETCH_ERRORS, BrokerTopicStats
from millrace.broker.metrics.registry import KafkaMetricsRegistry
from millrace.broker.partition import AlterIsrManager, IsrChangeMeters, Partition
from millrace.broker.partition_state_log import PartitionStateLog
from millrace.broker.purgatory import DelayedOperationPurgatory
from millrace.broker.record_tracer import ProduceTrace, RecordTracer
from millrace.broker.replica_fetcher import BrokerEndpoint, ReplicaFetcherManager
from millrace.broker.replica_state_changes import LeaderAndIsrPartition, ReplicaStateChanges
from millrace.broker.security.inter_broker import inter_broker_security
from millrace.broker.topic_config import TopicConfigs
from millrace.broker.txn_marker_writer import (
    TXN_MARKER_TIMEOUT_MS,
    TxnMarkerEntry,
    TxnMarkerListener,
    TxnMarkerWriter,
)
from millrace.common.errors import (
    CorruptBatchError,
    CorruptRecordError,
    Errors,
    InvalidRecordError,
    KafkaError,
    KafkaStorageError,
    UnsupportedCompressionTypeError,
)
from millrace.common.time import Time
from millrace.record.batch import COMPRESSION_CODEC_MASK, MAGIC_OFFSET, iter_batches
from millrace.record.compression import CompressionType
from millrace.storage import AppendOrigin, LogCleaner, LogManager
from millrace.storage.producer_state_manager import VerificationGuard

if TYPE_CHECKING:
    from millrace.broker.context import RequestContext

log = logging.getLogger(__name__)

# The deliberately broken build of the fault harness's negative control, and nothing
# else: with this set, a client's produce is answered at once with the offsets its
# records will get, and appended only this many milliseconds later.  A crash in between
# loses acknowledged records; the history checker must report them (a green checker run
# means something only if it sees this).  Never set it anywhere else.
UNSAFE_ACK_BEFORE_APPEND_ENV = "MILLRACE_UNSAFE_ACK_BEFORE_APPEND_MS"
INLINE_READ_BYTES = 64 * 1024  # smaller reads are copied; larger ones go by sendfile
VALID_ACKS = (-1, 0, 1)
READ_COMMITTED = 1  # Fetch / ListOffsets isolation_level


@dataclass(slots=True)
class PartitionFetchInfo:
    """What a fetch asks of one partition (Kafka's ``FetchRequest.PartitionData``)."""

    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1  # -1: the client does not check (KIP-320)


INTERNAL_TOPICS = frozenset(("__consumer_offsets", "__transaction_state"))
"""Topics a client may not produce to (the coordinators append with
``internal_topics_allowed``)."""


@dataclass(slots=True)
class FetchParams:
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int = 0
    replica_id: int = -1  # a follower's broker id; -1 for consumers
    request: RequestContext | None = None  # who asks (the record tracer's consumer.fetch)

    @property
    def is_from_follower(self) -> bool:
        return self.replica_id >= 0


def validate_produce_records(records: bytes | bytearray | memoryview | None, version: int
                             ) -> bytearray | memoryview:
    """A Produce request's records for one partition, checked as Kafka checks them before
    the log sees them: exactly one magic-2 batch (v3+), no zstd before v7.  Returns a
    mutable buffer for the log to assign offsets in place: the writable view the broker's
    receive path decoded (no copy), else a copy."""
    if records is None or len(records) == 0:
        raise InvalidRecordError("Produce request carries no record batch")
    batches = 0
    try:
        for _, header in iter_batches(records):
            batches += 1
            if version < 7 and \
                    header.attributes & COMPRESSION_CODEC_MASK == CompressionType.ZSTD:
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
    if isinstance(records, memoryview) and not records.readonly:
        return records  # a view of the request's receive buffer: rewritten in place
    return bytearray(records)


class ReplicaManager:
    def __init__(self, config: KafkaConfig, time: Time, metadata: ClusterMetadata,
                 log_manager: LogManager, topic_configs: TopicConfigs,
                 metrics: KafkaMetricsRegistry | None = None) -> None:
        self.config = config
        self.time = time
        self.metadata = metadata
        self.log_manager = log_manager
        self.topic_configs = topic_configs
        self.local_broker_id = config.node_id
        self.partitions: dict[TopicPartition, Partition] = {}
        self.produce_purgatory = DelayedOperationPurgatory("Produce", time)
        self.fetch_purgatory = DelayedOperationPurgatory("Fetch", time)
        # what it records: BrokerTopicMetrics per partition of each request, and the ISR
        # changes its partitions' ISR manager makes (the gauges read its state: see
        # metrics/broker_metrics.py)
        self.metrics = metrics if metrics is not None else KafkaMetricsRegistry()
        self.topic_stats = BrokerTopicStats(self.metrics, enabled=config["metrics.enabled"])
        self.isr_meters = IsrChangeMeters(
            self.metrics.meter("kafka.server", "ReplicaManager", "IsrShrinksPerSec"),
            self.metrics.meter("kafka.server", "ReplicaManager", "IsrExpandsPerSec"),
            self.metrics.meter("kafka.server", "ReplicaManager", "FailedIsrUpdatesPerSec"))
        self.cleaner: LogCleaner | None = None
        self.alter_isr_manager: AlterIsrManager | None = None  # set in cluster mode
        self.controller_epoch = 0
        # Called with (partitions now led here, partitions now followed here) after a
        # LeaderAndIsr: the group coordinator loads and unloads __consumer_offsets.
        self.leadership_listeners: list[
            Callable[[list[Partition], list[Partition]], None]] = []
        self.txn_marker_writer = TxnMarkerWriter(self.append_records, time)
        self.state_changes = ReplicaStateChanges(self)
        # why partitions led here changed leader or ISR (the console's timeline)
        self.state_log = PartitionStateLog(self.local_broker_id, time.milliseconds)
        # what happened here to records of armed topics (a record's journey, issue 28)
        self.tracer = RecordTracer(self.local_broker_id, self._topic_partitions)
        self.fetcher_manager: ReplicaFetcherManager | None = None
        # KIP-890: verification (part 1, if enabled) and implicit adds (part 2, always:
        # a transaction.version 2 client sends no AddPartitionsToTxn of its own).
        self.transaction_verification_enabled: bool = \
            config["transaction.partition.verification.enable"]
        self.add_partitions_to_txn_manager: AddPartitionsToTxnManager | None = \
            AddPartitionsToTxnManager(
                metadata, config.node_id, config["transaction.state.log.num.partitions"],
                request_timeout_ms=config["controller.socket.timeout.ms"],
                security=inter_broker_security(config))
        self._unsafe_ack_delay_ms = int(os.environ.get(UNSAFE_ACK_BEFORE_APPEND_ENV) or 0)
        self._unsafe_pending: dict[TopicPartition, int] = {}
        if self._unsafe_ack_delay_ms:
            log.warning("UNSAFE BUILD (%s=%d, a test's negative control): produce requests "
                        "are acknowledged before their records are appended",
                        UNSAFE_ACK_BEFORE_APPEND_ENV, self._unsafe_ack_delay_ms)

    # ------------------------------------------------------------------ lifecycle
    def startup(self) -> None:
        """Host every partition the metadata assigns to this broker (its logs were opened
        and recovered by the log manager)."""
        for info in self.metadata.topics.values():
            self.create_partitions(info, 0, info.partitions)
        if self.config["log.cleaner.enable"]:
            self.cleaner = LogCleaner(self.log_manager, time=self.time)

    def shutdown(self) -> None:
        if self.add_partitions_to_txn_manager is not None:
            self.add_partitions_to_txn_manager.close()
        self.produce_purgatory.shutdown()
        self.fetch_purgatory.shutdown()

    async def run_isr_expiration(self) -> None:
        """Kafka's isr-expiration task: every ``replica.lag.time.max.ms / 2``, leaders drop
        the followers that have not caught up within the lag time (so a follower leaves
        the ISR between 1 and 1.5 lag times after it stopped keeping up)."""
        every = self.config["replica.lag.time.max.ms"] / 2 / 1000
        while True:
            await asyncio.sleep(every)
            try:
                self.maybe_shrink_isrs()
            except Exception:
                log.exception("ISR expiration failed")

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
            except KafkaStorageError as e:  # the dir is offline: KafkaServer reacts
                log.error("periodic log maintenance failed: %s", e)
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
            partition = Partition(info.name, i, lg, self.local_broker_id,
                                  self.alter_isr_manager)
            state = self.metadata.partition_state(info.name, i)
            if state is not None and state.leader == self.local_broker_id:
                partition.make_leader(state, replicas)
                self.state_log.record(info.name, i, "leader", self.local_broker_id,
                                      partition.isr, f"broker {self.local_broker_id} leads "
                                      f"at leader epoch {partition.leader_epoch} (the "
                                      f"partition's state when its log was opened), "
                                      f"replicas {list(replicas)}")
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
            self.partition_changed(key)
        self.topic_stats.remove_topic(name)

    def _topic_partitions(self, topic: str) -> list[Partition]:
        """This broker's partitions of ``topic`` (the record tracer arms them)."""
        info = self.metadata.topics.get(topic)
        if info is None:
            return []
        found = (self.partitions.get((topic, i)) for i in range(info.partitions))
        return [p for p in found if p is not None]

    def get_partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def partition_changed(self, key: TopicPartition) -> None:
        """An append, a high-watermark move or a deletion: parked requests try again."""
        self.fetch_purgatory.check_and_complete(key)
        self.produce_purgatory.check_and_complete(key)

    # ------------------------------------------------------------------ LeaderAndIsr
    def become_leader_or_follower(self, controller_epoch: int,
                                  partitions: Sequence[LeaderAndIsrPartition],
                                  live_brokers: Mapping[int, BrokerEndpoint],
                                  topic_configs: Mapping[str, dict[str, str]] | None = None
                                  ) -> dict[TopicPartition, int]:
        """Kafka's ``becomeLeaderOrFollower`` (``ReplicaStateChanges``)."""
        return self.state_changes.become_leader_or_follower(
            controller_epoch, partitions, live_brokers, topic_configs)

    def stop_replicas(self, controller_epoch: int,
                      partitions: Sequence[tuple[TopicPartition, int, bool]]
                      ) -> dict[TopicPartition, int]:
        """Kafka's ``stopReplicas`` (``ReplicaStateChanges``); a topic whose last
        partition here was deleted loses its metrics (Kafka's ``maybeRemoveTopicMetrics``)."""
        errors = self.state_changes.stop_replicas(controller_epoch, partitions)
        deleted = {tp[0] for tp, _, delete in partitions if delete}
        for topic in deleted - {t for t, _ in self.partitions}:
            self.topic_stats.remove_topic(topic)
        return errors

    def maybe_shrink_isrs(self) -> int:
        """Kafka's isr-expiration task (every replica.lag.time.max.ms / 2): drop the
        followers that have not caught up within the lag time.  Returns how many
        partitions proposed a smaller ISR."""
        now = self.time.milliseconds()
        lag = self.config["replica.lag.time.max.ms"]
        return sum(1 for p in list(self.partitions.values())
                   if p.is_leader and p.maybe_shrink_isr(now, lag))

    # ------------------------------------------------------------------ produce
    def append_to_local_log(self, entries: Mapping[TopicPartition, bytes | bytearray | None],
                            *,
                            origin: AppendOrigin = AppendOrigin.CLIENT,
                            required_acks: int = 1, internal_topics_allowed: bool = False,
                            produce_version: int | None = None,
                            now_ms: int | None = None,
                            verification_guards: dict[TopicPartition, VerificationGuard]
                            | None = None,
                            trace: ProduceTrace | None = None
                            ) -> dict[TopicPartition, tuple[PartitionResponse, int]]:
        """Append each partition's records as leader: (response, end offset + 1) each.
        ``produce_version`` given: the records come from a Produce request and are
        checked as such first.  ``verification_guards`` given (a transactional Produce
        with verification on): a transactional batch that opens a transaction needs its
        partition's guard, still current."""
        now = self.time.milliseconds() if now_ms is None else now_ms
        out: dict[TopicPartition, tuple[PartitionResponse, int]] = {}
        partitions = self.partitions
        # per topic: [partitions asked, hosted, bytes appended, records appended], marked
        # once per request (the meters count the same as a mark per partition)
        counts: dict[str, list[int]] = {}
        changed: list[TopicPartition] = []
        try:
            for tp, records in entries.items():
                topic = tp[0]
                resp = PartitionResponse()
                end = -1
                partition = partitions.get(tp)
                c = counts.get(topic)
                if c is None:
                    c = counts[topic] = [0, 0, 0, 0]
                c[0] += 1
                if partition is not None:
                    c[1] += 1
                if topic in INTERNAL_TOPICS and not internal_topics_allowed:
                    resp.error = Errors.INVALID_TOPIC_EXCEPTION
                    resp.error_message = f"Cannot append records to internal topic {topic}"
                elif partition is None:
                    resp.error = Errors.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    try:
                        if produce_version is not None:
                            buf = validate_produce_records(records, produce_version)
                        else:
                            buf = bytearray(records or b"")
                        started = self.tracer.clock_us() if partition.trace is not None else 0
                        info = partition.append_records_to_leader(
                            buf, now, origin=origin, required_acks=required_acks,
                            verification_guard=None if verification_guards is None
                            else verification_guards.get(tp),
                            require_verification=verification_guards is not None)
                        resp.base_offset = info.first_offset
                        resp.log_append_time = info.log_append_time
                        resp.log_start_offset = info.log_start_offset
                        end = info.last_offset + 1
                        if partition.trace is not None:
                            partition.trace.leader_appended(partition, buf, info, trace,
                                                            started)
                        c[2] += len(buf)
                        c[3] += info.num_records
                        changed.append(tp)
                    except KafkaError as e:
                        resp.error = e.code
                        resp.error_message = e.message
                        self.topic_stats.produce_refused(
                            topic, True, e.code, records, partition.log.config.compact,
                            origin == AppendOrigin.CLIENT)
                out[tp] = (resp, end)
        finally:
            self._mark_appends(counts)
            # parked requests try again once every partition of the request is appended
            # (as Kafka's appendRecords completes its delayed operations afterwards)
            self._partitions_changed(changed)
        return out

    def _mark_appends(self, counts: dict[str, list[int]]) -> None:
        """The produce meters of one append request: per topic, the partitions asked,
        those hosted here, and the bytes and records appended."""
        stats = self.topic_stats
        for topic, (asked, hosted, size, records) in counts.items():
            stats.produce_requests(topic, asked, hosted)
            if size or records:
                stats.appended(topic, size, records)

    def _partitions_changed(self, keys: list[TopicPartition]) -> None:
        """``partition_changed`` for each of ``keys``; nothing to do (and no per-key
        work) when no operation is parked."""
        fetch, produce = self.fetch_purgatory, self.produce_purgatory
        if fetch.is_empty and produce.is_empty:
            return
        for key in keys:
            fetch.check_and_complete(key)
            produce.check_and_complete(key)

    async def append_records(self, timeout_ms: int, required_acks: int,
                             entries: dict[TopicPartition, bytes | None], *,
                             origin: AppendOrigin = AppendOrigin.CLIENT,
                             internal_topics_allowed: bool = False,
                             produce_version: int | None = None,
                             transactional_id: str | None = None,
                             txn_operation: TransactionSupportedOperation =
                             TransactionSupportedOperation.DEFAULT_ERROR,
                             trace: ProduceTrace | None = None
                             ) -> dict[TopicPartition, PartitionResponse]:
        """Kafka's ``appendRecords``: append, then with ``acks=-1`` wait (up to
        ``timeout_ms``) until the ISR has every appended batch.  With a
        ``transactional_id`` the first batch of a producer's transaction on a partition
        is verified with (or, ``ADD_PARTITION``, added by) the transaction coordinator
        first (``add_partitions_to_txn_manager.verify_transactions``).  ``trace`` (a
        Produce while some topic is armed): the record tracer hears of the traced
        records appended and of the answer."""
        if required_acks not in VALID_ACKS:
            return {tp: PartitionResponse(error=Errors.INVALID_REQUIRED_ACKS)
                    for tp in entries}
        if self._unsafe_ack_delay_ms and origin is AppendOrigin.CLIENT and required_acks:
            return self._unsafe_ack_before_append(entries, produce_version)
        guards: dict[TopicPartition, VerificationGuard] | None = None
        refused: dict[TopicPartition, PartitionResponse] = {}
        if transactional_id and self.add_partitions_to_txn_manager is not None and (
                self.transaction_verification_enabled
                or txn_operation is TransactionSupportedOperation.ADD_PARTITION):
            guards, refused = await verify_transactions(
                self.add_partitions_to_txn_manager, self.partitions.get, transactional_id,
                entries, txn_operation)
            if refused:
                entries = {tp: r for tp, r in entries.items() if tp not in refused}
        appended = self.append_to_local_log(
            entries, origin=origin, required_acks=required_acks,
            internal_topics_allowed=internal_topics_allowed, produce_version=produce_version,
            verification_guards=guards, trace=trace)
        responses = {tp: resp for tp, (resp, _) in appended.items()}
        responses.update(refused)
        if required_acks != -1 or not any(r.error == Errors.NONE for r in responses.values()):
            if trace is not None and trace.records:
                self.tracer.produce_responded(trace, {tp: r.error
                                                      for tp, r in responses.items()})
            return responses
        statuses = {tp: ProducePartitionStatus(end, resp, acks_pending=resp.error == Errors.NONE)
                    for tp, (resp, end) in appended.items()}
        op = DelayedProduce(timeout_ms, statuses, self.get_partition)
        if not self.produce_purgatory.try_complete_else_watch(op, list(statuses)):
            await op.wait()
        if trace is not None and trace.records:
            self.tracer.produce_responded(trace, {tp: r.error for tp, r in responses.items()})
        return responses

    def _unsafe_ack_before_append(self, entries: dict[TopicPartition, bytes | None],
                                  produce_version: int | None
                                  ) -> dict[TopicPartition, PartitionResponse]:
        """The broken build (``UNSAFE_ACK_BEFORE_APPEND_ENV``): predict each partition's
        base offset, answer now, append later."""
        out = {}
        for tp, records in entries.items():
            p = self.partitions.get(tp)
            if p is None or not p.is_leader or not records:
                out[tp] = PartitionResponse(error=Errors.NOT_LEADER_OR_FOLLOWER)
                continue
            count = sum(h.last_offset_delta + 1 for _, h in iter_batches(records))
            pending = self._unsafe_pending.get(tp, 0)
            out[tp] = PartitionResponse(base_offset=p.log.log_end_offset + pending)
            self._unsafe_pending[tp] = pending + count

            def append(tp: TopicPartition = tp, records: bytes = records,
                       count: int = count) -> None:
                self._unsafe_pending[tp] -= count
                self.append_to_local_log({tp: records}, produce_version=produce_version)
            asyncio.get_running_loop().call_later(self._unsafe_ack_delay_ms / 1000, append)
        return out

    async def wait_for_isr(self, tp: TopicPartition, end_offset: int, timeout_ms: int) -> int:
        """Wait until the ISR has every record before ``end_offset`` (a DelayedProduce of
        one partition): the error code (NONE, REQUEST_TIMED_OUT, NOT_LEADER_OR_FOLLOWER,
        NOT_ENOUGH_REPLICAS_AFTER_APPEND)."""
        status = ProducePartitionStatus(end_offset, PartitionResponse())
        op = DelayedProduce(timeout_ms, {tp: status}, self.get_partition)
        if not self.produce_purgatory.try_complete_else_watch(op, [tp]):
            await op.wait()
        return status.response.error

    @property
    def txn_marker_listeners(self) -> list[TxnMarkerListener]:
        """Called with (topic, partition, producer id, committed) once a transaction
        marker is appended and replicated on a partition led here (the group
        coordinator applies or drops pending transactional offset commits)."""
        return self.txn_marker_writer.listeners

    async def append_txn_markers(self, markers: Sequence[TxnMarkerEntry],
                                 timeout_ms: int = TXN_MARKER_TIMEOUT_MS
                                 ) -> list[dict[TopicPartition, int]]:
        """WriteTxnMarkers on this broker: per marker, per partition, the error code after
        appending the control batch as leader (origin COORDINATOR, internal topics
        allowed) and waiting for the ISR (acks=-1).  NOT_LEADER_OR_FOLLOWER /
        UNKNOWN_TOPIC_OR_PARTITION where this broker does not lead the partition;
        INVALID_PRODUCER_EPOCH / TRANSACTION_COORDINATOR_FENCED from the producer state.
        The ``txn_marker_listeners`` hear of each partition that succeeded."""
        return await self.txn_marker_writer.append_txn_markers(markers, timeout_ms)

    # ------------------------------------------------------------------ fetch
    async def fetch_messages(self, params: FetchParams,
                             fetch_infos: Sequence[tuple[TopicPartition, PartitionFetchInfo]]
                             ) -> list[FetchPartitionData]:
        """Kafka's ``fetchMessages``: read now; answer at once if there is enough (or an
        error, or no wait allowed), else park a ``DelayedFetch`` until there is."""
        def read() -> LogReadResults:
            return self.read_from_local_log(params, fetch_infos)

        self._mark_fetches(fetch_infos)
        if params.is_from_follower:
            if params.replica_id not in {b.node_id for b in self.metadata.brokers()}:
                # Only registered brokers replicate (the lesson of CVE-2018-1288).
                return [FetchPartitionData(Errors.NOT_LEADER_OR_FOLLOWER) for _ in fetch_infos]
            self._update_follower_fetch_state(params.replica_id, fetch_infos)
        result = read()
        if (params.max_wait_ms <= 0 or not fetch_infos or result.has_error
                or result.bytes_read >= params.min_bytes):
            return self._fetched(params, fetch_infos, result.partitions)
        op = DelayedFetch(params.max_wait_ms, params.min_bytes, read)
        if not self.fetch_purgatory.try_complete_else_watch(op, [tp for tp, _ in fetch_infos]):
            await op.wait()
        assert op.result is not None
        return self._fetched(params, fetch_infos, op.result.partitions)

    def _mark_fetches(self, fetch_infos: Sequence[tuple[TopicPartition, PartitionFetchInfo]]
                      ) -> None:
        """TotalFetchRequestsPerSec: each partition of the fetch, marked once per topic."""
        stats = self.topic_stats
        if not stats.enabled:
            return
        partitions = self.partitions
        counts: dict[str, list[int]] = {}
        for tp, _ in fetch_infos:
            c = counts.get(tp[0])
            if c is None:
                c = counts[tp[0]] = [0, 0]
            c[0] += 1
            if tp in partitions:
                c[1] += 1
        for topic, (asked, hosted) in counts.items():
            stats.fetch_requests(topic, asked, hosted)

    def _fetched(self, params: FetchParams,
                 fetch_infos: Sequence[tuple[TopicPartition, PartitionFetchInfo]],
                 partitions: list[FetchPartitionData]) -> list[FetchPartitionData]:
        """A fetch's answer, counted: bytes out per partition (a follower's as
        replication bytes), the partitions that failed unexpectedly."""
        stats = self.topic_stats
        if stats.enabled:
            follower = params.is_from_follower
            for ((topic, index), _), data in zip(fetch_infos, partitions):
                if data.error:
                    if data.error not in EXPECTED_FETCH_ERRORS:
                        stats.failed_fetch(topic, (topic, index) in self.partitions)
                elif data.records:
                    stats.bytes_out(topic, len(data.records), follower)
        return partitions

    def _update_follower_fetch_state(
            self, replica_id: int,
            fetch_infos: Sequence[tuple[TopicPartition, PartitionFetchInfo]]) -> None:
        """A follower's fetch tells the leader where the follower's log ends."""
        now = self.time.milliseconds()
        for tp, info in fetch_infos:
            p = self.partitions.get(tp)
            if p is None or not p.is_leader or replica_id not in p.remote_replicas:
                continue
            if p.update_follower_fetch_state(replica_id, info.fetch_offset, now):
                self.partition_changed(tp)

    def read_from_local_log(self, params: FetchParams,
                            fetch_infos: Sequence[tuple[TopicPartition, PartitionFetchInfo]]
                            ) -> LogReadResults:
        partitions = []
        total = 0
        has_error = False
        for (topic, index), info in fetch_infos:
            budget = max(0, min(info.max_bytes, params.max_bytes - total))
            data = self.read(topic, index, info.fetch_offset, budget,
                             min_one_message=(total == 0), isolation=params.isolation_level,
                             current_leader_epoch=info.current_leader_epoch,
                             replica_id=params.replica_id, request=params.request)
            if data.error:
                has_error = True
            else:
                total += len(data.records)
            partitions.append(data)
        return LogReadResults(partitions, total, has_error)

    def leader_partition_or_error(self, topic: str, index: int,
                                  current_leader_epoch: int = -1) -> Partition | Errors:
        """This broker's partition if it leads it at ``current_leader_epoch`` (-1: any),
        else Kafka's error: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER,
        FENCED_LEADER_EPOCH (the caller is behind) or UNKNOWN_LEADER_EPOCH (ahead)."""
        p = self.partitions.get((topic, index))
        if p is None:
            return Errors.UNKNOWN_TOPIC_OR_PARTITION
        if current_leader_epoch >= 0:
            if current_leader_epoch < p.leader_epoch:
                return Errors.FENCED_LEADER_EPOCH
            if current_leader_epoch > p.leader_epoch:
                return Errors.UNKNOWN_LEADER_EPOCH
        if not p.is_leader:
            return Errors.NOT_LEADER_OR_FOLLOWER
        return p

    def read(self, topic: str, index: int, fetch_offset: int, max_bytes: int,
             min_one_message: bool, isolation: int, current_leader_epoch: int = -1,
             replica_id: int = -1, request: RequestContext | None = None
             ) -> FetchPartitionData:
        p = self.leader_partition_or_error(topic, index, current_leader_epoch)
        if isinstance(p, Errors):
            return FetchPartitionData(p)
        if replica_id >= 0 and replica_id not in p.remote_replicas:
            return FetchPartitionData(Errors.NOT_LEADER_OR_FOLLOWER)
        lg = p.log
        lso = lg.last_stable_offset  # read first: it never passes the HW read after it
        hw = lg.high_watermark
        result = FetchPartitionData(Errors.NONE, hw, lso, lg.log_start_offset)
        try:
            if fetch_offset < lg.log_start_offset or fetch_offset > lg.log_end_offset:
                result.error = Errors.OFFSET_OUT_OF_RANGE
                return result
            # Followers read to the log end; consumers only what is committed, and
            # read_committed consumers only what is decided (below the LSO).
            read_committed = replica_id < 0 and isolation == READ_COMMITTED
            if replica_id >= 0:
                bound = lg.log_end_offset
            else:
                bound = lso if read_committed else hw
            if read_committed:
                result.aborted_transactions = []
            if fetch_offset >= bound or (max_bytes <= 0 and not min_one_message):
                return result
            try:
                info = lg.read(fetch_offset, max_bytes, min_one_message=min_one_message,
                               max_offset=bound)
            except KafkaError as e:
                result.error = e.code
                return result
            if info.length <= 0:
                return result
            if read_committed:
                upper = lg.fetch_upper_bound_offset(info, bound)
                result.aborted_transactions = [
                    (t.producer_id, t.first_offset)
                    for t in lg.collect_aborted_transactions(fetch_offset, upper)]
            if info.length <= INLINE_READ_BYTES:
                result.records = info.read()
            else:
                result.records = FileRegion(info)
            return result
        finally:
            if p.trace is not None:  # armed for record tracing (record_tracer.py)
                p.trace.fetched(p, fetch_offset, result, replica_id, isolation, request)

    # ------------------------------------------------------------------ offsets
    def offset_for_timestamp(self, topic: str, index: int, timestamp: int,
                             isolation: int, current_leader_epoch: int = -1,
                             replica_id: int = -1) -> tuple[int, int, int, int]:
        """(error, timestamp, offset, leader_epoch) for ListOffsets.  Consumers see only
        committed offsets (the high watermark bounds "latest" and every lookup; the last
        stable offset with read_committed); a follower (``replica_id`` >= 0) asking for
        "latest" gets the log end offset."""
        p = self.leader_partition_or_error(topic, index, current_leader_epoch)
        if isinstance(p, Errors):
            return p, -1, -1, -1
        lg = p.log
        if replica_id >= 0:
            fetchable = lg.log_end_offset
        elif isolation == READ_COMMITTED:
            fetchable = lg.last_stable_offset
        else:
            fetchable = lg.high_watermark
        if timestamp == -1:
            return Errors.NONE, -1, fetchable, p.leader_epoch
        if timestamp in (-2, -4):
            return Errors.NONE, -1, lg.log_start_offset, p.leader_epoch
        found = lg.fetch_offset_by_timestamp(timestamp)
        if found is None or found.offset >= fetchable:
            return Errors.NONE, -1, -1, -1
        return Errors.NONE, found.timestamp, found.offset, found.leader_epoch

    def last_offset_for_leader_epoch(self, topic: str, index: int, leader_epoch: int,
                                     current_leader_epoch: int = -1) -> tuple[int, int, int]:
        """(error, epoch, end offset) for OffsetForLeaderEpoch: where ``leader_epoch`` ends
        in the leader's log (the largest epoch at or below it, and the start of the next
        one, or the log end for the latest)."""
        p = self.leader_partition_or_error(topic, index, current_leader_epoch)
        if isinstance(p, Errors):
            return p, -1, -1
        epoch, end = p.log.end_offset_for_epoch(leader_epoch)
        return Errors.NONE, epoch, end

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

