from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from millrace.common.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
)
from millrace.common.time import MockTime
from millrace.record.batch import (
    TimestampType,
    iter_batches,
    read_header,
    validate_batch,
)
from millrace.record.compression import CompressionType
from millrace.record.control import build_end_txn_marker
from millrace.storage import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    AppendOrigin,
    FetchIsolation,
    Log,
)
from tests.unit.storage.storagegen import (
    T0,
    all_offsets,
    batch,
    config,
    contiguous,
    fill,
    open_log,
    records,
)

# ------------------------------------------------------------------ appends and reads


def test_offsets_are_assigned_across_batches_and_calls(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    info = log.append_as_leader(batch(3) + batch(2) + batch(1), leader_epoch=7)
    assert (info.first_offset, info.last_offset, info.num_records, info.num_batches) == (0, 5, 6, 3)
    info = log.append_as_leader(batch(4), leader_epoch=8)
    assert (info.first_offset, info.last_offset) == (6, 9)
    assert log.log_end_offset == 10 and log.high_watermark == 0
    log.update_high_watermark(10)
    data = log.read_all_bytes()
    headers = [h for _, h in iter_batches(data)]
    assert [(h.base_offset, h.last_offset) for h in headers] == [(0, 2), (3, 4), (5, 5), (6, 9)]
    assert [h.partition_leader_epoch for h in headers] == [7, 7, 7, 8]
    for pos, _ in iter_batches(data):
        validate_batch(data, pos)  # CRC untouched by the header rewrite
    assert [r.value for r in records(data)] == [b"v0", b"v1", b"v2", b"v0", b"v1", b"v0",
                                                b"v0", b"v1", b"v2", b"v3"]
    log.close()


def test_stored_bytes_are_the_producers_except_offset_and_epoch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(1), 0)
    sent = batch(5, compression=CompressionType.GZIP)
    log.append_as_leader(sent, 3)
    log.update_high_watermark(log.log_end_offset)
    stored = log.read(1, 10**6).read()
    assert stored[17:] == sent[17:] and stored[8:12] == sent[8:12]
    assert read_header(stored).base_offset == 1
    log.close()


def test_bytearray_is_rewritten_in_place(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(2), 0)
    buf = bytearray(batch(1))
    log.append_as_leader(buf, 4)
    assert read_header(buf).base_offset == 2 and read_header(buf).partition_leader_epoch == 4
    log.close()


