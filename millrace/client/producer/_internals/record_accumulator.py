"""Per-partition queues of batches between ``send`` and the Sender (Java ``RecordAccumulator``).

Theory of operation.  ``append`` (application threads) encodes a record straight into the
last batch of its partition's deque, or reserves ``batch.size`` bytes from the
``BufferPool`` (blocking up to ``max.block.ms``) and opens a new batch.  Records without
a partition ask the topic's ``BuiltInPartitioner`` for its sticky partition and tell it
how many bytes went in.  The Sender thread then asks

* ``ready(cluster, now)``: which leader nodes have a sendable batch -- the deque holds a
  full batch, or the first batch waited ``linger.ms`` (its retry backoff if it is being
  retried), or memory is exhausted, a flush is running, or the producer is closing --
  and how long until the next batch becomes sendable;
* ``drain(cluster, nodes, max_size, now)``: at most one batch per partition per node, up to
  ``max.request.size`` bytes, rotating the starting partition per node for fairness.
  With idempotence, sequence numbers are assigned here, and a retried batch is only
  drained when it is the oldest unacknowledged one of its partition;
* ``expired_batches(now)``: batches older than ``delivery.timeout.ms`` still in a deque.

Failed batches come back with ``reenqueue`` (to the front of the deque, or in sequence
order with idempotence) and oversized ones with ``split_and_reenqueue``.  Memory is
returned by ``deallocate`` once a batch is complete.

Thread-safety: one lock guards every deque, the topic table, the incomplete set and the
mute set; it is never held while blocking for memory or building a batch.  ``send``'s
one-call common case (``send_path.SendPath``) takes the same lock, without blocking, and
does what ``append`` does when the partition's last batch has room.
"""

from __future__ import annotations

import time as _time
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from millrace.client._backoff import ExponentialBackoff
from millrace.client.cluster import Cluster, Node, TopicPartition
from millrace.client.errors import IllegalStateError, KafkaTimeoutError
from millrace.client.producer._internals import journey
from millrace.client.producer._internals.buffer_pool import BufferPool
from millrace.client.producer._internals.built_in_partitioner import (
    BuiltInPartitioner,
    StickyPartitionInfo,
)
from millrace.client.producer._internals.future_record_metadata import FutureRecordMetadata
from millrace.client.producer._internals.idempotence_manager import NO_SEQUENCE
from millrace.client.producer._internals.producer_batch import ProducerBatch
from millrace.client.producer._internals.send_path import Lock
from millrace.client.producer._internals.transaction_manager import TransactionManager
from millrace.record import HEADER_SIZE, CompressionType
from millrace.record.default_record import record_size_upper_bound

UNKNOWN_PARTITION = -1
_FOREVER = 2**63 - 1
_COMPRESSION_ESTIMATE_FACTOR = 1.05


class ReadyCheckResult(NamedTuple):
    ready_nodes: set[Node]
    next_ready_check_delay_ms: int
    unknown_leader_topics: set[str]


class _TopicInfo:
    __slots__ = ("batches", "compression_ratio", "partitioner", "tps")

    def __init__(self, partitioner: BuiltInPartitioner) -> None:
        self.batches: dict[int, deque[ProducerBatch]] = {}
        self.tps: dict[int, TopicPartition] = {}
        self.partitioner = partitioner
        self.compression_ratio = 1.0


