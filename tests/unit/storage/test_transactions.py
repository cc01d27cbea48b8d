"""Transactions in the log: open transactions in the producer state, markers, the last
stable offset, the .txnindex (format, truncation, deletion, recovery) and snapshots."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from millrace.common.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    TransactionCoordinatorFencedError,
)
from millrace.record.batch import iter_batches
from millrace.record.control import build_end_txn_marker
from millrace.storage import AppendOrigin, FetchIsolation, Log
from millrace.storage.producer_snapshot import decode_snapshot, encode_snapshot
from millrace.storage.producer_state import ProducerStateEntry
from millrace.storage.transaction_index import AbortedTxn, TransactionIndex, decode_entries
from tests.unit.storage.storagegen import T0, batch, config, open_log, records

COORD = AppendOrigin.COORDINATOR


def txn(pid: int, seq: int, n: int = 1, epoch: int = 0) -> bytes:
    return batch(n, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                 is_transactional=True)


def idem(pid: int, seq: int, n: int = 1, epoch: int = 0) -> bytes:
    return batch(n, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def marker(pid: int, committed: bool, epoch: int = 0, coordinator_epoch: int = 0) -> bytes:
    return build_end_txn_marker(pid, epoch, committed, coordinator_epoch, T0)


def commit_hw(log: Log) -> None:
    log.update_high_watermark(log.log_end_offset)


def txnindex_files(log: Log) -> dict[str, bytes]:
    out = {}
    for name in sorted(os.listdir(log.dir)):
        if name.endswith(".txnindex"):
            with open(os.path.join(log.dir, name), "rb") as f:
                out[name] = f.read()
    return out


def test_commit_moves_lso_only_once_marker_is_replicated(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(idem(9, 0, 2), 0)              # 0-1 plain
    commit_hw(log)
    assert log.last_stable_offset == 2
    log.append_as_leader(txn(1, 0, 3), 0)               # 2-4 transactional
    assert log.first_unstable_offset == 2
    assert log.last_stable_offset == 2                  # HW still 2
    commit_hw(log)
    assert (log.high_watermark, log.last_stable_offset) == (5, 2)
    assert log.producer_state_manager.last_entry(1).current_txn_first_offset == 2
    log.append_as_leader(marker(1, True, coordinator_epoch=7), 0, origin=COORD)  # 5
    assert log.producer_state_manager.last_entry(1).current_txn_first_offset == -1
    assert log.producer_state_manager.last_entry(1).coordinator_epoch == 7
    # the marker is written but not covered by the HW: still unstable
    assert log.last_stable_offset == 2
    log.update_high_watermark(5)
    assert log.last_stable_offset == 2
    log.update_high_watermark(6)
    assert (log.last_stable_offset, log.first_unstable_offset) == (6, None)
    assert txnindex_files(log) == {}                    # commits are not indexed
    log.close()


def test_abort_index_entry_exact_bytes(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(txn(1, 0), 0)                  # 0: pid 1 opens
    log.append_as_leader(txn(2, 0, 2), 0)               # 1-2: pid 2 opens
    log.append_as_leader(marker(1, False), 0, origin=COORD)  # 3: pid 1 aborts
    commit_hw(log)
    assert log.last_stable_offset == 1                  # pid 2 still open
    log.append_as_leader(marker(2, False), 0, origin=COORD)  # 4: pid 2 aborts
    commit_hw(log)
    assert log.last_stable_offset == 5
    expected = (bytes.fromhex("0000" "0000000000000001" "0000000000000000"
                              "0000000000000003" "0000000000000001")
                + bytes.fromhex("0000" "0000000000000002" "0000000000000001"
                                "0000000000000004" "0000000000000005"))
    assert len(expected) == 68
    assert txnindex_files(log) == {"00000000000000000000.txnindex": expected}
    assert log.collect_aborted_transactions(0, 5) == [AbortedTxn(1, 0, 3, 1),
                                                      AbortedTxn(2, 1, 4, 5)]
    assert log.collect_aborted_transactions(4, 5) == [AbortedTxn(2, 1, 4, 5)]
    assert log.collect_aborted_transactions(0, 1) == [AbortedTxn(1, 0, 3, 1)]
    log.close()


def test_marker_fencing_from_coordinator_not_from_replication(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(txn(1, 0, epoch=3), 0)
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(marker(1, True, epoch=2), 0, origin=COORD)
    log.append_as_leader(marker(1, True, epoch=3, coordinator_epoch=5), 0, origin=COORD)
    log.append_as_leader(txn(1, 1, epoch=3), 0)
    with pytest.raises(TransactionCoordinatorFencedError):
        log.append_as_leader(marker(1, False, epoch=3, coordinator_epoch=4), 0, origin=COORD)
    assert log.log_end_offset == 3                      # nothing written by the refusals
    assert log.producer_state_manager.last_entry(1).current_txn_first_offset == 2
    # a follower takes whatever its leader wrote
    follower = open_log(tmp_path, "topic-1")
    data = log.read_all_bytes()
    stale = bytearray(build_end_txn_marker(1, 2, False, 1, T0, base_offset=3))
    follower.append_as_follower(data)
    follower.append_as_follower(stale)
    assert follower.producer_state_manager.last_entry(1).current_txn_first_offset == -1
    assert follower.collect_aborted_transactions(0, 4) == [AbortedTxn(1, 2, 3, 4)]
    log.close()
    follower.close()


def test_non_transactional_write_inside_transaction_is_refused(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(txn(1, 0), 0)
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(idem(1, 1), 0)
    assert log.log_end_offset == 1
    log.close()


def test_marker_without_open_transaction_completes_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(marker(4, False), 0, origin=COORD)
    commit_hw(log)
    assert (log.log_end_offset, log.last_stable_offset) == (1, 1)
    assert txnindex_files(log) == {}
    log.close()


def test_read_committed_stops_at_lso(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(idem(9, 0, 2), 0)              # 0-1
    log.append_as_leader(txn(1, 0, 2), 0)               # 2-3 open
    log.append_as_leader(idem(9, 2, 1), 0)              # 4
    commit_hw(log)
    got = records(log.read(0, 1 << 20, FetchIsolation.TXN_COMMITTED).read())
    assert [r.offset for r in got] == [0, 1]
    got = records(log.read(0, 1 << 20, FetchIsolation.HIGH_WATERMARK).read())
    assert [r.offset for r in got] == [0, 1, 2, 3, 4]
    assert log.read(2, 1 << 20, FetchIsolation.TXN_COMMITTED).length == 0
    log.append_as_leader(marker(1, True), 0, origin=COORD)  # 5
    commit_hw(log)
    got = records(log.read(2, 1 << 20, FetchIsolation.TXN_COMMITTED).read())
    assert [r.offset for r in got] == [2, 3, 4, 5]
    log.close()


def abort_across_segments(tmp_path: Path) -> Log:
    """pid 1: 0-1 | pid 2 opens at 2, pid 1 aborts at 3 | pid 2 aborts at 5 ... each batch
    its own segment (segment.bytes is tiny)."""
    log = open_log(tmp_path, cfg=config(segment_bytes=100))
    log.append_as_leader(txn(1, 0, 2), 0)               # 0-1 seg 0
    log.append_as_leader(txn(2, 0), 0)                  # 2
    log.append_as_leader(marker(1, False), 0, origin=COORD)  # 3
    log.append_as_leader(idem(9, 0), 0)                 # 4
    log.append_as_leader(marker(2, False), 0, origin=COORD)  # 5
    log.append_as_leader(txn(1, 2), 0)                  # 6
    log.append_as_leader(marker(1, True), 0, origin=COORD)  # 7
    commit_hw(log)
    return log


def test_collect_aborted_transactions_across_segments(tmp_path: Path) -> None:
    log = abort_across_segments(tmp_path)
    assert [s.base_offset for s in log.segments] == [0, 2, 3, 4, 5, 6, 7]
    assert txnindex_files(log) == {
        "00000000000000000003.txnindex": AbortedTxn(1, 0, 3, 2).encode(),
        "00000000000000000005.txnindex": AbortedTxn(2, 2, 5, 6).encode()}
    assert log.collect_aborted_transactions(0, 2) == [AbortedTxn(1, 0, 3, 2)]
    assert log.collect_aborted_transactions(0, 8) == [AbortedTxn(1, 0, 3, 2),
                                                      AbortedTxn(2, 2, 5, 6)]
    assert log.collect_aborted_transactions(4, 8) == [AbortedTxn(2, 2, 5, 6)]
    assert log.collect_aborted_transactions(6, 8) == []
    assert log.last_stable_offset == 8
    log.close()


def test_truncation_cuts_index_and_reopens_transaction(tmp_path: Path) -> None:
    log = abort_across_segments(tmp_path)
    log.truncate_to(5)                                  # pid 2's abort goes
    assert txnindex_files(log) == {
        "00000000000000000003.txnindex": AbortedTxn(1, 0, 3, 2).encode()}
    assert log.producer_state_manager.last_entry(2).current_txn_first_offset == 2
    assert (log.first_unstable_offset, log.last_stable_offset) == (2, 2)
    log.truncate_to(3)
    assert txnindex_files(log) == {}
    assert log.first_unstable_offset == 0
    log.close()


def test_truncation_inside_a_segment_cuts_its_entries(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for pid in (1, 2):
        log.append_as_leader(txn(pid, 0), 0)
        log.append_as_leader(marker(pid, False), 0, origin=COORD)
    assert len(txnindex_files(log)["00000000000000000000.txnindex"]) == 68
    log.truncate_to(3)
    assert txnindex_files(log)["00000000000000000000.txnindex"] == \
        AbortedTxn(1, 0, 1, 2).encode()
    log.close()


def test_deleted_segments_take_their_txnindex(tmp_path: Path) -> None:
    log = abort_across_segments(tmp_path)
    log.delete_records_before(6)
    log.delete_pending_segments(force=True)
    assert txnindex_files(log) == {}
    assert log.collect_aborted_transactions(6, 8) == []
    log.close()


def kill(log: Log) -> None:
    """What kill -9 leaves: files as written, nothing closed cleanly."""
    log._local.close_handlers()


def reopen(tmp_path: Path, log: Log, clean: bool, **kwargs: object) -> Log:
    cfg = log.config
    return open_log(tmp_path, cfg=cfg, had_clean_shutdown=clean, **kwargs)


def test_recovery_rebuilds_txnindex_left_behind(tmp_path: Path) -> None:
    log = abort_across_segments(tmp_path)
    before = txnindex_files(log)
    path = log.dir
    kill(log)
    os.unlink(os.path.join(path, "00000000000000000005.txnindex"))
    with open(os.path.join(path, "00000000000000000003.txnindex"), "r+b") as f:
        f.truncate(20)                                  # a torn entry
    log = reopen(tmp_path, log, clean=False, high_watermark=8)
    assert txnindex_files(log) == before
    assert (log.first_unstable_offset, log.last_stable_offset) == (None, 8)
    log.close()


def test_recovery_of_torn_abort_marker_reopens_transaction(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(idem(9, 0), 0)                 # 0
    log.append_as_leader(txn(1, 0, 2), 0)               # 1-2
    log.append_as_leader(marker(1, False), 0, origin=COORD)  # 3
    commit_hw(log)
    assert len(txnindex_files(log)["00000000000000000000.txnindex"]) == 34
    seg_path = log.segments[-1].path
    kill(log)
    size = os.path.getsize(seg_path)
    with open(seg_path, "r+b") as f:                    # cut the marker mid-batch
        f.truncate(size - 10)
    log = reopen(tmp_path, log, clean=False, high_watermark=4)
    assert log.log_end_offset == 3
    assert txnindex_files(log) == {"00000000000000000000.txnindex": b""}
    assert log.producer_state_manager.last_entry(1).current_txn_first_offset == 1
    assert (log.first_unstable_offset, log.last_stable_offset) == (1, 1)
    log.close()


def test_open_transaction_survives_clean_restart_via_snapshot(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(idem(9, 0), 0)                 # 0
    log.append_as_leader(txn(1, 0, 2), 0)               # 1-2
    log.append_as_leader(marker(1, True, coordinator_epoch=3), 0, origin=COORD)  # 3
    log.append_as_leader(txn(1, 2), 0)                  # 4 open
    commit_hw(log)
    log.close()
    log = open_log(tmp_path, had_clean_shutdown=True, high_watermark=5)
    # nothing replayed: the state came from the close-time snapshot
    assert log.producer_state_manager.map_end_offset == 5
    entry = log.producer_state_manager.last_entry(1)
    assert (entry.current_txn_first_offset, entry.coordinator_epoch) == (4, 3)
    assert (log.first_unstable_offset, log.last_stable_offset) == (4, 4)
    log.append_as_leader(marker(1, False, coordinator_epoch=3), 0, origin=COORD)  # 5
    commit_hw(log)
    assert log.collect_aborted_transactions(0, 6) == [AbortedTxn(1, 4, 5, 6)]
    log.close()


def test_kill_during_open_transaction_keeps_lso(tmp_path: Path) -> None:
    log = open_log(tmp_path, cfg=config(segment_bytes=100))
    log.append_as_leader(idem(9, 0), 0)                 # 0
    log.append_as_leader(txn(1, 0), 0)                  # 1 open
    log.append_as_leader(idem(9, 1), 0)                 # 2 (rolls: snapshot at 2)
    commit_hw(log)
    kill(log)
    log = reopen(tmp_path, log, clean=False, high_watermark=3)
    assert (log.first_unstable_offset, log.last_stable_offset) == (1, 1)
    log.close()


def test_snapshot_round_trip_keeps_txn_offset_and_coordinator_epoch() -> None:
    entry = ProducerStateEntry(7, producer_epoch=2, coordinator_epoch=9,
                               last_timestamp=T0, current_txn_first_offset=123)
    entry.add_batch(2, 4, 130, 4, T0)
    assert decode_snapshot(encode_snapshot(131, [entry]), 131) == [entry]


def test_follower_builds_the_same_txnindex(tmp_path: Path) -> None:
    leader = abort_across_segments(tmp_path)
    follower = open_log(tmp_path, "topic-1", cfg=config(segment_bytes=100))
    data = leader.read_all_bytes()
    for pos, h in iter_batches(data):
        follower.append_as_follower(data[pos:pos + h.size])
    assert txnindex_files(follower) == txnindex_files(leader)
    follower.update_high_watermark(8)
    assert follower.last_stable_offset == 8
    leader.close()
    follower.close()


def test_transaction_index_file_rules(tmp_path: Path) -> None:
    path = str(tmp_path / "00000000000000000000.txnindex")
    idx = TransactionIndex(path, 0)
    assert idx.entries == [] and not os.path.exists(path)   # created on first append
    idx.append(AbortedTxn(1, 0, 5, 6))
    with pytest.raises(ValueError):
        idx.append(AbortedTxn(2, 1, 5, 6))                  # markers come in order
    idx.append(AbortedTxn(2, 3, 9, 10))
    idx.close()
    with open(path, "rb") as f:
        data = f.read()
    assert struct.unpack(">hqqqq", data[:34]) == (0, 1, 0, 5, 6)
    assert decode_entries(data + b"\x00" * 5) == [AbortedTxn(1, 0, 5, 6),
                                                  AbortedTxn(2, 3, 9, 10)]
    again = TransactionIndex(path, 0)
    assert again.collect_aborted_txns(6, 10) == ([AbortedTxn(2, 3, 9, 10)], True)
    assert again.collect_aborted_txns(0, 20) == ([AbortedTxn(1, 0, 5, 6),
                                                  AbortedTxn(2, 3, 9, 10)], False)
    again.truncate_to(9)
    assert os.path.getsize(path) == 34
    again.delete()
    assert not os.path.exists(path)
