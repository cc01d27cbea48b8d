from __future__ import annotations

import os
from pathlib import Path

import pytest

from millrace.record.batch import iter_batches, set_base_offset, validate_batch
from millrace.storage import LogConfig, LogSegment
from millrace.storage.index import CorruptIndexError
from millrace.storage.segment import AppendedBatch
from tests.unit.storage.storagegen import T0, batch, config, records


def _append(seg: LogSegment, base: int, n_records: int, ts: int = T0) -> int:
    data = bytearray(batch(n_records, ts=ts))
    set_base_offset(data, 0, base)
    seg.append(data, [AppendedBatch(0, len(data), base + n_records - 1, ts)])
    return base + n_records


def _segment(tmp_path: Path, cfg: LogConfig, base: int = 0) -> LogSegment:
    return LogSegment(str(tmp_path), base, cfg, now_ms=T0)


def test_files_are_named_like_kafkas(tmp_path: Path) -> None:
    seg = _segment(tmp_path, LogConfig(), base=1234)
    seg.close()
    assert sorted(os.listdir(tmp_path)) == ["00000000000000001234.index",
                                            "00000000000000001234.log",
                                            "00000000000000001234.timeindex"]


def test_append_read_and_index_every_interval(tmp_path: Path) -> None:
    seg = _segment(tmp_path, config(index_interval_bytes=200), base=10)
    nxt = 10
    for i in range(40):
        nxt = _append(seg, nxt, 2, ts=T0 + i)
    assert seg.read_next_offset() == nxt == 90
    oi = seg.offset_index
    assert 5 < oi.entries < 40
    # every index entry names the last offset of the batch at its position
    for n in range(oi.entries):
        off, pos = oi.entry(n)
        header, _ = seg.batch_at(pos)
        assert header.last_offset == off
    for target in range(10, 90):
        info = seg.read(target, 1, min_one_message=True)
        assert info is not None
        _, h = next(iter_batches(info.read()))
        assert h.base_offset <= target <= h.last_offset
        assert info.length == h.size  # exactly the first batch, whole
    assert seg.read(90, 100) is None
    seg.close()


def test_read_respects_max_size_and_max_position(tmp_path: Path) -> None:
    seg = _segment(tmp_path, LogConfig())
    nxt = 0
    for _ in range(5):
        nxt = _append(seg, nxt, 1)
    size = seg.size // 5
    info = seg.read(0, size * 2 + 10)
    assert info is not None and info.length == size * 2 + 10  # may cut the last batch
    info = seg.read(0, 10)
    assert info is not None and info.length == 0 and info.first_entry_incomplete
    info = seg.read(0, 10, min_one_message=True)
    assert info is not None and info.length == size
    info = seg.read(1, 10**6, max_position=size * 3)
    assert info is not None and (info.position, info.length) == (size, size * 2)
    seg.close()


def test_recover_rebuilds_identical_indexes_and_cuts_torn_tail(tmp_path: Path) -> None:
    cfg = config(index_interval_bytes=150)
    seg = _segment(tmp_path, cfg)
    nxt = 0
    for i in range(30):
        nxt = _append(seg, nxt, 1 + i % 3, ts=T0 + i * 10)
    seg.flush()
    index_bytes = (tmp_path / "00000000000000000000.index").read_bytes()
    time_bytes_prefix = (tmp_path / "00000000000000000000.timeindex").read_bytes()
    good_size = seg.size
    seg.close()
    with open(tmp_path / "00000000000000000000.log", "ab") as f:
        f.write(batch(3)[:40])  # half a header
    seg = LogSegment(str(tmp_path), 0, cfg, now_ms=T0, create=False)
    assert seg.recover() == 40
    assert seg.size == good_size and seg.read_next_offset() == nxt
    seg.close()
    assert (tmp_path / "00000000000000000000.index").read_bytes() == index_bytes
    assert (tmp_path / "00000000000000000000.timeindex").read_bytes().startswith(
        time_bytes_prefix)
    assert os.path.getsize(tmp_path / "00000000000000000000.log") == good_size