class RecordAccumulator:
    def __init__(
        self,
        *,
        buffer_pool: BufferPool,
        batch_size: int = 16384,
        compression: CompressionType = CompressionType.NONE,
        compression_level: int | None = None,
        linger_ms: int = 5,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1000,
        delivery_timeout_ms: int = 120_000,
        adaptive_partitioning: bool = True,
        partition_availability_timeout_ms: int = 0,
        transaction_manager: TransactionManager | None = None,
        rng: Any = None,
    ) -> None:
        self._free = buffer_pool
        self.batch_size = batch_size
        self.compression = CompressionType(compression)
        self._compression_level = compression_level
        self.linger_ms = linger_ms
        self._retry_backoff = ExponentialBackoff(retry_backoff_ms, 2,
                                                 max(retry_backoff_ms, retry_backoff_max_ms),
                                                 0.2, rng)
        self.delivery_timeout_ms = delivery_timeout_ms
        self._adaptive = adaptive_partitioning
        self._availability_timeout_ms = partition_availability_timeout_ms
        self._tm = transaction_manager
        self._rng = rng
        self._lock = Lock()  # threading.Lock's interface (send_path.Lock)
        self._topics: dict[str, _TopicInfo] = {}  # guarded by _lock
        self._incomplete: set[ProducerBatch] = set()  # guarded by _lock
        self._muted: set[TopicPartition] = set()  # guarded by _lock
        self._drain_index: dict[int, int] = {}  # sender thread only
        self._node_stats: dict[int, list[int]] = {}  # node -> [ready ms, drain ms]
        self._flushes_in_progress = 0  # guarded by _lock
        self._closed = False
        self._next_batch_expiry_ms = _FOREVER

    # ------------------------------------------------------------------ appending
    def _topic_info(self, topic: str) -> _TopicInfo:
        with self._lock:
            info = self._topics.get(topic)
            if info is None:
                partitioner = BuiltInPartitioner(topic, self.batch_size, self._rng)
                info = self._topics[topic] = _TopicInfo(partitioner)
            return info

    def _write_limit(self, info: _TopicInfo) -> int:
        if self.compression == CompressionType.NONE:
            return self.batch_size
        ratio = max(info.compression_ratio * _COMPRESSION_ESTIMATE_FACTOR, 0.01)
        return max(self.batch_size, int(self.batch_size / ratio))

    def append(self, topic: str, partition: int, timestamp: int, key: bytes | None,
               value: bytes | None, headers: Sequence[tuple[str, bytes | None]],
               callback: Any, max_time_to_block_ms: float, now_ms: int,
               cluster: Cluster, trace: journey.AppendTrace | None = None
               ) -> tuple[FutureRecordMetadata, bool]:
        """Add a record; returns (future, whether the sender should wake up).

        ``partition`` -1 means "the topic's sticky partition".  May block for memory.
        ``trace``: a traced record's journey, told where the record landed (journey.py).
        """
        info = self._topics.get(topic)
        if info is None:
            info = self._topic_info(topic)
        partitioner = info.partitioner
        lock = self._lock  # acquire/release: cheaper than ``with`` on this path
        reserved = 0
        started = 0.0
        try:
            while True:
                sticky: StickyPartitionInfo | None
                if partition < 0:
                    sticky = partitioner.current or partitioner.peek_current_partition_info(
                        cluster)
                    effective = sticky.partition
                else:
                    sticky = None
                    effective = partition
                lock.acquire()
                try:
                    if self._closed:
                        raise IllegalStateError("Producer closed while send in progress")
                    if sticky is not None and partitioner.current is not sticky:
                        continue  # another thread moved the sticky partition on
                    dq = info.batches.get(effective)
                    if dq is None:
                        dq = info.batches[effective] = deque()
                        info.tps[effective] = TopicPartition(topic, effective)
                    if dq:
                        last = dq[-1]
                        future = last.try_append(timestamp, key, value, headers, callback,
                                                 now_ms)
                        if future is not None:
                            if trace is not None:
                                trace.landed(last, future._index, False)
                            if sticky is not None:
                                sticky.produced_bytes += last.last_record_size
                                if sticky.produced_bytes >= partitioner.sticky_batch_size:
                                    partitioner.maybe_switch(sticky, cluster, last.full)
                            # wake the sender when a batch fills up (not on every record)
                            return future, last.full
                    if reserved:
                        batch = ProducerBatch(info.tps[effective], now_ms,
                                              self._write_limit(info),
                                              compression=self.compression,
                                              compression_level=self._compression_level)
                        future = batch.try_append(timestamp, key, value, headers, callback,
                                                  now_ms)
                        assert future is not None
                        batch.buffer_size, reserved = reserved, 0
                        if trace is not None:
                            trace.landed(batch, future._index, True)
                        dq.append(batch)
                        self._incomplete.add(batch)
                        if sticky is not None:
                            partitioner.update_partition_info(sticky, batch.last_record_size,
                                                              cluster, batch.full)
                        return future, True
                finally:
                    lock.release()
                # No room: reserve memory outside the lock (this may block).
                size = max(self.batch_size,
                           HEADER_SIZE + record_size_upper_bound(key, value, headers))
                if not started:
                    started = _time.monotonic()
                remaining = max_time_to_block_ms - (_time.monotonic() - started) * 1000.0
                reserved = self._free.allocate(size, max(remaining, 0.0))
        finally:
            if reserved:
                self._free.deallocate(reserved)

    # ------------------------------------------------------------------ readiness
    def ready(self, cluster: Cluster, now_ms: int) -> ReadyCheckResult:
        ready_nodes: set[Node] = set()
        unknown: set[str] = set()
        next_delay = _FOREVER
        with self._lock:
            # a commit or abort sends what is queued at once (Java: transactionCompleting)
            forced = (self._free.queued() > 0 or self._closed
                      or self._flushes_in_progress > 0
                      or (self._tm is not None and self._tm.is_completing()))
            for topic, info in self._topics.items():
                next_delay = self._partition_ready(cluster, now_ms, topic, info, next_delay,
                                                   ready_nodes, unknown, forced)
        return ReadyCheckResult(ready_nodes, next_delay, unknown)

    def _partition_ready(self, cluster: Cluster, now_ms: int, topic: str, info: _TopicInfo,
                         next_delay: int, ready_nodes: set[Node], unknown: set[str],
                         forced: bool) -> int:
        count = cluster.partition_count(topic) or 0
        queue_sizes: list[int] | None = None
        ids: list[int] = []
        if self._adaptive and count and len(info.batches) >= count:
            queue_sizes = []
        linger = self.linger_ms
        muted = self._muted
        for partition, dq in info.batches.items():
            tp = info.tps[partition]
            leader = cluster.leader_for(tp)
            if leader is not None and queue_sizes is not None and \
                    self._is_available(leader.id):
                queue_sizes.append(len(dq))
                ids.append(partition)
            if not dq:
                continue
            if leader is None:
                unknown.add(topic)
                continue
            if leader in ready_nodes or tp in muted:
                continue
            batch = dq[0]
            waited = now_ms - batch.last_attempt_ms
            backing_off = batch.attempts > 0 and waited < batch.retry_backoff_ms
            time_to_wait = batch.retry_backoff_ms if backing_off else linger
            sendable = len(dq) > 1 or batch.is_full() or waited >= time_to_wait or forced
            if sendable and not backing_off:
                ready_nodes.add(leader)
            else:
                next_delay = min(next_delay, max(time_to_wait - waited, 0))
        if queue_sizes is not None or info.partitioner.load_stats is not None:
            info.partitioner.update_partition_load_stats(queue_sizes, ids, count)
        return next_delay

    def _is_available(self, node_id: int) -> bool:
        if self._availability_timeout_ms <= 0:
            return True
        stats = self._node_stats.get(node_id)
        return stats is None or stats[0] - stats[1] <= self._availability_timeout_ms

    def update_node_latency_stats(self, node_id: int, now_ms: int, can_drain: bool) -> None:
        """The sender reports, per node with sendable data, whether it could drain it."""
        if self._availability_timeout_ms <= 0:
            return
        stats = self._node_stats.setdefault(node_id, [now_ms, now_ms])
        stats[0] = now_ms
        if can_drain:
            stats[1] = now_ms

    # ------------------------------------------------------------------ draining
    def drain(self, cluster: Cluster, nodes: Iterable[Node], max_size: int,
              now_ms: int) -> dict[int, list[ProducerBatch]]:
        out: dict[int, list[ProducerBatch]] = {}
        with self._lock:
            for node in nodes:
                batches = self._drain_one_node(cluster, node, max_size, now_ms)
                if batches:
                    out[node.id] = batches
        return out

    def _drain_one_node(self, cluster: Cluster, node: Node, max_size: int,
                        now_ms: int) -> list[ProducerBatch]:
        parts = cluster.partitions_for_node(node.id)
        if not parts:
            return []
        tm = self._tm
        if tm is not None and (not tm.has_producer_id() or tm.has_fatal_error()):
            return []
        ready: list[ProducerBatch] = []
        size = 0
        n = len(parts)
        start = self._drain_index.get(node.id, 0) % n
        for i in range(n):
            index = (start + i) % n
            self._drain_index[node.id] = index
            part = parts[index]
            info = self._topics.get(part.topic)
            if info is None:
                continue
            dq = info.batches.get(part.partition)
            if not dq:
                continue
            tp = info.tps[part.partition]
            if tp in self._muted:
                continue
            first = dq[0]
            if first.attempts > 0 and now_ms - first.last_attempt_ms < first.retry_backoff_ms:
                continue
            estimate = first.estimated_size_in_bytes()
            if self.compression != CompressionType.NONE:
                estimate = int(estimate * info.compression_ratio)
            if size + estimate > max_size and ready:
                break
            if tm is not None and self._should_stop_drain(first, tp, tm):
                continue
            batch = dq.popleft()
            if batch.journeys is not None:  # a traced record: why it goes now
                journey.batch_ready(batch, journey.ready_reason(self, batch, bool(dq), now_ms),
                                    self.linger_ms, now_ms)
            if tm is not None and not batch.has_sequence:
                tm.maybe_update_producer_id_and_epoch(tp)
                batch.set_producer_state(tm.producer_id, tm.producer_epoch,
                                         tm.sequence_number(tp), tm.is_transactional)
                tm.increment_sequence_number(tp, batch.record_count)
                tm.add_in_flight_batch(batch)
            batch.close()
            batch.drained(now_ms)
            size += estimate
            ready.append(batch)
        return ready

    @staticmethod
    def _should_stop_drain(first: ProducerBatch, tp: TopicPartition,
                           tm: TransactionManager) -> bool:
        if not tm.is_send_to_partition_allowed(tp):
            return True  # not yet added to the transaction (AddPartitionsToTxn first)
        if not first.has_sequence:
            if tm.has_stale_producer_id_and_epoch(tp) and tm.has_in_flight_batches(tp):
                return True  # old-epoch batches must finish before sequence 0 goes out
            if tm.has_unresolved_sequence(tp):
                return True
        first_in_flight = tm.first_in_flight_sequence(tp)
        # A retried batch goes only when it is the oldest unacknowledged one.
        return (first_in_flight != NO_SEQUENCE and first.has_sequence
                and first.base_sequence != first_in_flight)

    def record_built(self, batch: ProducerBatch) -> None:
        """Feed a built batch's compression ratio into the topic's estimate."""
        if self.compression == CompressionType.NONE:
            return
        info = self._topics.get(batch.topic_partition.topic)
        if info is None:
            return
        observed = batch.compression_ratio
        current = info.compression_ratio
        if observed > current:
            info.compression_ratio = max(current + 0.05, observed)
        elif observed < current:
            info.compression_ratio = max(current - 0.005, observed)

    # ------------------------------------------------------------------ retries
    def reenqueue(self, batch: ProducerBatch, now_ms: int) -> None:
        batch.reenqueued(now_ms, self._retry_backoff.backoff(batch.attempts))
        with self._lock:
            dq = self._deque(batch.topic_partition)
            if self._tm is not None and batch.has_sequence:
                self._insert_in_sequence_order(dq, batch)
            else:
                dq.appendleft(batch)

    @staticmethod
    def _insert_in_sequence_order(dq: deque[ProducerBatch], batch: ProducerBatch) -> None:
        for i, queued in enumerate(dq):
            if not queued.has_sequence or queued.base_sequence > batch.base_sequence:
                dq.insert(i, batch)
                return
        dq.append(batch)

    def _deque(self, tp: TopicPartition) -> deque[ProducerBatch]:
        # called with _lock held
        info = self._topics.get(tp.topic)
        if info is None:
            info = self._topics[tp.topic] = _TopicInfo(
                BuiltInPartitioner(tp.topic, self.batch_size, self._rng))
        dq = info.batches.get(tp.partition)
        if dq is None:
            dq = info.batches[tp.partition] = deque()
            info.tps[tp.partition] = tp
        return dq

    def split_and_reenqueue(self, big: ProducerBatch) -> int:
        """Split a batch the broker found too large; returns the number of new batches."""
        info = self._topics.get(big.topic_partition.topic)
        if info is not None:
            info.compression_ratio = max(1.0, big.compression_ratio)
        tm = self._tm
        had_sequence = big.has_sequence
        sequence = big.base_sequence
        producer_id, producer_epoch = big.producer_id, big.producer_epoch
        batches = big.split(self.batch_size)
        with self._lock:
            self._incomplete.discard(big)
            dq = self._deque(big.topic_partition)
            for batch in batches:
                self._incomplete.add(batch)
                if had_sequence and tm is not None:
                    batch.set_producer_state(producer_id, producer_epoch, sequence,
                                             big.is_transactional)
                    sequence += batch.record_count
                    tm.add_in_flight_batch(batch)
            for batch in reversed(batches):
                if had_sequence and tm is not None:
                    self._insert_in_sequence_order(dq, batch)
                else:
                    dq.appendleft(batch)
        return len(batches)

    # ------------------------------------------------------------------ expiry & cleanup
    def expired_batches(self, now_ms: int) -> list[ProducerBatch]:
        expired: list[ProducerBatch] = []
        timeout = self.delivery_timeout_ms
        with self._lock:
            for info in self._topics.values():
                for dq in info.batches.values():
                    while dq:
                        batch = dq[0]
                        if batch.has_reached_delivery_timeout(timeout, now_ms):
                            dq.popleft()
                            batch.close()
                            expired.append(batch)
                        else:
                            self.maybe_update_next_batch_expiry_time(batch)
                            break
        return expired

    def maybe_update_next_batch_expiry_time(self, batch: ProducerBatch) -> None:
        expiry = batch.created_ms + self.delivery_timeout_ms
        if expiry < self._next_batch_expiry_ms:
            self._next_batch_expiry_ms = expiry

    def reset_next_batch_expiry_time(self) -> None:
        self._next_batch_expiry_ms = _FOREVER

    @property
    def next_expiry_time_ms(self) -> int:
        return self._next_batch_expiry_ms

    def deallocate(self, batch: ProducerBatch) -> None:
        with self._lock:
            self._incomplete.discard(batch)
        if batch.buffer_size and not batch.is_split_batch:
            size, batch.buffer_size = batch.buffer_size, 0
            self._free.deallocate(size)

    def mute(self, tp: TopicPartition) -> None:
        with self._lock:
            self._muted.add(tp)

    def unmute(self, tp: TopicPartition) -> None:
        with self._lock:
            self._muted.discard(tp)

    # ------------------------------------------------------------------ flush & close
    def begin_flush(self) -> None:
        with self._lock:
            self._flushes_in_progress += 1

    def await_flush_completion(self, timeout_s: float | None = None) -> None:
        deadline = None if timeout_s is None else _time.monotonic() + timeout_s
        try:
            with self._lock:
                batches = list(self._incomplete)
            for batch in batches:
                remaining = None if deadline is None else max(deadline - _time.monotonic(), 0)
                if not batch.produce_future.wait(remaining):
                    raise KafkaTimeoutError(f"flush did not complete within {timeout_s} s")
        finally:
            with self._lock:
                self._flushes_in_progress -= 1

    def flush_in_progress(self) -> bool:
        return self._flushes_in_progress > 0

    def has_undrained(self) -> bool:
        with self._lock:
            return any(dq for info in self._topics.values() for dq in info.batches.values())

    def has_incomplete(self) -> bool:
        with self._lock:
            return bool(self._incomplete)

    def incomplete_batches(self) -> list[ProducerBatch]:
        with self._lock:
            return list(self._incomplete)

    def close(self) -> None:
        """No more appends; every queued batch becomes sendable."""
        with self._lock:
            self._closed = True
        self._free.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def abort_undrained_batches(self, error: Exception) -> None:
        """Fail the batches still in deques (not in flight)."""
        aborted: list[ProducerBatch] = []
        with self._lock:
            for info in self._topics.values():
                for dq in info.batches.values():
                    aborted.extend(dq)
                    dq.clear()
        for batch in aborted:
            batch.close()
            batch.abort(error)
            self.deallocate(batch)

    def abort_incomplete_batches(self, error: Exception) -> None:
        """Fail every incomplete batch (force close)."""
        with self._lock:
            batches = list(self._incomplete)
            for info in self._topics.values():
                for dq in info.batches.values():
                    dq.clear()
        for batch in batches:
            batch.close()
            batch.abort(error)
            self.deallocate(batch)
