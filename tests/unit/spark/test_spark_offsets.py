"""Offset planning of format("millrace"): JSON, rate limits, range splits, data loss,
resolving offset specs.  The cluster is a small fake ``OffsetLookup``."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from millrace.client.cluster import TopicPartition as TP
from millrace.spark.offsets import (
    DataLossError,
    OffsetRange,
    group_ranges,
    offsets_from_json,
    offsets_to_json,
    plan_ranges,
    rate_limit,
    resolve_offsets,
    split_ranges,
)
from millrace.spark.options import (
    EarliestOffsets,
    GlobalTimestamp,
    LatestOffsets,
    SourceOptions,
    SpecificOffsets,
    SpecificTimestamps,
)
from millrace.spark.source import MillraceStreamReader, source_schema


@dataclass
class FakeLookup:
    """Partitions with [earliest, latest) offsets and a record timestamp per offset."""

    earliest: dict[TP, int]
    latest: dict[TP, int]
    timestamps: dict[TP, list[int]] = field(default_factory=dict)

    def topic_partitions(self) -> set[TP]:
        return set(self.latest)

    def earliest_offsets(self, partitions: Iterable[TP]) -> dict[TP, int]:
        return {tp: self.earliest[tp] for tp in partitions if tp in self.earliest}

    def latest_offsets(self, partitions: Iterable[TP]) -> dict[TP, int]:
        return {tp: self.latest[tp] for tp in partitions if tp in self.latest}

    def offsets_for_times(self, timestamps: Mapping[TP, int]) -> dict[TP, int | None]:
        out: dict[TP, int | None] = {}
        for tp, ts in timestamps.items():
            if tp in self.latest:
                hits = [o for o, t in enumerate(self.timestamps.get(tp, [])) if t >= ts]
                out[tp] = hits[0] if hits else None
        return out

    def close(self) -> None:
        pass


A0, A1, A2, B0 = TP("a", 0), TP("a", 1), TP("a", 2), TP("b", 0)


def test_json_layout_is_sparks_and_sorted() -> None:
    offsets = {TP("b", 0): 5, TP("a", 10): 7, TP("a", 2): 3}
    doc = offsets_to_json(offsets)
    assert doc == {"a": {"2": 3, "10": 7}, "b": {"0": 5}}
    assert list(doc) == ["a", "b"] and list(doc["a"]) == ["2", "10"]
    assert offsets_from_json(doc) == offsets
    assert offsets_from_json(None) == {} and offsets_from_json({}) == {}


def test_rate_limit_shares_in_proportion_to_backlog() -> None:
    start = {A0: 0, A1: 100, A2: 50}
    latest = {A0: 600, A1: 400, A2: 150}  # backlogs 600, 300, 100
    end = rate_limit(start, latest, 100)
    assert end == {A0: 60, A1: 130, A2: 60}
    assert sum(end[tp] - start[tp] for tp in start) == 100


def test_rate_limit_uses_the_whole_budget_and_never_overshoots() -> None:
    start = {A0: 0, A1: 0, A2: 0}
    latest = {A0: 1, A1: 1, A2: 1}
    end = rate_limit(start, latest, 2)
    assert sum(end.values()) == 2 and all(end[tp] <= latest[tp] for tp in end)
    assert rate_limit(start, latest, 3) == latest
    assert rate_limit(start, latest, 10) == latest
    uneven = rate_limit({A0: 0, A1: 0}, {A0: 7, A1: 3}, 5)
    assert sum(uneven.values()) == 5 and uneven[A0] >= uneven[A1]


def test_rate_limit_keeps_a_log_that_went_backwards_for_planning() -> None:
    end = rate_limit({A0: 50, A1: 0}, {A0: 10, A1: 100}, 20)
    assert end == {A0: 10, A1: 20}


def test_split_ranges_for_min_partitions() -> None:
    ranges = [OffsetRange("a", 0, 0, 90), OffsetRange("a", 1, 10, 20), OffsetRange("a", 2, 5, 5)]
    assert split_ranges(ranges, None) == ranges[:2]  # empty ranges are dropped
    assert split_ranges(ranges, 2) == ranges[:2]
    split = split_ranges(ranges, 10)
    assert len(split) >= 10
    by_partition: dict[int, list[OffsetRange]] = {}
    for r in split:
        by_partition.setdefault(r.partition, []).append(r)
    for partition, original in ((0, ranges[0]), (1, ranges[1])):
        parts = by_partition[partition]
        assert parts[0].from_offset == original.from_offset
        assert parts[-1].until_offset == original.until_offset
        assert all(x.until_offset == y.from_offset for x, y in itertools.pairwise(parts))
        assert max(p.size for p in parts) - min(p.size for p in parts) <= 1
    assert len(by_partition[0]) == 9 and len(by_partition[1]) == 1
    tiny = split_ranges([OffsetRange("a", 0, 0, 2)], 8)
    assert [(r.from_offset, r.until_offset) for r in tiny] == [(0, 1), (1, 2)]


def test_group_ranges_packs_whole_ranges_into_balanced_groups() -> None:
    ranges = [OffsetRange("a", p, 0, n) for p, n in enumerate((40, 10, 30, 20, 25, 0))]
    assert group_ranges(ranges, None) == [(r,) for r in ranges[:5]]  # empty ones dropped
    assert group_ranges(ranges, 5) == [(r,) for r in ranges[:5]]
    groups = group_ranges(ranges, 2)
    assert len(groups) == 2
    # every record once, no range cut, each group in partition order
    assert sorted((r for g in groups for r in g), key=lambda r: r.partition) == ranges[:5]
    for g in groups:
        assert list(g) == sorted(g, key=lambda r: r.partition)
    sizes = sorted(sum(r.size for r in g) for g in groups)
    assert sizes == [60, 65]  # 40+20 / 30+25+10 (largest first onto the lighter group)
    assert group_ranges(ranges[:2], 8) == [(ranges[0],), (ranges[1],)]
    assert group_ranges([], 2) == []


def test_plan_ranges_one_per_partition_and_new_partitions_from_earliest() -> None:
    lookup = FakeLookup(earliest={A0: 0, A1: 0, B0: 3}, latest={A0: 10, A1: 10, B0: 9})
    ranges = plan_ranges({A0: 2, A1: 10}, {A0: 8, A1: 10, B0: 9}, lookup, True)
    assert ranges == [OffsetRange("a", 0, 2, 8), OffsetRange("a", 1, 10, 10),
                      OffsetRange("b", 0, 3, 9)]


def test_plan_ranges_detects_deleted_offsets() -> None:
    lookup = FakeLookup(earliest={A0: 5}, latest={A0: 10})
    with pytest.raises(DataLossError, match=r"Offsets 2 to 5 of partition a-0 were deleted.*"
                                            "failOnDataLoss"):
        plan_ranges({A0: 2}, {A0: 8}, lookup, True)
    assert plan_ranges({A0: 2}, {A0: 8}, lookup, False) == [OffsetRange("a", 0, 5, 8)]
    # deleted past the end of the batch: nothing left to read in it
    gone_past = FakeLookup(earliest={A0: 9}, latest={A0: 10})
    assert plan_ranges({A0: 2}, {A0: 8}, gone_past, False) == [OffsetRange("a", 0, 8, 8)]


def test_plan_ranges_detects_gone_partitions_and_logs_that_went_back(
        caplog: pytest.LogCaptureFixture) -> None:
    lookup = FakeLookup(earliest={A0: 0}, latest={A0: 4})
    with pytest.raises(DataLossError, match="Partition b-0 is gone"):
        plan_ranges({A0: 0, B0: 1}, {A0: 4, B0: 6}, lookup, True)
    with pytest.raises(DataLossError, match="a-0's offsets went back from 7 to 4"):
        plan_ranges({A0: 7}, {A0: 4}, lookup, True)
    with caplog.at_level(logging.WARNING, logger="millrace.spark.offsets"):
        assert plan_ranges({A0: 7, B0: 1}, {A0: 4, B0: 6}, lookup, False) == []
    assert "went back" in caplog.text and "b-0 is gone" in caplog.text


def test_plan_ranges_new_partition_deleted_before_it_was_read() -> None:
    lookup = FakeLookup(earliest={B0: 9}, latest={B0: 12})
    with pytest.raises(DataLossError, match="b-0 was added, but its offsets below 9"):
        plan_ranges({}, {B0: 4}, lookup, True)


def test_resolve_offsets() -> None:
    parts = {A0, A1}
    lookup = FakeLookup(earliest={A0: 2, A1: 0}, latest={A0: 10, A1: 20},
                        timestamps={A0: [100, 200, 300], A1: [50, 60]})
    assert resolve_offsets(EarliestOffsets(), parts, lookup, option="x") == {A0: 2, A1: 0}
    assert resolve_offsets(LatestOffsets(), parts, lookup, option="x") == {A0: 10, A1: 20}
    spec = SpecificOffsets({A0: -2, A1: -1})
    assert resolve_offsets(spec, parts, lookup, option="x") == {A0: 2, A1: 20}
    assert resolve_offsets(SpecificOffsets({A0: 5, A1: 6}), parts, lookup,
                           option="x") == {A0: 5, A1: 6}
    assert resolve_offsets(GlobalTimestamp(150), {A0}, lookup, option="x") == {A0: 1}
    by_ts = SpecificTimestamps({A0: 300, A1: 55})
    assert resolve_offsets(by_ts, parts, lookup, option="x") == {A0: 2, A1: 1}


def test_resolve_offsets_errors() -> None:
    parts = {A0, A1}
    lookup = FakeLookup(earliest={A0: 0, A1: 0}, latest={A0: 3, A1: 3},
                        timestamps={A0: [100], A1: [100]})
    with pytest.raises(ValueError, match=r"must name every partition.*Named: a-0; "
                                         "partitions: a-0, a-1"):
        resolve_offsets(SpecificOffsets({A0: 1}), parts, lookup, option="startingOffsets")
    with pytest.raises(ValueError, match="No record in partition a-0 has a timestamp at or "
                                         "after 500"):
        resolve_offsets(GlobalTimestamp(500), {A0}, lookup, option="startingTimestamp")
    assert resolve_offsets(GlobalTimestamp(500), {A0}, lookup, option="startingTimestamp",
                           timestamp_strategy="latest") == {A0: 3}
    # an ending timestamp past every record ends at the latest offset
    assert resolve_offsets(GlobalTimestamp(500), {A0}, lookup,
                           option="endingTimestamp") == {A0: 3}
    with pytest.raises(ValueError, match="partitions b-0 do not exist"):
        resolve_offsets(EarliestOffsets(), {B0}, lookup, option="startingOffsets")


def stream_reader(lookup: FakeLookup, **options: str) -> MillraceStreamReader:
    opts = SourceOptions.parse({"kafka.bootstrap.servers": "h:1", "subscribePattern": ".*",
                                **options}, streaming=True)
    reader = MillraceStreamReader(opts, source_schema(False))
    reader._lookup = lookup  # type: ignore[assignment]
    return reader


def test_stream_latest_offset_picks_up_new_partitions_from_earliest() -> None:
    lookup = FakeLookup(earliest={A0: 0, B0: 2}, latest={A0: 10, B0: 8})
    reader = stream_reader(lookup)
    end = reader.latestOffset({"a": {"0": 4}}, ReadAllAvailable())
    assert end == {"a": {"0": 10}, "b": {"0": 8}}
    assert reader.reportLatestOffset() == {"a": {"0": 10}, "b": {"0": 8}}
    # the budget counts the new partition's records from its earliest offset
    end = reader.latestOffset({"a": {"0": 4}}, ReadMaxRows(6))
    assert end == {"a": {"0": 7}, "b": {"0": 5}}
    parts = reader.partitions({"a": {"0": 4}}, end)
    assert [(p.topic, p.partition, p.from_offset, p.until_offset) for p in parts] == \
        [("a", 0, 4, 7), ("b", 0, 2, 5)]


def test_stream_latest_offset_reports_gone_partitions() -> None:
    lookup = FakeLookup(earliest={A0: 0}, latest={A0: 10})
    with pytest.raises(DataLossError, match="Partitions b-0 are gone"):
        stream_reader(lookup).latestOffset({"a": {"0": 4}, "b": {"0": 3}},
                                           ReadAllAvailable())
    lenient = stream_reader(lookup, failOnDataLoss="false")
    end = lenient.latestOffset({"a": {"0": 4}, "b": {"0": 3}}, ReadAllAvailable())
    assert end == {"a": {"0": 10}}
    assert lenient.partitions({"a": {"0": 4}, "b": {"0": 3}}, end)[0].until_offset == 10


def test_stream_available_now_stops_at_the_offsets_seen_when_it_began() -> None:
    lookup = FakeLookup(earliest={A0: 0}, latest={A0: 10})
    reader = stream_reader(lookup, startingOffsets="earliest", maxOffsetsPerTrigger="4")
    start = reader.initialOffset()
    assert start == {"a": {"0": 0}}
    reader.prepareForTriggerAvailableNow()
    lookup.latest[A0] = 50
    lookup.earliest[B0], lookup.latest[B0] = 0, 7  # a partition created after it began
    ends = []
    while True:
        end = reader.latestOffset(start, reader.getDefaultReadLimit())
        if end == start or len(ends) > 10:
            break
        ends.append(end)
        start = end
    assert [e["a"]["0"] for e in ends] == [4, 8, 10]
    assert all(e.get("b", {}).get("0", 0) == 0 for e in ends)
    assert reader.reportLatestOffset() == {"a": {"0": 50}, "b": {"0": 7}}