def test_recover_stops_at_a_corrupt_batch(tmp_path: Path) -> None:
    seg = _segment(tmp_path, LogConfig())
    for i in range(4):
        _append(seg, i, 1)
    size = seg.size // 4
    seg.close()
    path = tmp_path / "00000000000000000000.log"
    raw = bytearray(path.read_bytes())
    raw[size * 2 + 70] ^= 0xFF  # a record byte of the third batch: CRC breaks
    path.write_bytes(bytes(raw))
    seg = LogSegment(str(tmp_path), 0, LogConfig(), now_ms=T0, create=False)
    assert seg.recover() == size * 2
    assert seg.read_next_offset() == 2
    validate_batch(seg.pread(0, seg.size))
    seg.close()


def test_damaged_index_is_rebuilt_on_first_use(tmp_path: Path) -> None:
    cfg = config(index_interval_bytes=100)
    seg = _segment(tmp_path, cfg)
    nxt = 0
    for _ in range(20):
        nxt = _append(seg, nxt, 2)
    seg.close()
    good = (tmp_path / "00000000000000000000.index").read_bytes()
    (tmp_path / "00000000000000000000.index").write_bytes(b"\x00" * 24)
    seg = LogSegment(str(tmp_path), 0, cfg, now_ms=T0, create=False)
    assert seg.read_next_offset() == nxt
    seg.close()
    assert (tmp_path / "00000000000000000000.index").read_bytes() == good


def test_truncate_to_drops_batches_from_offset(tmp_path: Path) -> None:
    seg = _segment(tmp_path, config(index_interval_bytes=1))
    nxt = 0
    for i in range(10):
        nxt = _append(seg, nxt, 2, ts=T0 + i)
    assert seg.truncate_to(6) > 0
    assert seg.read_next_offset() == 6
    assert [r.offset for r in records(seg.pread(0, seg.size))] == list(range(6))
    assert seg.offset_index.lookup(100)[0] <= 5
    assert seg.max_timestamp == T0 + 2
    assert seg.truncate_to(100) == 0
    seg.close()


def test_should_roll(tmp_path: Path) -> None:
    cfg = config(segment_bytes=300, segment_ms=1000)
    seg = _segment(tmp_path, cfg)
    assert not seg.should_roll(cfg, 10**6, T0, 0, T0)  # an empty segment never rolls
    _append(seg, 0, 1, ts=T0)
    assert not seg.should_roll(cfg, 50, T0 + 10, 1, T0)
    assert seg.should_roll(cfg, 300, T0 + 10, 1, T0)  # size
    assert seg.should_roll(cfg, 50, T0 + 1001, 1, T0)  # record time since the first batch
    assert seg.should_roll(cfg, 50, T0, 2**31 + 5, T0)  # relative offset overflow
    seg.close()


def test_find_offset_by_timestamp_returns_first_record_at_or_after(tmp_path: Path) -> None:
    seg = _segment(tmp_path, config(index_interval_bytes=1))
    nxt = 0
    for i in range(10):
        data = bytearray(batch(3, ts=T0 + i * 100, ts_step=10))
        set_base_offset(data, 0, nxt)
        seg.append(data, [AppendedBatch(0, len(data), nxt + 2, T0 + i * 100 + 20)])
        nxt += 3
    found = seg.find_offset_by_timestamp(T0 + 415, 0)
    assert found is not None and (found.offset, found.timestamp) == (14, T0 + 420)
    found = seg.find_offset_by_timestamp(T0, 5)
    assert found is not None and found.offset == 5
    assert seg.find_offset_by_timestamp(T0 + 10_000, 0) is None
    seg.close()


def test_a_zeroed_one_entry_time_index_fails_the_sanity_check(tmp_path: Path) -> None:
    """(0, base offset) is a structurally valid time index entry; only the log can say the
    segment's largest timestamp is not 0.  Found by the kill -9 storage test, which zeroes
    a time index that sometimes has one entry."""
    seg = _segment(tmp_path, config(index_interval_bytes=10**6))
    nxt = 0
    for i in range(3):
        nxt = _append(seg, nxt, 2, ts=T0 + i)
    seg.on_become_inactive()  # the roll's final entry: (largest timestamp, its offset)
    assert seg.time_index.entries == 1
    seg.sanity_check()
    seg.close()
    path = tmp_path / "00000000000000000000.timeindex"
    path.write_bytes(b"\x00" * len(path.read_bytes()))
    again = _segment(tmp_path, config(index_interval_bytes=10**6))
    with pytest.raises(CorruptIndexError, match="does not name a batch with that timestamp"):
        again.sanity_check()
    again.recover()
    assert again.max_timestamp == T0 + 2
    again.close()
