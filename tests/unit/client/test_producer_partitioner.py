"""Kafka's default partitioning: murmur2 for keys, KIP-794 uniform sticky otherwise."""

from __future__ import annotations

import random
import warnings
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from millrace.client.cluster import Cluster, Node, PartitionInfo
from millrace.client.producer._internals.built_in_partitioner import (
    BuiltInPartitioner,
    murmur2,
    partition_for_key,
    to_positive,
)

with warnings.catch_warnings():  # kafka-python's import-time DeprecationWarning
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.partitioner.default import murmur2 as kafka_python_murmur2

# Kafka's published vectors (UtilsTest.testMurmur2, kafka-protocol.md section 6.1).
VECTORS = [
    ("21", -973932308),
    ("foobar", -790332482),
    ("abc", 479470107),
    ("a-little-bit-long-string", -985981536),
    ("a-little-bit-longer-string", -1486304829),
]


@pytest.mark.parametrize(("key", "expected"), VECTORS)
def test_murmur2_matches_kafkas_vectors(key: str, expected: int) -> None:
    assert murmur2(key.encode()) == expected


def test_murmur2_of_empty_and_tail_lengths() -> None:
    # every tail length (0-3) agrees with kafka-python's port of Java's function
    for n in range(0, 12):
        data = bytes(range(n))
        assert murmur2(data) & 0x7FFFFFFF == kafka_python_murmur2(data) & 0x7FFFFFFF


@given(st.binary(max_size=64))
def test_murmur2_agrees_with_kafka_python(data: bytes) -> None:
    # kafka-python returns the same 32 bits, unsigned
    assert murmur2(data) & 0xFFFFFFFF == kafka_python_murmur2(data)


def test_placement_of_10000_keys_equals_kafka_python() -> None:
    rng = random.Random(7)
    for _ in range(10_000):
        key = rng.randbytes(rng.randrange(1, 40))
        for partitions in (1, 3, 7, 64):
            assert partition_for_key(key, partitions) == \
                (kafka_python_murmur2(key) & 0x7FFFFFFF) % partitions


def test_to_positive_masks_the_sign_bit() -> None:
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-2147483648) == 0
    assert to_positive(5) == 5


def _cluster(partitions: int, leaderless: tuple[int, ...] = ()) -> Cluster:
    node = Node(0, "h", 1)
    return Cluster([node], [PartitionInfo("t", i, None if i in leaderless else node)
                            for i in range(partitions)])


def test_sticky_partition_stays_until_batch_size_and_a_full_batch() -> None:
    cluster = _cluster(4)
    p = BuiltInPartitioner("t", 1000, random.Random(1))
    info = p.peek_current_partition_info(cluster)
    p.update_partition_info(info, 999, cluster, enable_switch=True)
    assert p.current is info  # below batch.size
    p.update_partition_info(info, 1, cluster, enable_switch=False)
    assert p.current is info  # batch.size reached but the batch is not full
    p.update_partition_info(info, 1, cluster, enable_switch=True)
    assert p.current is not info  # switched


def test_sticky_partition_switches_at_twice_batch_size_even_if_not_full() -> None:
    cluster = _cluster(4)
    p = BuiltInPartitioner("t", 1000, random.Random(1))
    info = p.peek_current_partition_info(cluster)
    p.update_partition_info(info, 1999, cluster, enable_switch=False)
    assert p.current is info
    p.update_partition_info(info, 1, cluster, enable_switch=False)
    assert p.current is not info


def test_uniform_choice_skips_partitions_without_leader() -> None:
    cluster = _cluster(4, leaderless=(1, 3))
    p = BuiltInPartitioner("t", 100, random.Random(3))
    picks = Counter(p.next_partition(cluster) for _ in range(2000))
    assert set(picks) == {0, 2}
    assert 800 < picks[0] < 1200


def test_no_available_partition_falls_back_to_any() -> None:
    cluster = _cluster(3, leaderless=(0, 1, 2))
    p = BuiltInPartitioner("t", 100, random.Random(3))
    assert {p.next_partition(cluster) for _ in range(200)} == {0, 1, 2}


def test_adaptive_choice_prefers_shorter_queues() -> None:
    cluster = _cluster(3)
    p = BuiltInPartitioner("t", 100, random.Random(5))
    # queue lengths 0, 3, 1 -> weights 4, 1, 3
    p.update_partition_load_stats([0, 3, 1], [0, 1, 2], 3)
    assert p.load_stats == ([4, 5, 8], [0, 1, 2])
    picks = Counter(p.next_partition(cluster) for _ in range(8000))
    assert picks[0] > picks[2] > picks[1]
    assert 3600 < picks[0] < 4400 and 600 < picks[1] < 1400


def test_equal_queues_mean_uniform_choice() -> None:
    p = BuiltInPartitioner("t", 100)
    p.update_partition_load_stats([2, 2, 2], [0, 1, 2], 3)
    assert p.load_stats is None
    # ... unless a partition was left out (unavailable leader)
    p.update_partition_load_stats([2, 2], [0, 2], 3)
    assert p.load_stats == ([1, 2], [0, 2])


def test_single_partition_topic_needs_no_statistics() -> None:
    p = BuiltInPartitioner("t", 100)
    p.update_partition_load_stats([5], [0], 1)
    assert p.load_stats is None
