"""A latency histogram with bounded relative error (the idea of HdrHistogram, simplified).

Values are non-negative integers (the perf tools record microseconds).  Buckets are
log-linear: below 256 every value has its own bucket; above, each power of two
``[2^k, 2^(k+1))`` is cut into 128 equal sub-buckets, so a bucket is never wider than
1/128 of its lower bound and a percentile read back is within 0.8% of the exact one.
Index arithmetic, for ``v >= 256``::

    shift = bit_length(v) - 8            v >> shift is in [128, 256)
    index = (shift << 7) + (v >> shift)  continues at 256, 384, 512, ... per octave

Recording is a few integer operations and one list increment, so a run of any length
keeps ~30 KiB of counts instead of one float per record.  Count, sum, min and max are
kept exactly.  Not thread-safe: one thread records (the producer's Sender thread runs
the perf callbacks); others read only after it is done.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

_SUB_BITS = 7
_SUB_COUNT = 1 << _SUB_BITS  # sub-buckets per octave above the linear range
_LINEAR = _SUB_COUNT << 1  # values below this have a bucket each
_INITIAL_BUCKETS = (30 << _SUB_BITS) + _LINEAR  # values up to ~2^37 without growing


def bucket_index(value: int) -> int:
    if value < _LINEAR:
        return value
    shift = value.bit_length() - (_SUB_BITS + 1)
    return (shift << _SUB_BITS) + (value >> shift)


def bucket_bounds(index: int) -> tuple[int, int]:
    """The smallest and largest value that land in bucket ``index``."""
    if index < _LINEAR:
        return index, index
    shift = (index >> _SUB_BITS) - 1
    mantissa = index - (shift << _SUB_BITS)
    return mantissa << shift, ((mantissa + 1) << shift) - 1


class LatencyHistogram:
    """Counts of integer values in log-linear buckets; exact count, sum, min and max."""

    __slots__ = ("_counts", "count", "max", "min", "total")

    def __init__(self) -> None:
        self._counts = [0] * _INITIAL_BUCKETS
        self.count = 0
        self.total = 0
        self.min = 0
        self.max = 0

    def record(self, value: int) -> None:
        if value < 0:
            raise ValueError(f"a latency cannot be negative: {value}")
        if value < _LINEAR:
            index = value
        else:
            shift = value.bit_length() - (_SUB_BITS + 1)
            index = (shift << _SUB_BITS) + (value >> shift)
        counts = self._counts
        if index >= len(counts):
            counts.extend([0] * (index + 1 - len(counts)))
        counts[index] += 1
        if self.count == 0 or value < self.min:
            self.min = value
        if value > self.max:
            self.max = value
        self.count += 1
        self.total += value

    def record_all(self, values: Iterable[int]) -> None:
        for v in values:
            self.record(v)

    def merge(self, other: LatencyHistogram) -> None:
        """Add ``other``'s counts to this histogram."""
        if other.count == 0:
            return
        if len(other._counts) > len(self._counts):
            self._counts.extend([0] * (len(other._counts) - len(self._counts)))
        for i, c in enumerate(other._counts):
            if c:
                self._counts[i] += c
        self.min = other.min if self.count == 0 else min(self.min, other.min)
        self.max = max(self.max, other.max)
        self.count += other.count
        self.total += other.total

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0

    def percentile(self, p: float) -> float:
        """The value at or below which ``p`` percent of the recorded values lie.

        Nearest rank: the ``ceil(p/100 * count)``-th smallest value (at least the first);
        reported as the middle of its bucket, clamped to the exact min and max (so a
        value below 256 is exact), except that the first rank is the exact min and the
        last the exact max.  0 when empty.
        """
        if not 0.0 <= p <= 100.0:
            raise ValueError(f"a percentile is between 0 and 100, not {p}")
        if self.count == 0:
            return 0.0
        rank = max(1, math.ceil(p / 100.0 * self.count))
        if rank == 1:
            return float(self.min)
        if rank >= self.count:
            return float(self.max)
        seen = 0
        for index, c in enumerate(self._counts):
            seen += c
            if seen >= rank:
                low, high = bucket_bounds(index)
                return float(min(max((low + high) / 2.0, self.min), self.max))
        return float(self.max)  # unreachable: the counts sum to self.count

    def percentiles(self, ps: Iterable[float]) -> dict[float, float]:
        return {p: self.percentile(p) for p in ps}
