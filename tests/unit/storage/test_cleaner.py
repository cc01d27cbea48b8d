from __future__ import annotations

import os
import shutil
from pathlib import Path

from millrace.common.time import MockTime
from millrace.record.batch import iter_batches, validate_batch
from millrace.storage import Log, LogCleaner, LogManager, OffsetCheckpointFile
from tests.unit.storage.storagegen import T0, batch, config, records

DAY = 86_400_000


def _setup(tmp_path: Path, **props: object) -> tuple[LogManager, Log, LogCleaner]:
    cfg = config(cleanup_policy="compact", segment_bytes=500, file_delete_delay_ms=0, **props)
    lm = LogManager([str(tmp_path)], cfg, time=MockTime(T0))
    lm.startup()
    return lm, lm.get_or_create_log("compacted", 0), LogCleaner(lm, time=MockTime(T0))


def _append(lg: Log, keys: list[bytes], values: list[bytes | None], ts: int = T0) -> None:
    lg.append_as_leader(batch(values, keys=keys, ts=ts), 0, now_ms=ts)
    lg.update_high_watermark(lg.log_end_offset)


def _contents(lg: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    data = lg.read_all_bytes()
    for pos, _ in iter_batches(data):
        validate_batch(data, pos, check_offsets=True)  # every rewritten batch is well-formed
    return [(r.offset, r.key, r.value) for r in records(data)]


def test_keeps_the_latest_record_per_key_at_its_offset(tmp_path: Path) -> None:
    lm, lg, cleaner = _setup(tmp_path)
    written = []
    for i in range(40):
        key = f"k{i % 5}".encode()
        _append(lg, [key, b"z"], [f"v{i}".encode(), f"z{i}".encode()])
        written += [(2 * i, key, f"v{i}".encode()), (2 * i + 1, b"z", f"z{i}".encode())]
    lg.roll()
    before = lg.size
    result = cleaner.clean_once(T0)
    assert result is not None and result.end_offset == 80
    assert lg.size < before
    latest = {}
    for off, key, value in written:
        latest[key] = (off, key, value)
    assert _contents(lg) == sorted(latest.values())
    assert lg.log_end_offset == 80
    # offsets and lookups still work across the gaps
    assert records(lg.read(0, 1).read())[0].offset == sorted(latest.values())[0][0]
    assert cleaner.clean_once(T0) is None  # nothing dirty any more
    cp = OffsetCheckpointFile(str(tmp_path / "cleaner-offset-checkpoint")).read()
    assert cp == {("compacted", 0): 80}
    lm.shutdown()


def test_partly_kept_batches_are_split_into_runs(tmp_path: Path) -> None:
    lm, lg, cleaner = _setup(tmp_path)
    _append(lg, [b"a", b"b", b"c", b"d"], [b"1", b"2", b"3", b"4"])
    _append(lg, [b"b"], [b"5"])
    lg.roll()
    cleaner.clean_log(lg, T0)
    assert _contents(lg) == [(0, b"a", b"1"), (2, b"c", b"3"), (3, b"d", b"4"), (4, b"b", b"5")]
    bases = [h.base_offset for _, h in iter_batches(lg.read_all_bytes())]
    assert bases == [0, 2, 4]
    lm.shutdown()


def test_the_active_segment_and_data_above_the_high_watermark_stay(tmp_path: Path) -> None:
    lm, lg, cleaner = _setup(tmp_path)
    for i in range(10):
        _append(lg, [b"k"], [f"v{i}".encode()])
    assert len(lg.segments) > 1
    active_base = lg.segments[-1].base_offset
    cleaner.clean_log(lg, T0)
    offsets = [o for o, _, _ in _contents(lg)]
    assert offsets == [active_base - 1, *range(active_base, 10)]
    lm.shutdown()


def test_tombstones_live_for_delete_retention_ms(tmp_path: Path) -> None:
    lm, lg, cleaner = _setup(tmp_path, delete_retention_ms=DAY)
    _append(lg, [b"a", b"b"], [b"1", b"2"])
    _append(lg, [b"a"], [None], ts=T0 + 10)
    lg.roll()
    cleaner.clean_once(T0 + 100)
    assert _contents(lg) == [(1, b"b", b"2"), (2, b"a", None)]
    assert cleaner.clean_once(T0 + DAY) is None  # not expired yet, nothing dirty
    result = cleaner.clean_once(T0 + 10 + DAY + 1)
    assert result is not None
    assert _contents(lg) == [(1, b"b", b"2")]
    assert lg.log_end_offset == 3
    lm.shutdown()


def test_dirty_ratio_threshold(tmp_path: Path) -> None:
    lm, lg, cleaner = _setup(tmp_path, min_cleanable_dirty_ratio=0.9)
    for i in range(10):
        _append(lg, [f"k{i}".encode()], [b"x" * 50])
    lg.roll()
    assert cleaner.clean_once(T0) is not None  # all dirty: ratio 1.0
    for i in range(3):
        _append(lg, [f"k{i}".encode()], [b"y" * 50])
    lg.roll()
    assert cleaner.clean_once(T0) is None  # a little dirty: below 0.9
    lm.shutdown()


def test_compacted_log_recovers_after_a_crash(tmp_path: Path) -> None:
    lm, lg, cleaner = _setup(tmp_path)
    for i in range(30):
        _append(lg, [f"k{i % 3}".encode()], [f"v{i}".encode()])
    lg.roll()
    cleaner.clean_once(T0)
    expected = _contents(lg)
    for log_ in lm.all_logs():
        log_.close()
    lm._close_all()  # crash: no marker
    lm = LogManager([str(tmp_path)], lg.config, time=MockTime(T0))
    lm.startup()
    again = lm.get_log("compacted", 0)
    assert again is not None and again.truncated_on_load == 0
    assert _contents(again) == expected
    lm.shutdown()


def test_interrupted_cleaning_is_finished_or_undone_on_load(tmp_path: Path) -> None:
    lm, lg, _ = _setup(tmp_path)
    for i in range(20):
        _append(lg, [f"k{i}".encode()], [b"x" * 40])
    expected = _contents(lg)
    first = lg.segments[0]
    d = Path(lg.dir)
    lm.shutdown()
    name = os.path.basename(first.path)
    shutil.copy(d / name, d / (name + ".swap"))  # a finished cleaning of segment 0
    (d / "00000000000000000003.log.cleaned").write_bytes(b"half-written")
    lm = LogManager([str(tmp_path)], lg.config, time=MockTime(T0))
    lm.startup()
    again = lm.get_log("compacted", 0)
    assert again is not None and _contents(again) == expected
    assert not [n for n in os.listdir(d) if n.endswith((".swap", ".cleaned"))]
    lm.shutdown()


def test_cleaning_keeps_markers_and_aborted_transaction_index(tmp_path: Path) -> None:
    from millrace.record.control import build_end_txn_marker
    from millrace.storage import AppendOrigin
    from millrace.storage.transaction_index import AbortedTxn

    lm, lg, cleaner = _setup(tmp_path)
    lg.append_as_leader(batch([b"t"], keys=[b"a"], producer_id=4, producer_epoch=0,
                              base_sequence=0, is_transactional=True), 0)       # 0
    lg.append_as_leader(build_end_txn_marker(4, 0, False, 0, T0), 0,
                        origin=AppendOrigin.COORDINATOR)                       # 1
    for i in range(12):
        _append(lg, [b"a"], [b"v%d" % i])                                      # 2-13
    assert len(lg.segments) > 2
    assert cleaner.clean_once(T0) is not None
    assert lg.collect_aborted_transactions(0, lg.log_end_offset) == [AbortedTxn(4, 0, 1, 2)]
    first = lg.segments[0]
    assert first.base_offset == 0 and first.txn_index.entries == [AbortedTxn(4, 0, 1, 2)]
    assert os.path.getsize(first.txn_index.path) == 34
    lm.shutdown()
