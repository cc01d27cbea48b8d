"""Kafka's default partitioning (Java ``BuiltInPartitioner`` and ``Utils.murmur2``).

Keyed records: ``toPositive(murmur2(key)) % partitions`` with Kafka's murmur2 (seed
0x9747b28c, 4-byte little-endian blocks, signed 32-bit result; ``toPositive`` masks the
sign bit).  Byte-for-byte the same placement as the Java client and librdkafka's
``murmur2_random``.

Records without a key (or every record with ``partitioner.ignore.keys``) use KIP-794's
uniform sticky partitioning: one "sticky" partition per topic receives records until
about ``batch.size`` bytes went to it, then another is picked.  The switch waits until
the partition's current batch is full (or twice ``batch.size`` went in) so batches are
not cut into fractions.  The next partition is chosen at random among partitions with a
leader -- or, with ``partitioner.adaptive.partitioning.enable``, weighted towards
partitions with shorter queues: weight = (longest queue + 1) - queue length, drawn from a
cumulative frequency table the accumulator refreshes on every ``ready`` pass.
Partitions whose leader has not been drainable for ``partitioner.availability.timeout.ms``
are left out of that table.

Thread-safety: the sticky choice is read by application threads and replaced
atomically (one attribute); the load table is written by the sender thread.
"""

from __future__ import annotations

import bisect
import random
import struct
from typing import TYPE_CHECKING

from millrace.client.cluster import Cluster

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


def py_murmur2(data: bytes) -> int:
    """Kafka's murmur2 of ``data`` as a signed 32-bit int (the reference for the C
    ``_speedups.murmur2``, which ``murmur2`` is when it is built)."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    blocks = length // 4
    if blocks:
        for k in struct.unpack_from(f"<{blocks}I", data):
            k = (k * _M) & _MASK
            k ^= k >> 24
            k = (k * _M) & _MASK
            h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    if tail:
        i = blocks * 4
        if tail == 3:
            h ^= data[i + 2] << 16
        if tail >= 2:
            h ^= data[i + 1] << 8
        h ^= data[i]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


if TYPE_CHECKING:
    murmur2 = py_murmur2
else:
    try:
        from millrace.client.producer._internals._speedups import murmur2
    except ImportError:  # no compiler at install time, or MILLRACE_NO_SPEEDUPS set
        murmur2 = py_murmur2


def to_positive(n: int) -> int:
    """Java ``Utils.toPositive``: clear the sign bit (not ``abs``)."""
    return n & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


class StickyPartitionInfo:
    __slots__ = ("partition", "produced_bytes")

    def __init__(self, partition: int) -> None:
        self.partition = partition
        self.produced_bytes = 0


class BuiltInPartitioner:
    """Sticky partition choice for one topic."""

    def __init__(self, topic: str, sticky_batch_size: int,
                 rng: random.Random | None = None) -> None:
        self.topic = topic
        self.sticky_batch_size = sticky_batch_size
        self._random = rng or random.Random()
        self.current: StickyPartitionInfo | None = None  # the sticky choice
        # cumulative frequency table and the partition ids it maps to (None = uniform)
        self._load: tuple[list[int], list[int]] | None = None

    def peek_current_partition_info(self, cluster: Cluster) -> StickyPartitionInfo:
        info = self.current
        if info is not None:
            return info
        info = StickyPartitionInfo(self.next_partition(cluster))
        self.current = info
        return info

    def is_current(self, info: StickyPartitionInfo) -> bool:
        return self.current is info

    def next_partition(self, cluster: Cluster) -> int:
        r = self._random.getrandbits(31)
        load = self._load
        if load is None:
            available = cluster.available_partitions_for_topic(self.topic)
            if available:
                return available[r % len(available)].partition
            count = cluster.partition_count(self.topic) or 1
            return r % count
        table, ids = load
        weighted = r % table[-1]
        # the first cumulative value strictly greater than the draw
        return ids[bisect.bisect_right(table, weighted)]

    def update_partition_info(self, info: StickyPartitionInfo, appended_bytes: int,
                              cluster: Cluster, enable_switch: bool) -> None:
        """Count bytes sent to the sticky partition; maybe move on to another one.

        The accumulator inlines the counting and calls ``maybe_switch`` itself once
        ``sticky_batch_size`` is reached; this is the readable form of the same rule.
        """
        info.produced_bytes += appended_bytes
        if info.produced_bytes >= self.sticky_batch_size:
            self.maybe_switch(info, cluster, enable_switch)

    def maybe_switch(self, info: StickyPartitionInfo, cluster: Cluster,
                     enable_switch: bool) -> None:
        """Switch once ``batch.size`` went in and the batch is full (or twice that)."""
        if self.current is not info:
            return
        produced = info.produced_bytes
        if (produced >= self.sticky_batch_size and enable_switch) or \
                produced >= 2 * self.sticky_batch_size:
            self.current = StickyPartitionInfo(self.next_partition(cluster))

    def update_partition_load_stats(self, queue_sizes: list[int] | None,
                                    partition_ids: list[int], total_partitions: int) -> None:
        """Queue lengths (in batches) of the partitions that may be chosen."""
        if queue_sizes is None or not queue_sizes or total_partitions < 2:
            self._load = None
            return
        longest = max(queue_sizes)
        if len(queue_sizes) == total_partitions and min(queue_sizes) == longest:
            self._load = None  # all equal and none left out: plain uniform choice
            return
        table: list[int] = []
        running = 0
        for size in queue_sizes:
            running += longest + 1 - size
            table.append(running)
        self._load = (table, list(partition_ids))

    @property
    def load_stats(self) -> tuple[list[int], list[int]] | None:
        return self._load
