"""Burrow's consumer status, evaluated over a window of each partition's commits.

LinkedIn's Burrow judges a consumer group not by one lag number but by how its commits
moved over the last few intervals (reference observability.md 4.1).  This module is that
judgement and nothing else: pure, no clock (``now_ms`` is an argument), no I/O.  The
broker's ``ConsumerLagMonitor`` feeds it the commits the group coordinator applies and the
log-end offsets it polls.

State, per (group, topic, partition): a sliding **window** of the last ``intervals``
commits, each ``CommitEntry(offset, commit timestamp ms, lag at receipt)``; a negative
lag is stored as 0, an unknown one (the log end was not known yet) as None.  A commit
that arrives less than ``min_distance_ms`` after the newest entry replaces that entry's
offset and lag and keeps its timestamp, so stored entries are at least ``min-distance``
apart (a consumer committing every 100 ms still fills the window at the spacing asked).
Per (topic, partition) and isolation (the high watermark, or the last stable offset that
read_committed groups are measured against): the last ``intervals`` polled log-end
offsets, one per refresh.

Partition rules (``partition_status``), applied only when the current lag exceeds
``allowed_lag`` (else OK), and only once the window is at least ``minimum_complete``
full (else OK); first match wins:

1. STOP -- the time since the last commit exceeds the span from the window's first to
   its last commit, and the last committed offset is not at or ahead of any recently
   polled log-end offset (a consumer that was caught up recently is idle, not stopped);
2. REWIND -- some commit is lower than the one before it and no later commit in the
   window got back to that earlier offset;
3. STALL -- (lag above ``allowed_lag`` in every window entry, otherwise OK) every commit
   in the window is the same offset;
4. WARN -- (same precondition) the offsets move but the lag never decreases from one
   entry to the next;
5. otherwise OK.

Entries whose lag is unknown are left out of the lag comparisons (3 and 4).

Group status: NOTFOUND (the group is not known), else the worst partition status, with
STOP, STALL and REWIND reported as ERR.  ``Status`` carries Burrow's enum numbers (0
NOTFOUND ... 6 REWIND, the values of ``burrow_kafka_consumer_status``).  A group also
reports ``maxlag`` (the partition with the highest current lag, the first one on a tie),
``totallag`` and ``complete`` (the share of its partitions whose window is full; 0 for a
group without partitions).

Thread ownership: the broker's event-loop thread (the monitor's).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from itertools import pairwise

TopicPartition = tuple[str, int]


class Status(IntEnum):
    """Burrow's ``StatusConstant``: the numbers are what the gauges expose."""

    NOTFOUND = 0
    OK = 1
    WARN = 2
    ERR = 3
    STOP = 4
    STALL = 5
    REWIND = 6


@dataclass(frozen=True, slots=True)
class BurrowConfig:
    intervals: int = 10             # commits kept per partition (Burrow's code default)
    min_distance_ms: int = 1000     # minimum spacing of stored commits
    minimum_complete: float = 0.0   # share of the window filled before rules apply
    allowed_lag: int = 0            # lag at or below this counts as none


@dataclass(slots=True)
class CommitEntry:
    offset: int
    timestamp_ms: int
    lag: int | None  # at receipt, never negative; None: the log end was unknown


@dataclass(frozen=True, slots=True)
class PartitionStatus:
    topic: str
    partition: int
    status: Status
    current_lag: int
    complete: float            # len(window) / intervals
    window: tuple[CommitEntry, ...]


@dataclass(frozen=True, slots=True)
class GroupStatus:
    group: str
    status: Status
    complete: float
    maxlag: PartitionStatus | None
    totallag: int
    partitions: tuple[PartitionStatus, ...]


# ---------------------------------------------------------------------- the rules
def partition_status(window: Sequence[CommitEntry], recent_log_ends: Iterable[int],
                     current_lag: int, now_ms: int, allowed_lag: int = 0) -> Status:
    """The rules of the module docstring over one window (oldest entry first)."""
    if not window or current_lag <= allowed_lag:
        return Status.OK
    if _stopped(window, recent_log_ends, now_ms):
        return Status.STOP
    if _rewound(window):
        return Status.REWIND
    lags = [e.lag for e in window if e.lag is not None]
    if any(lag <= allowed_lag for lag in lags):
        return Status.OK
    if all(e.offset == window[0].offset for e in window):
        return Status.STALL
    if all(later >= earlier for earlier, later in pairwise(lags)):
        return Status.WARN
    return Status.OK


def _stopped(window: Sequence[CommitEntry], recent_log_ends: Iterable[int],
             now_ms: int) -> bool:
    first, last = window[0], window[-1]
    if now_ms - last.timestamp_ms <= last.timestamp_ms - first.timestamp_ms:
        return False
    return not any(last.offset >= end for end in recent_log_ends)


def _rewound(window: Sequence[CommitEntry]) -> bool:
    for i in range(1, len(window)):
        before = window[i - 1].offset
        if window[i].offset < before and not any(
                e.offset >= before for e in window[i + 1:]):
            return True
    return False


