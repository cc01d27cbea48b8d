"""LatencyHistogram: bucket arithmetic, percentiles against exact nearest-rank values."""

from __future__ import annotations

import math
import random

import pytest

from millrace.client.perf import LatencyHistogram, bucket_bounds, bucket_index


def exact_percentile(values: list[int], p: float) -> int:
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def test_buckets_are_contiguous_and_narrow() -> None:
    previous_high = -1
    for index in range(6000):
        low, high = bucket_bounds(index)
        assert low == previous_high + 1, index
        assert high >= low
        # never wider than 1/128 of the bucket's lower bound (exact below 256)
        assert high - low + 1 <= max(1, low // 128), (index, low, high)
        previous_high = high


def test_every_value_lands_in_the_bucket_that_contains_it() -> None:
    for value in [*range(0, 5000), 2**20 - 1, 2**20, 2**20 + 1, 123_456_789, 2**45 + 17]:
        low, high = bucket_bounds(bucket_index(value))
        assert low <= value <= high, value


def test_small_values_are_exact() -> None:
    h = LatencyHistogram()
    h.record_all(range(1, 101))
    assert (h.count, h.total, h.min, h.max) == (100, 5050, 1, 100)
    assert h.mean == 50.5
    assert h.percentiles([0, 50, 95, 99, 99.9, 100]) == {
        0: 1.0, 50: 50.0, 95: 95.0, 99: 99.0, 99.9: 100.0, 100: 100.0}


def test_percentiles_within_bucket_precision_of_exact() -> None:
    rng = random.Random(7)
    # a latency-like spread: mostly ~1-5 ms (in microseconds), a long tail to seconds
    values = [int(rng.lognormvariate(7.5, 1.0)) for _ in range(20_000)]
    values += [rng.randrange(500_000, 3_000_000) for _ in range(50)]
    h = LatencyHistogram()
    h.record_all(values)
    assert h.count == len(values) and h.total == sum(values)
    assert (h.min, h.max) == (min(values), max(values))
    for p in (1, 10, 50, 90, 95, 99, 99.9, 99.99):
        exact = exact_percentile(values, p)
        assert abs(h.percentile(p) - exact) <= max(0.5, exact / 128), p


def test_huge_values_grow_the_counts() -> None:
    h = LatencyHistogram()
    h.record(2**60)
    h.record(3)
    assert h.percentile(100) == float(2**60)
    assert h.percentile(50) == 3.0


def test_merge_equals_recording_everything_in_one() -> None:
    rng = random.Random(3)
    a_values = [rng.randrange(0, 10**6) for _ in range(3000)]
    b_values = [rng.randrange(0, 10**9) for _ in range(3000)]
    a, b, both = LatencyHistogram(), LatencyHistogram(), LatencyHistogram()
    a.record_all(a_values)
    b.record_all(b_values)
    both.record_all(a_values + b_values)
    a.merge(b)
    a.merge(LatencyHistogram())  # merging an empty one changes nothing
    assert (a.count, a.total, a.min, a.max) == (both.count, both.total, both.min, both.max)
    assert all(a.percentile(p) == both.percentile(p) for p in (0, 25, 50, 75, 99, 100))
    empty = LatencyHistogram()
    empty.merge(b)
    assert (empty.min, empty.max, empty.count) == (b.min, b.max, b.count)


def test_empty_and_invalid() -> None:
    h = LatencyHistogram()
    assert (h.percentile(50), h.mean) == (0.0, 0.0)
    with pytest.raises(ValueError):
        h.record(-1)
    with pytest.raises(ValueError):
        h.percentile(100.5)
    with pytest.raises(ValueError):
        h.percentile(-1)
