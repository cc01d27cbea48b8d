"""Offsets and offset ranges: the planning half of the connector, free of I/O.

Theory of operation.  A streaming query's position is a ``PartitionOffsets`` map
``{TopicPartition: next offset to read}``, stored by Spark in its checkpoint as JSON in
the layout of Spark's Kafka source, ``{"orders": {"0": 123, "1": 456}}`` (topics and
partitions sorted, so equal positions have equal JSON).  A micro-batch is a pair
(start, end) of such maps; ``plan_ranges`` turns it into one ``OffsetRange`` [from, until)
per partition, ``split_ranges`` cuts big ranges into more Spark partitions
(``minPartitions``) and ``group_ranges`` packs many small ones into fewer
(``maxPartitions``: one task per core instead of one per topic partition, so a
micro-batch pays each task's fixed cost -- scheduling, a Python worker round trip, a
consumer, a cache block -- once per core).  ``rate_limit`` moves an end map back so the batch holds at most N
records, sharing the budget among partitions in proportion to their backlog.

Everything the cluster knows comes through an ``OffsetLookup`` (the driver's
``KafkaOffsetReader``; small fakes in the unit tests): which partitions the subscription
covers now, earliest and latest offsets, and offsets by timestamp.  A lookup answers only
for partitions that exist; a partition missing from an answer is gone.

Data loss -- a partition that vanished, offsets deleted before they were read, a log that
went backwards -- is reported through ``report_data_loss``: with ``failOnDataLoss=true``
it raises ``DataLossError`` naming topic, partition and offsets, otherwise it logs a
warning and the plan continues from what is still there.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from millrace.client.cluster import TopicPartition
from millrace.common.errors import MillraceError
from millrace.spark.options import (
    EARLIEST,
    LATEST,
    EarliestOffsets,
    GlobalTimestamp,
    LatestOffsets,
    OffsetSpec,
    SpecificOffsets,
    SpecificTimestamps,
)

log = logging.getLogger(__name__)

PartitionOffsets = dict[TopicPartition, int]

DATA_LOSS_HINT = ("Some data may have been lost because it is not available in Kafka any "
                  "more: it aged out (retention), was deleted, or the topic was deleted. If "
                  "the query should continue from the earliest data still available, set the "
                  "source option 'failOnDataLoss' to 'false'.")


class DataLossError(MillraceError):
    """Records a query should read are gone (``failOnDataLoss=true``)."""


class OffsetLookup(Protocol):
    def topic_partitions(self) -> set[TopicPartition]:
        """The partitions the subscription covers now."""
        ...

    def earliest_offsets(self, partitions: Iterable[TopicPartition]) -> PartitionOffsets:
        ...

    def latest_offsets(self, partitions: Iterable[TopicPartition]) -> PartitionOffsets:
        ...

    def offsets_for_times(self, timestamps: Mapping[TopicPartition, int]
                          ) -> dict[TopicPartition, int | None]:
        """Per partition the first offset with a timestamp >= the one given (None: none)."""
        ...


def report_data_loss(message: str, fail_on_data_loss: bool) -> None:
    if fail_on_data_loss:
        raise DataLossError(f"{message}. {DATA_LOSS_HINT}")
    log.warning("%s. Some data may have been lost; continuing because failOnDataLoss is "
                "false.", message)


# ---------------------------------------------------------------------------- JSON
def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """``{TopicPartition: offset}`` -> Spark's layout, topics and partitions sorted."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def offsets_from_json(value: Mapping[str, Any] | None) -> PartitionOffsets:
    out: PartitionOffsets = {}
    for topic, partitions in (value or {}).items():
        if not isinstance(partitions, Mapping):
            raise ValueError(f"not a millrace offset: {value!r}")
        for partition, offset in partitions.items():
            out[TopicPartition(topic, int(partition))] = int(offset)
    return out