def test_read_bounds_and_out_of_range(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for _ in range(5):
        log.append_as_leader(batch(2), 0)
    log.update_high_watermark(6)
    size = read_header(batch(2)).size
    info = log.read(0, 10**6)  # up to the high watermark
    assert info.length == 3 * size
    info = log.read(0, 10**6, FetchIsolation.LOG_END)
    assert info.length == 5 * size
    info = log.read(3, 10**6, max_offset=8)
    assert (info.position, info.length) == (size, 3 * size)
    assert log.read(6, 100).length == 0  # at the high watermark: nothing yet
    assert log.read(10, 100).length == 0  # at the log end: empty, not an error
    with pytest.raises(OffsetOutOfRangeError):
        log.read(11, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)
    log.close()


def test_read_max_bytes_and_min_one_message(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 4, value_size=100)
    size = read_header(log.read(0, 1, min_one_message=True).read()).size
    assert log.read(0, 1, min_one_message=True).length == size
    empty = log.read(0, 1, min_one_message=False)
    assert empty.length == 0 and empty.first_entry_incomplete
    assert log.read(0, size * 2).length == size * 2
    part = log.read(0, size * 2 + 5)
    assert part.length == size * 2 + 5  # Kafka-style: a cut trailing batch
    assert len(list(iter_batches(part.read()))) == 2
    log.close()


def test_fetch_data_info_open_file_survives_deletion(tmp_path: Path) -> None:
    log = open_log(tmp_path, cfg=config(segment_bytes=200, retention_ms=1))
    fill(log, 4, value_size=100)
    info = log.read(0, 10**6)
    expected = info.read()
    assert log.delete_old_segments(T0 + 10**9) >= 1
    assert log.log_start_offset > 0
    with info.open_file() as f:  # the descriptor stays valid for file.delete.delay.ms
        f.seek(info.position)
        assert f.read(info.length) == expected
    log.close()


def test_open_file_gives_each_reader_its_own_offset(tmp_path: Path) -> None:
    """Fetches over TLS copy file regions with asyncio's sendfile fallback, which reads at
    the file offset and does not seek for a region at position 0: readers sharing one
    offset (dup'd descriptors) sent each other's bytes."""
    log = open_log(tmp_path)
    fill(log, 4, value_size=100)
    info = log.read(0, 10**6)
    expected = info.read()
    assert info.position == 0
    with info.open_file() as first, info.open_file() as second:
        first.seek(info.length - 10)  # where an earlier region's copy left its offset
        assert first.read() == expected[-10:]
        assert second.read(info.length) == expected  # from its own offset 0
    log.close()


def test_index_lookups_land_on_the_right_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path, cfg=config(index_interval_bytes=128, segment_bytes=4000))
    for i in range(200):
        log.append_as_leader(batch(1 + i % 4), 0)
    log.update_high_watermark(log.log_end_offset)
    assert len(log.segments) > 3
    for off in range(log.log_end_offset):
        _, h = next(iter_batches(log.read(off, 1).read()))
        assert h.base_offset <= off <= h.last_offset
    log.close()


# ------------------------------------------------------------------ validation


