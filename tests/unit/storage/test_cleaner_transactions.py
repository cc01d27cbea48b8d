"""The log cleaner and transactions: the cleanable range stops at the last stable offset,
aborted records never shadow committed ones, aborted data goes, markers and the
``.txnindex`` stay."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from millrace.client.consumer._internals.completed_fetch import READ_COMMITTED, CompletedFetch
from millrace.common.topic_partition import TopicPartition
from millrace.record.batch import RecordBatch, iter_batches
from millrace.record.control import build_end_txn_marker
from millrace.storage import AppendOrigin, FetchIsolation, Log
from tests.unit.storage.storagegen import T0, batch
from tests.unit.storage.test_cleaner import _append, _contents, _setup

PID = 4


def _txn(lg: Log, keys: list[bytes], values: list[bytes], seq: int, pid: int = PID) -> None:
    lg.append_as_leader(batch(values, keys=keys, producer_id=pid, producer_epoch=0,
                              base_sequence=seq, is_transactional=True), 0)
    lg.update_high_watermark(lg.log_end_offset)


def _marker(lg: Log, committed: bool, pid: int = PID) -> int:
    """Write the marker through the leader's coordinator path; its offset."""
    offset = lg.log_end_offset
    lg.append_as_leader(build_end_txn_marker(pid, 0, committed, 0, T0), 0,
                        origin=AppendOrigin.COORDINATOR)
    lg.update_high_watermark(lg.log_end_offset)
    return offset


def _filler(lg: Log, n: int) -> None:
    """``n`` records of other keys, enough to roll a few segments."""
    for i in range(n):
        _append(lg, [b"f%d" % (i % 3)], [b"x" * 20])


def _control_offsets(lg: Log) -> list[int]:
    data = lg.read_all_bytes()
    return [h.last_offset for _, h in iter_batches(data) if h.is_control]


def _read_committed(lg: Log) -> dict[bytes | None, bytes | None]:
    """key -> latest value as a read_committed consumer sees the whole log."""
    start = lg.log_start_offset
    info = lg.read(start, 1 << 30, FetchIsolation.TXN_COMMITTED)
    aborted = [SimpleNamespace(producer_id=t.producer_id, first_offset=t.first_offset)
               for t in lg.collect_aborted_transactions(start, lg.last_stable_offset)]
    data = SimpleNamespace(error_code=0, high_watermark=lg.high_watermark,
                           log_start_offset=start, last_stable_offset=lg.last_stable_offset,
                           records=info.read(), aborted_transactions=aborted)
    fetch = CompletedFetch(TopicPartition("compacted", 0), data, start,
                           isolation_level=READ_COMMITTED)
    return {r.key: r.value for r in fetch.fetch_records(1 << 20)}


def test_an_aborted_record_never_shadows_the_committed_one(tmp_path: Path) -> None:
    lm, lg, cleaner = _setup(tmp_path)
    _append(lg, [b"K"], [b"v1"])                                   # 0
    _txn(lg, [b"K"], [b"v2"], 0)                                   # 1
    abort = _marker(lg, committed=False)                           # 2
    _filler(lg, 12)                                                # 3-14
    lg.roll()
    index_before = lg.collect_aborted_transactions(0, lg.log_end_offset)
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in index_before] == \
        [(PID, 1, 2)]
    assert _read_committed(lg)[b"K"] == b"v1"
    assert cleaner.clean_once(T0) is not None
    contents = _contents(lg)
    assert (0, b"K", b"v1") in contents                   # the committed value survives
    assert 1 not in [off for off, _, _ in contents]       # the aborted batch is gone
    assert _control_offsets(lg) == [abort]                # the marker stays
    assert lg.collect_aborted_transactions(0, lg.log_end_offset) == index_before
    assert lg.segments[0].txn_index.entries == index_before
    assert _read_committed(lg)[b"K"] == b"v1"
    lm.shutdown()