# ---------------------------------------------------------------------------- ranges
@dataclass(frozen=True)
class OffsetRange:
    """Records [from_offset, until_offset) of one partition."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        return self.until_offset - self.from_offset

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


def rate_limit(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
               max_records: int) -> PartitionOffsets:
    """End offsets holding at most ``max_records`` records after ``start``.

    Each partition gets a share of the budget proportional to its backlog (largest
    remainders first, ties in partition order), so the whole budget is used when the
    backlog is bigger and no partition is starved for ever.  A partition whose latest
    offset is below its start keeps its latest offset (``plan_ranges`` reports it).
    """
    backlog = {tp: max(0, latest[tp] - start.get(tp, latest[tp])) for tp in latest}
    total = sum(backlog.values())
    if total <= max_records:
        return dict(latest)
    shares: dict[TopicPartition, int] = {}
    remainders: list[tuple[float, TopicPartition]] = []
    for tp, size in backlog.items():
        exact = max_records * size / total
        shares[tp] = math.floor(exact)
        remainders.append((exact - shares[tp], tp))
    left = max_records - sum(shares.values())
    remainders.sort(key=lambda item: (-item[0], item[1]))
    for _, tp in remainders[:left]:
        shares[tp] += 1
    end: PartitionOffsets = {}
    for tp, latest_offset in latest.items():
        begin = start.get(tp)
        if begin is None or latest_offset < begin:
            end[tp] = latest_offset
        else:
            end[tp] = begin + min(shares[tp], backlog[tp])
    return end


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """At least ``min_partitions`` ranges when there are that many records: each range is
    cut into parts proportional to its share of all records (and never smaller than one
    record).  Without ``min_partitions``, or with enough ranges already, unchanged."""
    ranges = [r for r in ranges if r.size > 0]
    if min_partitions is None or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    out: list[OffsetRange] = []
    for r in ranges:
        parts = min(r.size, max(1, math.ceil(r.size * min_partitions / total)))
        step, extra = divmod(r.size, parts)
        begin = r.from_offset
        for i in range(parts):
            end = begin + step + (1 if i < extra else 0)
            out.append(OffsetRange(r.topic, r.partition, begin, end))
            begin = end
    return out


def group_ranges(ranges: list[OffsetRange], max_partitions: int | None
                 ) -> list[tuple[OffsetRange, ...]]:
    """The ranges packed into at most ``max_partitions`` groups of about equal records
    (largest range first onto the group with the fewest records; a range is never cut).
    Without ``max_partitions``, or with few enough ranges, one group per range.  Groups
    hold their ranges in (topic, partition, offset) order; empty ranges are dropped."""
    ranges = [r for r in ranges if r.size > 0]
    if max_partitions is None or len(ranges) <= max_partitions:
        return [(r,) for r in ranges]
    groups: list[list[OffsetRange]] = [[] for _ in range(max_partitions)]
    records = [0] * max_partitions
    for r in sorted(ranges, key=lambda r: (-r.size, r.topic, r.partition, r.from_offset)):
        smallest = min(range(max_partitions), key=records.__getitem__)
        groups[smallest].append(r)
        records[smallest] += r.size
    return [tuple(sorted(g, key=lambda r: (r.topic, r.partition, r.from_offset)))
            for g in groups if g]


def plan_ranges(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int],
                lookup: OffsetLookup, fail_on_data_loss: bool) -> list[OffsetRange]:
    """The ranges of the micro-batch (start, end]: one per partition of ``end``.

    A partition new in ``end`` starts at its earliest offset.  Offsets below the
    partition's earliest available offset, a partition that is gone and an end below the
    start are data loss; what survives is planned (ranges may be empty).
    """
    earliest = lookup.earliest_offsets(end)
    ranges: list[OffsetRange] = []
    for tp in sorted(end):
        until = end[tp]
        if tp not in earliest:
            report_data_loss(f"Partition {tp} is gone (was the topic deleted?): offsets "
                             f"{start.get(tp, 'earliest')} to {until} cannot be read",
                             fail_on_data_loss)
            continue
        if tp in start:
            begin = start[tp]
        else:
            begin = earliest[tp]
            if until < begin:
                report_data_loss(f"Partition {tp} was added, but its offsets below "
                                 f"{begin} were deleted before they could be read (the "
                                 f"micro-batch ends at {until})", fail_on_data_loss)
                continue
        if until < begin:
            report_data_loss(f"Partition {tp}'s offsets went back from {begin} to {until} "
                             "(was the topic deleted and re-created?)", fail_on_data_loss)
            continue
        if begin < earliest[tp] and begin < until:
            report_data_loss(f"Offsets {begin} to {min(earliest[tp], until)} of partition "
                             f"{tp} were deleted before they could be read (earliest "
                             f"available offset: {earliest[tp]})", fail_on_data_loss)
            begin = min(earliest[tp], until)
        ranges.append(OffsetRange(tp.topic, tp.partition, begin, until))
    return ranges


# ---------------------------------------------------------------------------- resolving
def resolve_offsets(spec: OffsetSpec, partitions: set[TopicPartition], lookup: OffsetLookup,
                    *, option: str, timestamp_strategy: str = "error") -> PartitionOffsets:
    """Numbers for ``spec`` in every partition of ``partitions``.

    Specific offsets must name exactly the partitions the subscription covers (-2 and -1
    become the earliest / latest offset).  A timestamp no record reaches is an error, or
    with ``timestamp_strategy="latest"`` the latest offset.
    """
    if isinstance(spec, EarliestOffsets):
        return _complete(lookup.earliest_offsets(partitions), partitions, option)
    if isinstance(spec, LatestOffsets):
        return _complete(lookup.latest_offsets(partitions), partitions, option)
    if isinstance(spec, SpecificOffsets):
        named = set(spec.offsets)
        if named != partitions:
            raise ValueError(
                f"If '{option}' names specific offsets, it must name every partition the "
                f"query reads (-2 = earliest, -1 = latest). Named: "
                f"{_names(named) or 'none'}; partitions: {_names(partitions) or 'none'}")
        earliest_wanted = {tp for tp, o in spec.offsets.items() if o == EARLIEST}
        latest_wanted = {tp for tp, o in spec.offsets.items() if o == LATEST}
        out = {tp: o for tp, o in spec.offsets.items() if o >= 0}
        if earliest_wanted:
            out.update(_complete(lookup.earliest_offsets(earliest_wanted), earliest_wanted,
                                 option))
        if latest_wanted:
            out.update(_complete(lookup.latest_offsets(latest_wanted), latest_wanted, option))
        return out
    if isinstance(spec, GlobalTimestamp):
        timestamps = dict.fromkeys(partitions, spec.timestamp)
    else:
        assert isinstance(spec, SpecificTimestamps)
        if set(spec.timestamps) != partitions:
            raise ValueError(
                f"If '{option}' gives timestamps per partition, it must name every partition "
                f"the query reads. Named: {_names(set(spec.timestamps)) or 'none'}; "
                f"partitions: {_names(partitions) or 'none'}")
        timestamps = dict(spec.timestamps)
    found = lookup.offsets_for_times(timestamps)
    out = {}
    missing = set()
    for tp, ts in timestamps.items():
        offset = found.get(tp)
        if offset is not None:
            out[tp] = offset
        elif timestamp_strategy == "latest" or option.startswith("ending"):
            missing.add(tp)
        else:
            raise ValueError(f"No record in partition {tp} has a timestamp at or after {ts} "
                             f"(option '{option}'); set 'startingOffsetsByTimestampStrategy' "
                             "to 'latest' to start at the latest offset instead")
    if missing:
        out.update(_complete(lookup.latest_offsets(missing), missing, option))
    return out


def _complete(found: PartitionOffsets, wanted: Iterable[TopicPartition], option: str
              ) -> PartitionOffsets:
    missing = set(wanted) - set(found)
    if missing:
        raise ValueError(f"Cannot resolve '{option}': partitions {_names(missing)} do not "
                         "exist")
    return found


def _names(partitions: Iterable[TopicPartition]) -> str:
    return ", ".join(str(tp) for tp in sorted(partitions))