def test_corrupt_batch_is_rejected(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    bad = bytearray(batch(2))
    bad[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(bad, 0)
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(batch(2)[:-3], 0)  # truncated
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(batch(1) + b"\x00" * 20, 0)  # trailing garbage
    assert log.log_end_offset == 0 and log.size == 0
    log.close()


def test_other_rejections(tmp_path: Path) -> None:
    log = open_log(tmp_path, cfg=config(max_message_bytes=200))
    with pytest.raises(RecordTooLargeError):
        log.append_as_leader(batch([b"x" * 300]), 0)
    legacy = bytearray(batch(1))
    legacy[16] = 1
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(legacy, 0)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(batch(1, is_control=True, is_transactional=True, producer_id=1,
                                    producer_epoch=0), 0)
    with pytest.raises(InvalidTimestampError):
        log.append_as_leader(batch(1, ts=T0 + 3_600_001), 0, now_ms=T0)
    with pytest.raises(InvalidTimestampError):
        log.append_as_leader(batch(1, timestamp_type=TimestampType.LOG_APPEND_TIME), 0)
    # the coordinator may write end-transaction markers, but not malformed ones
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(batch(1, is_control=True, is_transactional=True, producer_id=1,
                                   producer_epoch=0), 0, origin=AppendOrigin.COORDINATOR)
    log.append_as_leader(build_end_txn_marker(1, 0, True, 0, T0), 0,
                         origin=AppendOrigin.COORDINATOR)
    assert log.log_end_offset == 1
    log.close()


def test_timestamp_before_bound(tmp_path: Path) -> None:
    log = open_log(tmp_path, cfg=config(message_timestamp_before_max_ms=1000))
    with pytest.raises(InvalidTimestampError):
        log.append_as_leader(batch(1, ts=T0 - 1001), 0, now_ms=T0)
    log.append_as_leader(batch(1, ts=T0 - 999), 0, now_ms=T0)
    log.close()


def test_compacted_topic_needs_keys(tmp_path: Path) -> None:
    log = open_log(tmp_path, cfg=config(cleanup_policy="compact"))
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(batch(2, keys=[b"a", None]), 0)
    log.append_as_leader(batch(2, keys=[b"a", b"b"]), 0)
    log.close()


def test_log_append_time(tmp_path: Path) -> None:
    log = open_log(tmp_path, cfg=config(message_timestamp_type="LogAppendTime"))
    info = log.append_as_leader(batch(3, ts=5), 0, now_ms=T0 + 42)
    assert info.log_append_time == T0 + 42 and info.max_timestamp == T0 + 42
    log.update_high_watermark(3)
    data = log.read(0, 10**6).read()
    h = validate_batch(data)
    assert h.timestamp_type == TimestampType.LOG_APPEND_TIME and h.max_timestamp == T0 + 42
    assert {r.timestamp for r in records(data)} == {T0 + 42}
    log.close()


# ------------------------------------------------------------------ rolling


def test_roll_by_size(tmp_path: Path) -> None:
    log = open_log(tmp_path, cfg=config(segment_bytes=1000))
    fill(log, 30, value_size=100)
    segs = log.segments
    assert len(segs) > 3
    assert all(s.size <= 1000 for s in segs)
    assert [s.base_offset for s in segs] == sorted(s.base_offset for s in segs)
    assert all_offsets(log) == list(range(30))
    log.close()


def test_roll_by_time(tmp_path: Path) -> None:
    time = MockTime(T0)
    log = open_log(tmp_path, cfg=config(segment_ms=1000), time=time)
    log.append_as_leader(batch(1, ts=T0), 0, now_ms=T0)
    log.append_as_leader(batch(1, ts=T0 + 999), 0, now_ms=T0 + 999)
    assert len(log.segments) == 1
    log.append_as_leader(batch(1, ts=T0 + 1001), 0, now_ms=T0 + 1001)
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.roll()
    assert [s.base_offset for s in log.segments] == [0, 2, 3]
    log.roll()  # the active segment is empty: no new one
    assert len(log.segments) == 3
    log.close()


# ------------------------------------------------------------------ timestamps


def test_fetch_offset_by_timestamp(tmp_path: Path) -> None:
    log = open_log(tmp_path, cfg=config(segment_bytes=400, index_interval_bytes=1))
    for i in range(20):
        log.append_as_leader(batch(2, ts=T0 + i * 100, ts_step=10), i // 5, now_ms=T0 + i * 100)
    log.update_high_watermark(log.log_end_offset)
    assert len(log.segments) > 2
    found = log.fetch_offset_by_timestamp(T0 + 1005)
    assert found is not None and (found.offset, found.timestamp) == (21, T0 + 1010)
    assert found.leader_epoch == 2
    found = log.fetch_offset_by_timestamp(0)
    assert found is not None and found.offset == 0
    assert log.fetch_offset_by_timestamp(T0 + 10**6) is None
    assert log.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP).offset == 0  # type: ignore[union-attr]
    latest = log.fetch_offset_by_timestamp(LATEST_TIMESTAMP)
    assert latest is not None and (latest.offset, latest.leader_epoch) == (40, 3)
    mx = log.fetch_offset_by_timestamp(MAX_TIMESTAMP)
    assert mx is not None and (mx.offset, mx.timestamp) == (39, T0 + 1910)
    log.close()


# ------------------------------------------------------------------ retention / deletion


def test_retention_by_time(tmp_path: Path) -> None:
    log = open_log(tmp_path, cfg=config(segment_bytes=500, retention_ms=10_000,
                                        file_delete_delay_ms=0))
    fill(log, 20, value_size=100, ts=T0, ts_step=1000)
    n = len(log.segments)
    now = T0 + 19_000 + 1
    deleted = log.delete_old_segments(now)
    assert deleted > 0 and len(log.segments) == n - deleted
    assert all(now - s.largest_timestamp <= 10_000 for s in log.segments[:-1])
    assert log.log_start_offset == log.segments[0].base_offset
    # everything expired: the active segment still stays
    log.delete_old_segments(T0 + 10**9)
    assert len(log.segments) == 1
    assert sorted(f for f in os.listdir(log.dir) if f.endswith(".log")) == [
        f"{log.segments[0].base_offset:020d}.log"]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    log.close()


def test_retention_never_passes_the_high_watermark(tmp_path: Path) -> None:
    log = open_log(tmp_path, cfg=config(segment_bytes=500, retention_ms=1))
    for _ in range(10):
        log.append_as_leader(batch([b"x" * 100]), 0)
    assert log.delete_old_segments(T0 + 10**9) == 0  # high watermark is 0
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments(T0 + 10**9) > 0
    log.close()


def test_retention_by_size(tmp_path: Path) -> None:
    log = open_log(tmp_path, cfg=config(segment_bytes=600, retention_bytes=1500,
                                        file_delete_delay_ms=0))
    fill(log, 30, value_size=100)
    assert log.size > 1500
    log.delete_old_segments()
    sizes = [s.size for s in log.segments]
    # as Kafka: the oldest segments go while what is left stays >= retention.bytes
    assert sum(sizes) - sizes[0] < 1500 <= sum(sizes)
    assert all_offsets(log) == list(range(log.log_start_offset, 30))
    log.close()


def test_file_delete_delay(tmp_path: Path) -> None:
    log = open_log(tmp_path, cfg=config(segment_bytes=300, retention_ms=1,
                                        file_delete_delay_ms=5000))
    fill(log, 5, value_size=100)
    n = log.delete_old_segments(T0 + 10**6)
    assert n > 0
    deleted = [f for f in os.listdir(log.dir) if f.endswith(".deleted")]
    assert len(deleted) == 3 * n
    log.delete_pending_segments(T0 + 10**6 + 4999)
    assert len([f for f in os.listdir(log.dir) if f.endswith(".deleted")]) == 3 * n
    log.delete_pending_segments(T0 + 10**6 + 5000)
    assert not [f for f in os.listdir(log.dir) if f.endswith(".deleted")]
    log.close()


def test_delete_records(tmp_path: Path) -> None:
    log = open_log(tmp_path, cfg=config(segment_bytes=500, file_delete_delay_ms=0))
    fill(log, 20, value_size=100)
    first_segments = len(log.segments)
    assert log.delete_records_before(7) == 7
    assert log.log_start_offset == 7
    assert len(log.segments) < first_segments
    assert log.segments[0].base_offset <= 7
    with pytest.raises(OffsetOutOfRangeError):
        log.read(6, 100)
    assert records(log.read(7, 1).read())[0].offset <= 7
    assert log.delete_records_before(3) == 7  # never moves back
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(21)
    assert log.delete_records_before(-1) == 20  # -1: up to the high watermark
    assert log.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP).offset == 20  # type: ignore[union-attr]
    log.close()


# ------------------------------------------------------------------ truncation


def test_truncate_to(tmp_path: Path) -> None:
    log = open_log(tmp_path, cfg=config(segment_bytes=500))
    fill(log, 20, value_size=100)
    assert log.truncate_to(9)
    assert log.log_end_offset == 9 and log.high_watermark == 9
    assert log.segments[-1].base_offset <= 9
    assert all_offsets(log) == list(range(9))
    assert not log.truncate_to(50)
    info = log.append_as_leader(batch(2), 0)
    assert info.first_offset == 9
    log.update_high_watermark(11)
    assert all_offsets(log) == list(range(11))
    log.close()


def test_truncate_fully_and_start_at(tmp_path: Path) -> None:
    log = open_log(tmp_path, cfg=config(segment_bytes=500))
    fill(log, 10, value_size=100)
    log.truncate_fully_and_start_at(1000)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (1000, 1000, 1000)
    assert [s.base_offset for s in log.segments] == [1000]
    assert log.append_as_leader(batch(1), 0).first_offset == 1000
    log.close()


# ------------------------------------------------------------------ followers


def test_append_as_follower_keeps_offsets(tmp_path: Path) -> None:
    leader = open_log(tmp_path, "a-0")
    fill(leader, 5, per_batch=2)
    data = leader.read(0, 10**6).read()
    follower = open_log(tmp_path, "b-0")
    info = follower.append_as_follower(data + data[:30])  # trailing partial batch ignored
    assert (info.first_offset, info.last_offset, follower.log_end_offset) == (0, 9, 10)
    follower.update_high_watermark(10)
    assert follower.read_all_bytes() == data
    with pytest.raises(InvalidRecordError):
        follower.append_as_follower(data)
    leader.close()
    follower.close()


# ------------------------------------------------------------------ flush and reopen


def test_flush_moves_the_recovery_point(tmp_path: Path) -> None:
    log = open_log(tmp_path, cfg=config(segment_bytes=500))
    fill(log, 10, value_size=100)
    assert log.recovery_point == 0
    log.flush(4)
    assert log.recovery_point == 4
    log.flush()
    assert log.recovery_point == 10
    log.close()
    auto = open_log(tmp_path, "auto-0", cfg=config(flush_messages=3))
    fill(auto, 2)
    assert auto.recovery_point == 0
    fill(auto, 1)
    assert auto.recovery_point == 3
    auto.close()


def test_reopen_after_clean_close_keeps_everything(tmp_path: Path) -> None:
    cfg = config(segment_bytes=500, index_interval_bytes=100)
    log = open_log(tmp_path, cfg=cfg)
    fill(log, 20, per_batch=2, value_size=50)
    log.delete_records_before(5)
    log.flush()
    end, start = log.log_end_offset, log.log_start_offset
    log.close()
    again = Log(log.dir, cfg, recovery_point=end, log_start_offset=start, high_watermark=end,
                had_clean_shutdown=True)
    assert (again.log_end_offset, again.log_start_offset, again.high_watermark) == (end, 5, end)
    assert again.truncated_on_load == 0
    assert contiguous(all_offsets(again))
    assert again.append_as_leader(batch(1), 0).first_offset == end
    again.close()


def test_reopen_after_crash_truncates_torn_tail(tmp_path: Path) -> None:
    log = open_log(tmp_path, cfg=config(segment_bytes=500))
    fill(log, 10, value_size=100)
    end = log.log_end_offset
    active = log.segments[-1].path
    log.close()
    with open(active, "ab") as f:
        f.write(batch([b"y" * 100])[:90])
    again = Log(log.dir, config(segment_bytes=500), had_clean_shutdown=False)
    assert again.truncated_on_load == 90
    assert again.log_end_offset == end and again.recovery_point == end
    again.close()


# ------------------------------------------------------------------ threads


def test_background_retention_and_flush_while_appending_and_reading(tmp_path: Path) -> None:
    log = open_log(tmp_path, cfg=config(segment_bytes=2000, retention_bytes=6000,
                                        file_delete_delay_ms=0, index_interval_bytes=200))
    stop = threading.Event()
    errors: list[BaseException] = []

    def background() -> None:
        try:
            while not stop.is_set():
                log.delete_old_segments()
                log.flush()
                start = log.log_start_offset
                try:
                    info = log.read(start, 5000)
                    data = info.read()
                    if data:
                        assert records(data)[0].offset >= start
                except OffsetOutOfRangeError:
                    pass  # retention moved the start between the two calls
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    t = threading.Thread(target=background)
    t.start()
    try:
        for _ in range(800):
            log.append_as_leader(batch([b"x" * 50, b"y" * 50]), 0)
            log.update_high_watermark(log.log_end_offset)
    finally:
        stop.set()
        t.join(10)
    assert not errors, errors
    log.delete_old_segments()
    assert log.log_end_offset == 1600
    assert all_offsets(log) == list(range(log.log_start_offset, 1600))
    assert log.size <= 6000 + 2000
    log.close()