def test_an_abort_marker_past_the_cleaned_range_still_counts(tmp_path: Path) -> None:
    lm, lg, cleaner = _setup(tmp_path)
    _append(lg, [b"K"], [b"v1"])                                   # 0
    _txn(lg, [b"K"], [b"v2"], 0)                                   # 1
    _filler(lg, 12)                                                # 2-13, other producers
    _marker(lg, committed=False)                                   # 14, in the active segment
    result = cleaner.clean_once(T0)
    assert result is not None and result.end_offset <= 14
    offsets = [off for off, _, _ in _contents(lg)]
    assert 0 in offsets and 1 not in offsets
    assert _read_committed(lg)[b"K"] == b"v1"
    lm.shutdown()


def test_a_committed_transaction_supersedes_as_usual(tmp_path: Path) -> None:
    lm, lg, cleaner = _setup(tmp_path)
    _append(lg, [b"K"], [b"v1"])                                   # 0
    _txn(lg, [b"K"], [b"v2"], 0)                                   # 1
    commit = _marker(lg, committed=True)                           # 2
    _filler(lg, 12)
    lg.roll()
    assert cleaner.clean_once(T0) is not None
    contents = _contents(lg)
    assert (1, b"K", b"v2") in contents and 0 not in [off for off, _, _ in contents]
    assert _control_offsets(lg) == [commit]
    assert _read_committed(lg)[b"K"] == b"v2"
    lm.shutdown()


def test_an_open_transaction_bounds_the_cleanable_range(tmp_path: Path) -> None:
    lm, lg, cleaner = _setup(tmp_path)
    _append(lg, [b"K"], [b"v1"])                                   # 0
    _filler(lg, 12)
    _txn(lg, [b"K"], [b"v2"], 0)                                   # open, no marker
    first_unstable = lg.log_end_offset - 1
    _filler(lg, 12)
    lg.roll()
    assert lg.last_stable_offset == first_unstable < lg.high_watermark
    held = [s for s in lg.segments if s.base_offset <= first_unstable]
    unstable_base = max(s.base_offset for s in held)
    before = {s.base_offset: lg.read_all_bytes(s.base_offset)
              for s in lg.segments if s.base_offset >= unstable_base}
    result = cleaner.clean_once(T0)
    assert result is not None and result.end_offset == unstable_base
    assert (0, b"K", b"v1") in _contents(lg)               # not shadowed by the open one
    for base, data in before.items():                      # from the open one on: untouched
        assert lg.read_all_bytes(base) == data
    assert _read_committed(lg)[b"K"] == b"v1"
    # once committed (and the marker replicated), the range moves on
    _marker(lg, committed=True)
    lg.roll()
    assert cleaner.clean_log(lg, T0) is not None
    assert (0, b"K", b"v1") not in _contents(lg)
    lm.shutdown()


def test_a_producer_aborting_then_committing_on_the_same_keys(tmp_path: Path) -> None:
    lm, lg, cleaner = _setup(tmp_path)
    _append(lg, [b"K", b"J"], [b"k0", b"j0"])                      # 0-1
    _txn(lg, [b"K", b"J"], [b"k1", b"j1"], 0)                      # 2-3
    abort = _marker(lg, committed=False)                           # 4
    _txn(lg, [b"K"], [b"k2"], 2)                                   # 5
    commit = _marker(lg, committed=True)                           # 6
    _filler(lg, 12)
    lg.roll()
    assert cleaner.clean_once(T0) is not None
    contents = _contents(lg)
    assert (1, b"J", b"j0") in contents and (5, b"K", b"k2") in contents
    assert not {0, 2, 3} & {off for off, _, _ in contents}
    assert _control_offsets(lg) == [abort, commit]
    committed = _read_committed(lg)
    assert committed[b"K"] == b"k2" and committed[b"J"] == b"j0"
    # the rebuilt first batch still carries the non-transactional producer fields
    first = RecordBatch(lg.read_all_bytes(), 0)
    assert first.base_offset == 1 and not first.is_transactional
    lm.shutdown()
