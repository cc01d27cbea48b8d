"""Where ``reset_group_offsets`` moves a group's committed offsets (the rules of
``kafka-consumer-groups --reset-offsets``).

Pure functions: the admin client gathers, per partition, the earliest and latest offset,
the committed offset and (for ``to_datetime``) the offset of the first record at or after
the timestamp, and ``reset_offset`` picks the new position:

* ``to_earliest`` / ``to_latest``: the log start / log end offset;
* ``to_offset(n)`` and ``shift_by(n)`` (from the committed offset, which must exist): the
  result is clamped into [earliest, latest], as Kafka does;
* ``to_datetime(ts)``: the first offset whose timestamp is >= ts, else the log end;
* ``to_current``: the committed offset, else the log end.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from enum import Enum

from millrace.client.admin.results import IllegalArgumentError
from millrace.client.cluster import TopicPartition


class ResetKind(Enum):
    EARLIEST = "to-earliest"
    LATEST = "to-latest"
    OFFSET = "to-offset"
    DATETIME = "to-datetime"
    SHIFT_BY = "shift-by"
    CURRENT = "to-current"


@dataclass(frozen=True)
class OffsetResetSpec:
    kind: ResetKind
    value: int = 0

    @classmethod
    def to_earliest(cls) -> OffsetResetSpec:
        return cls(ResetKind.EARLIEST)

    @classmethod
    def to_latest(cls) -> OffsetResetSpec:
        return cls(ResetKind.LATEST)

    @classmethod
    def to_current(cls) -> OffsetResetSpec:
        return cls(ResetKind.CURRENT)

    @classmethod
    def to_offset(cls, offset: int) -> OffsetResetSpec:
        if offset < 0:
            raise IllegalArgumentError(f"an offset must not be negative, got {offset}")
        return cls(ResetKind.OFFSET, offset)

    @classmethod
    def shift_by(cls, delta: int) -> OffsetResetSpec:
        return cls(ResetKind.SHIFT_BY, delta)

    @classmethod
    def to_datetime(cls, when: _dt.datetime | int) -> OffsetResetSpec:
        """A timestamp in ms since the epoch, or a datetime (naive = local time)."""
        ms = when if isinstance(when, int) else int(when.timestamp() * 1000)
        if ms < 0:
            raise IllegalArgumentError(f"a timestamp must not be negative, got {ms}")
        return cls(ResetKind.DATETIME, ms)

    @property
    def needs_committed(self) -> bool:
        return self.kind in (ResetKind.SHIFT_BY, ResetKind.CURRENT)

    @property
    def needs_timestamp_lookup(self) -> bool:
        return self.kind is ResetKind.DATETIME

    def __str__(self) -> str:
        if self.kind is ResetKind.DATETIME:
            when = _dt.datetime.fromtimestamp(self.value / 1000, _dt.UTC)
            return f"{self.kind.value} {when.isoformat(timespec='milliseconds')}"
        if self.kind in (ResetKind.OFFSET, ResetKind.SHIFT_BY):
            return f"{self.kind.value} {self.value}"
        return self.kind.value


@dataclass(frozen=True)
class PartitionOffsets:
    """What is known of one partition when its new position is chosen."""

    earliest: int
    latest: int
    committed: int | None = None
    by_timestamp: int | None = None   # ListOffsets(ts): -1 / None = no such record


def _clamp(offset: int, known: PartitionOffsets) -> int:
    return min(max(offset, known.earliest), known.latest)


def reset_offset(spec: OffsetResetSpec, tp: TopicPartition, known: PartitionOffsets) -> int:
    kind = spec.kind
    if kind is ResetKind.EARLIEST:
        return known.earliest
    if kind is ResetKind.LATEST:
        return known.latest
    if kind is ResetKind.OFFSET:
        return _clamp(spec.value, known)
    if kind is ResetKind.SHIFT_BY:
        if known.committed is None or known.committed < 0:
            raise IllegalArgumentError(
                f"cannot shift the offset of partition {tp}: the group has no committed "
                "offset for it")
        return _clamp(known.committed + spec.value, known)
    if kind is ResetKind.DATETIME:
        found = known.by_timestamp
        return found if found is not None and found >= 0 else known.latest
    # CURRENT
    if known.committed is not None and known.committed >= 0:
        return known.committed
    return known.latest