# ---------------------------------------------------------------------- the state
class BurrowEvaluator:
    """Windows of commits and rings of polled log ends; evaluates groups on demand."""

    def __init__(self, config: BurrowConfig | None = None) -> None:
        self.config = config or BurrowConfig()
        if self.config.intervals < 1:
            raise ValueError("intervals must be at least 1")
        self._windows: dict[str, dict[TopicPartition, deque[CommitEntry]]] = {}
        self._log_ends: dict[tuple[TopicPartition, bool], deque[int]] = {}

    # ------------------------------------------------------------------ recording
    def record_commit(self, group: str, tp: TopicPartition, offset: int,
                      timestamp_ms: int, lag: int | None) -> None:
        """One applied commit of ``group`` for ``tp``; ``lag`` = log end - offset then
        (None if the log end was unknown)."""
        stored = None if lag is None else max(0, lag)
        window = self._windows.setdefault(group, {}).get(tp)
        if window is None:
            window = self._windows[group][tp] = deque(maxlen=self.config.intervals)
        if window and timestamp_ms - window[-1].timestamp_ms < self.config.min_distance_ms:
            window[-1].offset = offset
            window[-1].lag = stored
            return
        window.append(CommitEntry(offset, timestamp_ms, stored))

    def record_log_end(self, tp: TopicPartition, log_end: int,
                       read_committed: bool = False) -> None:
        """One polled log-end offset of ``tp`` (one per refresh interval): its high
        watermark, or its last stable offset when ``read_committed``."""
        key = (tp, read_committed)
        ring = self._log_ends.get(key)
        if ring is None:
            ring = self._log_ends[key] = deque(maxlen=self.config.intervals)
        ring.append(log_end)

    def window(self, group: str, tp: TopicPartition) -> tuple[CommitEntry, ...]:
        return tuple(self._windows.get(group, {}).get(tp, ()))

    def recent_log_ends(self, tp: TopicPartition,
                        read_committed: bool = False) -> tuple[int, ...]:
        return tuple(self._log_ends.get((tp, read_committed), ()))

    # ------------------------------------------------------------------ forgetting
    def retain_groups(self, groups: Iterable[str]) -> None:
        """Forget the windows of every group not in ``groups`` (deleted, expired, or its
        coordinator moved to another broker)."""
        keep = set(groups)
        for group in [g for g in self._windows if g not in keep]:
            del self._windows[group]

    def retain_partitions(self, group: str, partitions: Iterable[TopicPartition]) -> None:
        """Forget ``group``'s windows of partitions it no longer has offsets for."""
        windows = self._windows.get(group)
        if windows:
            keep = set(partitions)
            for tp in [tp for tp in windows if tp not in keep]:
                del windows[tp]

    def retain_log_ends(self, keys: Iterable[tuple[TopicPartition, bool]]) -> None:
        """Forget the rings of every (partition, read_committed) not in ``keys``."""
        keep = set(keys)
        for key in [k for k in self._log_ends if k not in keep]:
            del self._log_ends[key]

    # ------------------------------------------------------------------ evaluating
    def evaluate_partition(self, group: str, tp: TopicPartition, current_lag: int,
                           now_ms: int, read_committed: bool = False) -> PartitionStatus:
        cfg = self.config
        window = self.window(group, tp)
        complete = len(window) / cfg.intervals
        status = Status.OK
        if complete >= cfg.minimum_complete:
            status = partition_status(window, self.recent_log_ends(tp, read_committed),
                                      current_lag, now_ms, cfg.allowed_lag)
        return PartitionStatus(tp[0], tp[1], status, current_lag, complete, window)

    def evaluate(self, group: str, current_lags: Mapping[TopicPartition, int] | None,
                 now_ms: int, read_committed: bool = False) -> GroupStatus:
        """``group``'s status; ``current_lags``: its partitions (those it has committed
        offsets for) and their lag now, or None when the group is not known."""
        if current_lags is None:
            return GroupStatus(group, Status.NOTFOUND, 0.0, None, 0, ())
        partitions = tuple(self.evaluate_partition(group, tp, lag, now_ms, read_committed)
                           for tp, lag in sorted(current_lags.items()))
        return group_status(group, partitions)


def group_status(group: str, partitions: Sequence[PartitionStatus]) -> GroupStatus:
    """Fold partition statuses into the group's (module docstring)."""
    status = Status.OK
    maxlag: PartitionStatus | None = None
    for p in partitions:
        status = max(status, min(p.status, Status.ERR))
        if maxlag is None or p.current_lag > maxlag.current_lag:
            maxlag = p
    complete = (sum(1 for p in partitions if p.complete >= 1.0) / len(partitions)
                if partitions else 0.0)
    return GroupStatus(group, Status(status), complete, maxlag,
                       sum(p.current_lag for p in partitions), tuple(partitions))
