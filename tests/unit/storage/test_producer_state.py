"""Broker-side idempotence: ProducerStateManager rules, snapshots, rebuild, truncation, expiry.

The rules are those of kafka-protocol.md section 8.1 (Java ``ProducerAppendInfo``,
``ProducerStateEntry.findDuplicateBatch``); every case goes through ``Log.append_as_leader``
as the Produce path does, except the pure checks of the entry and the snapshot codec.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest

from millrace.common.errors import (
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
)
from millrace.common.time import MockTime
from millrace.record.batch import iter_batches
from millrace.storage import AppendOrigin, Log, LogConfig, LogManager
from millrace.storage.producer_snapshot import (
    CorruptSnapshotError,
    decode_snapshot,
    encode_snapshot,
    read_snapshot,
    snapshot_file_name,
)
from millrace.storage.producer_state import (
    INT32_MAX,
    NUM_BATCHES_TO_RETAIN,
    BatchMetadata,
    ProducerState,
    ProducerStateEntry,
)
from millrace.storage.producer_state_manager import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    MAX_RETAINED_SNAPSHOTS,
    ProducerStateManager,
)
from tests.unit.storage.storagegen import T0, all_offsets, batch, config, open_log

PID = 1000


def pbatch(seq: int, n: int = 1, *, pid: int = PID, epoch: int = 0, ts: int = T0) -> bytes:
    """An idempotent batch of ``n`` records with base sequence ``seq``."""
    return batch(n, ts=ts, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def snapshots(log: Log) -> list[int]:
    return sorted(int(n[:20]) for n in os.listdir(log.dir) if n.endswith(".snapshot"))


def state(log: Log) -> dict[int, ProducerStateEntry]:
    return {pid: e.copy() for pid, e in log.producer_state_manager.producers.items()}


def reopen(log: Log, *, clean: bool, time: MockTime | None = None, **kwargs: object) -> Log:
    if not log.closed:
        log.close(sync=clean)
    return Log(log.dir, log.config, recovery_point=0 if not clean else log.log_end_offset,
               had_clean_shutdown=clean, time=time or MockTime(T0), **kwargs)  # type: ignore[arg-type]


def many_producers(log: Log, rounds: int = 12, producers: int = 4) -> None:
    """Interleaved batches of several producers (sizes 1-3), with an epoch bump."""
    seqs = dict.fromkeys(range(producers), 0)
    epochs = dict.fromkeys(range(producers), 0)
    for r in range(rounds):
        for p in range(producers):
            if r == rounds // 2 and p == 1:
                epochs[p], seqs[p] = 1, 0
            n = 1 + (r + p) % 3
            log.append_as_leader(pbatch(seqs[p], n, pid=PID + p, epoch=epochs[p]), 0)
            seqs[p] += n
        log.append_as_leader(batch(2), 0)  # a non-idempotent producer in between


# ------------------------------------------------------------------ the rules


def test_duplicate_returns_original_offsets_and_writes_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(3), 0)
    first = log.append_as_leader(pbatch(0, 2), 0)
    second = log.append_as_leader(pbatch(2, 4), 0)
    assert (first.first_offset, first.last_offset) == (3, 4)
    assert (second.first_offset, second.last_offset) == (5, 8)
    end, size = log.log_end_offset, log.size
    for sent, orig in ((pbatch(0, 2), first), (pbatch(2, 4), second)):
        dup = log.append_as_leader(sent, 0)
        assert (dup.first_offset, dup.last_offset) == (orig.first_offset, orig.last_offset)
        assert dup.num_batches == 0 and dup.num_records == 0 and dup.valid_bytes == 0
        assert dup.log_append_time == -1
    assert (log.log_end_offset, log.size) == (end, size)
    log.update_high_watermark(end)
    assert all_offsets(log) == list(range(end))
    # the sequence continues after the duplicates
    assert log.append_as_leader(pbatch(6), 0).first_offset == end
    log.close()


def test_duplicate_on_log_append_time_topic_reports_the_original_append_time(
        tmp_path: Path) -> None:
    time = MockTime(T0)
    log = open_log(tmp_path, cfg=config(message_timestamp_type="LogAppendTime"), time=time)
    orig = log.append_as_leader(pbatch(0, 3), 0)
    assert orig.log_append_time == T0
    time.sleep(5000)
    dup = log.append_as_leader(pbatch(0, 3), 0)
    assert (dup.first_offset, dup.log_append_time, dup.num_batches) == (0, T0, 0)
    log.close()


def test_gap_is_out_of_order_and_nothing_is_written(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(pbatch(0, 3), 0)
    for bad in (4, 5, 1, 2, 100):  # next must be 3
        with pytest.raises(OutOfOrderSequenceError) as e:
            log.append_as_leader(pbatch(bad), 0)
        assert e.value.code == 45
    assert log.log_end_offset == 3
    assert log.append_as_leader(pbatch(3), 0).first_offset == 3
    log.close()


def test_stale_epoch_is_invalid_producer_epoch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(pbatch(0, epoch=3), 0)
    with pytest.raises(InvalidProducerEpochError) as e:
        log.append_as_leader(pbatch(1, epoch=2), 0)
    assert e.value.code == 47
    with pytest.raises(InvalidProducerEpochError):  # also a "duplicate" of an old epoch
        log.append_as_leader(pbatch(0, epoch=2), 0)
    assert log.log_end_offset == 1
    log.close()


def test_new_epoch_must_start_at_sequence_zero(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(pbatch(0, 5), 0)
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(pbatch(5, epoch=1), 0)  # in sequence for epoch 0, not for 1
    assert log.append_as_leader(pbatch(0, 2, epoch=1), 0).first_offset == 5
    # the bump forgot the old epoch's batches: its retry is fenced, not a duplicate
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(pbatch(0, 5), 0)
    assert log.append_as_leader(pbatch(0, 2, epoch=1), 0).num_batches == 0
    assert log.append_as_leader(pbatch(2, epoch=1), 0).first_offset == 7
    log.close()


def test_no_state_accepts_any_sequence(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    assert log.append_as_leader(pbatch(12345, 2, epoch=7), 0).first_offset == 0
    assert log.append_as_leader(pbatch(777, pid=PID + 1), 0).first_offset == 2
    with pytest.raises(OutOfOrderSequenceError):  # now it has state
        log.append_as_leader(pbatch(12348, epoch=7), 0)
    assert log.append_as_leader(pbatch(12347, epoch=7), 0).first_offset == 3
    log.close()


def test_sequence_wraps_from_int32_max_to_zero(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(pbatch(INT32_MAX - 1, 2), 0)  # last sequence INT32_MAX
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(pbatch(1), 0)
    assert log.append_as_leader(pbatch(0, 1), 0).first_offset == 2
    # a batch straddling the wrap: base INT32_MAX, 3 records -> last sequence 1
    log2 = open_log(tmp_path, "wrap-0")
    log2.append_as_leader(pbatch(INT32_MAX - 4, 5), 0)  # ends at INT32_MAX - 0
    with pytest.raises(OutOfOrderSequenceError):
        log2.append_as_leader(pbatch(INT32_MAX, 3), 0)  # INT32_MAX was used
    log3 = open_log(tmp_path, "straddle-0")
    log3.append_as_leader(pbatch(INT32_MAX - 2, 2), 0)  # ends at INT32_MAX - 1
    info = log3.append_as_leader(pbatch(INT32_MAX, 3), 0)  # INT32_MAX, 0, 1
    entry = log3.producer_state_manager.last_entry(PID)
    assert entry is not None and entry.last_seq == 1
    assert entry.batch_metadata[-1].first_seq == INT32_MAX
    assert log3.append_as_leader(pbatch(INT32_MAX, 3), 0).first_offset == info.first_offset
    assert log3.append_as_leader(pbatch(2), 0).first_offset == info.last_offset + 1
    for lg in (log, log2, log3):
        lg.close()


def test_only_the_last_five_batches_are_recognised(tmp_path: Path) -> None:
    assert NUM_BATCHES_TO_RETAIN == 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN
    log = open_log(tmp_path)
    infos = [log.append_as_leader(pbatch(i * 2, 2), 0) for i in range(NUM_BATCHES_TO_RETAIN + 1)]
    end = log.log_end_offset
    # the 5 most recent are duplicates with their own offsets
    for i in range(1, NUM_BATCHES_TO_RETAIN + 1):
        dup = log.append_as_leader(pbatch(i * 2, 2), 0)
        assert (dup.first_offset, dup.last_offset, dup.num_batches) == (
            infos[i].first_offset, infos[i].last_offset, 0)
    # the 6th most recent fell out of the window: not a duplicate, so out of order
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(pbatch(0, 2), 0)
    # a retry with a different range than the cached batch is not a duplicate either
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(pbatch(2, 1), 0)
    assert log.log_end_offset == end
    log.close()


def test_multi_batch_append_chains_sequences_and_is_all_or_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    info = log.append_as_leader(pbatch(0, 2) + pbatch(2, 3) + pbatch(0, pid=PID + 1), 0)
    assert (info.first_offset, info.last_offset, info.num_batches) == (0, 5, 3)
    with pytest.raises(OutOfOrderSequenceError):  # second batch leaves a gap
        log.append_as_leader(pbatch(5) + pbatch(7), 0)
    assert log.log_end_offset == 6
    assert log.append_as_leader(pbatch(5) + pbatch(6), 0).first_offset == 6
    entry = log.producer_state_manager.last_entry(PID)
    assert entry is not None
    assert [(b.first_seq, b.last_seq, b.first_offset, b.last_offset)
            for b in entry.batch_metadata] == [(0, 1, 0, 1), (2, 4, 2, 4), (5, 5, 6, 6),
                                               (6, 6, 7, 7)]
    log.close()


def test_replication_and_coordinator_appends_are_not_checked(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(pbatch(0, 2, epoch=3), 0)
    log.append_as_leader(pbatch(10, epoch=3), 0, origin=AppendOrigin.COORDINATOR)  # a gap
    log.append_as_leader(pbatch(10, epoch=3), 0, origin=AppendOrigin.COORDINATOR)  # again
    assert log.log_end_offset == 4
    entry = log.producer_state_manager.last_entry(PID)
    assert entry is not None and entry.last_seq == 10
    # follower appends (offsets assigned by the leader): gaps and old epochs accepted
    follower = open_log(tmp_path, "follower-0")
    leader = open_log(tmp_path, "leader-0")
    leader.append_as_leader(pbatch(0, 2, epoch=1) + pbatch(50, epoch=1), 0,
                            origin=AppendOrigin.REPLICATION)
    data = leader.read_all_bytes()
    follower.append_as_follower(data)
    assert state(follower) == state(leader)
    f_entry = follower.producer_state_manager.last_entry(PID)
    assert f_entry is not None and f_entry.last_seq == 50
    for lg in (log, follower, leader):
        lg.close()


def test_describe_producers_data(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(pbatch(0, 3, epoch=2, ts=T0 + 5), 0, now_ms=T0 + 10)
    log.append_as_leader(pbatch(9, pid=7, ts=T0 + 7), 0, now_ms=T0 + 10)
    log.append_as_leader(batch(1), 0)
    assert log.active_producers() == [
        ProducerState(7, 0, 9, T0 + 7, -1, -1),
        ProducerState(PID, 2, 2, T0 + 5, -1, -1),
    ]
    log.close()


# ------------------------------------------------------------------ pure pieces


def test_entry_keeps_five_batches_and_forgets_them_on_a_new_epoch() -> None:
    e = ProducerStateEntry.empty(1)
    assert e.is_empty and e.last_seq == -1 and e.producer_epoch == -1
    for i in range(7):
        e.add_batch(0, i, 100 + i, 0, T0 + i)
    assert [b.last_seq for b in e.batch_metadata] == [2, 3, 4, 5, 6]
    assert (e.first_seq, e.last_seq, e.first_data_offset, e.last_data_offset) == (2, 6, 102, 106)
    assert e.find_duplicate_batch(0, 4, 4) == BatchMetadata(4, 104, 0, T0 + 4)
    assert e.find_duplicate_batch(1, 4, 4) is None
    e.add_batch(1, 0, 200, 0, T0)
    assert [b.last_seq for b in e.batch_metadata] == [0]


def test_snapshot_codec_round_trip_and_damage() -> None:
    e1 = ProducerStateEntry(5, 3, 7, T0, 40)
    for i in range(NUM_BATCHES_TO_RETAIN):
        e1.add_batch(3, i * 3 + 2, 10 + i * 3, 2, T0 + i)
    e2 = ProducerStateEntry(2**40, 0, -1, -1, -1)
    data = encode_snapshot(123, [e1, e2])
    assert decode_snapshot(data, 123) == [e1, e2]
    assert decode_snapshot(encode_snapshot(0, []), 0) == []
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(data, 124)  # name and content disagree
    for cut in (0, 5, 10, 30, len(data) - 1):
        with pytest.raises(CorruptSnapshotError):
            decode_snapshot(data[:cut])
    for pos in range(0, len(data), 7):
        bad = bytearray(data)
        bad[pos] ^= 0x40
        with pytest.raises(CorruptSnapshotError):
            decode_snapshot(bytes(bad))
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(data + b"\x00")


# ------------------------------------------------------------------ snapshots and rebuild


def test_close_writes_a_snapshot_and_reopen_keeps_the_state(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    many_producers(log)
    live = state(log)
    end = log.log_end_offset
    log.close(sync=True)
    assert snapshots(log) == [end]
    assert os.path.exists(os.path.join(log.dir, snapshot_file_name(end)))
    assert {e.producer_id: e for e in read_snapshot(
        os.path.join(log.dir, snapshot_file_name(end)), end)} == live
    log2 = reopen(log, clean=True)
    assert state(log2) == live
    # retries of the last batches of every producer are still recognised
    for pid, entry in live.items():
        for b in entry.batch_metadata:
            dup = log2.append_as_leader(pbatch(b.first_seq, b.offset_delta + 1, pid=pid,
                                               epoch=entry.producer_epoch), 0)
            assert (dup.first_offset, dup.num_batches) == (b.first_offset, 0)
    assert log2.log_end_offset == end
    log2.close()


def test_roll_writes_snapshots_at_segment_bases_and_old_ones_are_pruned(tmp_path: Path) -> None:
    log = open_log(tmp_path, cfg=config(segment_bytes=400))
    seq = 0
    for _ in range(40):
        log.append_as_leader(pbatch(seq, 2), 0)
        seq += 2
    bases = [s.base_offset for s in log.segments]
    assert len(bases) > MAX_RETAINED_SNAPSHOTS + 2
    assert snapshots(log) == bases[-MAX_RETAINED_SNAPSHOTS:]
    # each snapshot holds the state as of its offset
    for off in snapshots(log):
        (entry,) = read_snapshot(os.path.join(log.dir, snapshot_file_name(off)), off)
        assert entry.last_data_offset == off - 1 and entry.last_seq == off - 1
    log.close()


def test_rebuild_from_log_replay_equals_live_state(tmp_path: Path) -> None:
    log = open_log(tmp_path, cfg=config(segment_bytes=700))
    many_producers(log, rounds=20)
    assert len(log.segments) > 4
    live = state(log)
    end = log.log_end_offset
    log.close()
    # 1. no snapshot at all, unclean: full replay from the log start
    for off in snapshots(log):
        os.unlink(os.path.join(log.dir, snapshot_file_name(off)))
    log2 = reopen(log, clean=False)
    assert log2.log_end_offset == end and state(log2) == live
    assert snapshots(log2) == [end]  # the rebuilt state is written at once
    log2.close()
    # 2. a crash (the directory as a kill -9 leaves it: no snapshot at close) with only
    #    an old snapshot: that snapshot plus a replay of the segments after it
    log3 = open_log(tmp_path, "b-0", cfg=config(segment_bytes=700))
    many_producers(log3, rounds=20)
    live3 = state(log3)
    crashed = tmp_path / "crashed-0"
    shutil.copytree(log3.dir, crashed)
    log3.close()
    taken = sorted(int(n[:20]) for n in os.listdir(crashed) if n.endswith(".snapshot"))
    assert len(taken) >= 2
    old = taken[0]
    for off in taken[1:]:
        os.unlink(crashed / snapshot_file_name(off))
    log4 = Log(str(crashed), log3.config, time=MockTime(T0))
    assert old < log4.log_end_offset == log3.log_end_offset and state(log4) == live3
    log4.close()


def test_torn_snapshot_is_ignored(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log = open_log(tmp_path, cfg=config(segment_bytes=700))
    many_producers(log, rounds=10)
    live = state(log)
    log.close(sync=True)
    latest = snapshots(log)[-1]
    path = os.path.join(log.dir, snapshot_file_name(latest))
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)
    with caplog.at_level(logging.WARNING, logger="millrace.storage"):
        log2 = reopen(log, clean=True)
    assert "ignoring producer snapshot" in caplog.text
    assert state(log2) == live  # from an older snapshot plus replay
    log2.close()
    # garbage of the right length, and a leftover temp file
    with open(path, "r+b") as f:
        f.seek(20)
        f.write(b"\xff" * 8)
    with open(path + ".tmp", "wb") as f:
        f.write(b"half a snapshot")
    log3 = reopen(log2, clean=True)
    assert state(log3) == live
    assert not os.path.exists(path + ".tmp")
    log3.close()


def test_crash_truncation_drops_snapshots_above_the_new_log_end(tmp_path: Path) -> None:
    log = open_log(tmp_path, cfg=config(segment_bytes=10**6))
    for i in range(6):
        log.append_as_leader(pbatch(i * 2, 2), 0)
    keep_end = log.log_end_offset
    active_path = log.segments[-1].path
    cut_at = log.segments[-1].size
    expected = state(log)
    log.append_as_leader(pbatch(12, 2), 0)
    log.append_as_leader(pbatch(14, 2), 0)
    log.close()  # snapshot at 16
    assert snapshots(log) == [16]
    with open(active_path, "r+b") as f:  # the tail was lost (and a torn byte added)
        f.truncate(cut_at + 1)
    log2 = reopen(log, clean=False)
    assert log2.log_end_offset == keep_end == 12
    assert 16 not in snapshots(log2)
    assert state(log2) == expected
    # the lost batches are not duplicates any more: the producer resends them in order
    with pytest.raises(OutOfOrderSequenceError):
        log2.append_as_leader(pbatch(14, 2), 0)
    assert log2.append_as_leader(pbatch(12, 2), 0).first_offset == 12
    log2.close()


# ------------------------------------------------------------------ truncation and deletion


def test_truncate_to_keeps_state_consistent(tmp_path: Path) -> None:
    log = open_log(tmp_path, cfg=config(segment_bytes=600))
    seq = {0: 0, 1: 0}
    states: dict[int, dict[int, ProducerStateEntry]] = {0: {}}
    for i in range(30):
        p = i % 2
        n = 1 + i % 3
        log.append_as_leader(pbatch(seq[p], n, pid=PID + p), 0)
        seq[p] += n
        states[log.log_end_offset] = state(log)
    assert len(log.segments) > 3
    for target in sorted(states, reverse=True)[3::7]:
        log.truncate_to(target)
        assert log.log_end_offset == target
        assert state(log) == states[target], target
        assert all(s <= target for s in snapshots(log))
    # and the truncated log behaves like one that never had the tail
    end = log.log_end_offset
    last = state(log)
    for pid, entry in last.items():
        with pytest.raises(OutOfOrderSequenceError):
            log.append_as_leader(pbatch(entry.last_seq + 2, pid=pid), 0)
        assert log.append_as_leader(pbatch(entry.last_seq + 1, pid=pid), 0).num_batches == 1
    assert log.log_end_offset == end + len(last)
    log.close()


def test_truncate_fully_forgets_every_producer(tmp_path: Path) -> None:
    log = open_log(tmp_path, cfg=config(segment_bytes=600))
    many_producers(log)
    assert snapshots(log)
    log.truncate_fully_and_start_at(500)
    assert state(log) == {} and snapshots(log) == []
    assert log.append_as_leader(pbatch(999), 0).first_offset == 500  # no state: any sequence
    log2 = reopen(log, clean=True)
    assert set(state(log2)) == {PID} and log2.log_end_offset == 501
    log2.close()


def test_delete_records_and_retention_keep_state_and_prune_snapshots(tmp_path: Path) -> None:
    log = open_log(tmp_path, cfg=config(segment_bytes=500, retention_ms=1000))
    for i in range(30):
        log.append_as_leader(pbatch(i), 0)
    log.update_high_watermark(log.log_end_offset)
    live = state(log)
    log.delete_records_before(25)
    assert state(log) == live  # as in Kafka: producer state outlives its records
    assert log.append_as_leader(pbatch(30), 0).first_offset == 30
    assert log.append_as_leader(pbatch(30), 0).num_batches == 0
    log.update_high_watermark(log.log_end_offset)
    first_base = log.segments[0].base_offset
    assert all(s >= first_base for s in snapshots(log))
    log.close()
    log2 = reopen(log, clean=True, log_start_offset=25)
    assert log2.log_start_offset == 25
    assert log2.append_as_leader(pbatch(30), 0).num_batches == 0
    log2.close()


# ------------------------------------------------------------------ expiry


def test_idle_producers_expire(tmp_path: Path) -> None:
    time = MockTime(T0)
    log = open_log(tmp_path, time=time)
    log.append_as_leader(pbatch(0, 2, pid=1), 0)
    time.sleep(DEFAULT_PRODUCER_ID_EXPIRATION_MS // 2)
    log.append_as_leader(pbatch(0, 2, pid=2, ts=time.milliseconds()), 0)
    assert log.remove_expired_producers(T0 + DEFAULT_PRODUCER_ID_EXPIRATION_MS - 1) == 0
    assert log.remove_expired_producers(T0 + DEFAULT_PRODUCER_ID_EXPIRATION_MS) == 1
    assert [p.producer_id for p in log.active_producers()] == [2]
    # expired: any sequence is accepted again, and the old batch is no duplicate
    assert log.append_as_leader(pbatch(0, 2, pid=1, ts=time.milliseconds()), 0).num_batches == 1
    log.close()


def test_expired_producers_are_skipped_when_a_snapshot_loads(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(pbatch(0, pid=1), 0)
    log.append_as_leader(pbatch(0, pid=2, ts=T0 + 1000), 0, now_ms=T0 + 1000)
    log.close(sync=True)
    later = MockTime(T0 + DEFAULT_PRODUCER_ID_EXPIRATION_MS + 500)
    log2 = reopen(log, clean=True, time=later)
    assert [p.producer_id for p in log2.active_producers()] == [2]
    log2.close()


def test_log_manager_cleanup_expires_producers(tmp_path: Path) -> None:
    time = MockTime(T0)
    lm = LogManager([str(tmp_path)], LogConfig(), time=time, producer_id_expiration_ms=1000)
    lm.startup()
    lg = lm.get_or_create_log("t", 0)
    lg.append_as_leader(pbatch(0), 0)
    lm.cleanup_logs(T0 + 999)
    assert len(lg.active_producers()) == 1
    lm.cleanup_logs(T0 + 1000)
    assert lg.active_producers() == []
    lm.shutdown()


def test_manager_without_log(tmp_path: Path) -> None:
    """The manager on its own: prepare/update, map end, snapshot and reload."""
    psm = ProducerStateManager(str(tmp_path))
    info = psm.prepare_update(9, AppendOrigin.CLIENT)
    info.append_data_batch(0, 0, 4, T0, 0, 4, False)
    assert psm.last_entry(9) is None  # nothing until update
    psm.update(info)
    psm.update_map_end_offset(5)
    psm.take_snapshot(sync=True)
    other = ProducerStateManager(str(tmp_path))
    other.truncate_and_reload(0, 5, T0, force=True)
    assert other.map_end_offset == 5 and other.producers == psm.producers


def test_batches_are_rewritten_in_place_only_up_to_the_one_refused(tmp_path: Path) -> None:
    """The producer checks run batch by batch before each header is rewritten
    (``ProducerStateAnalysis``): the batches before a duplicate or a refused batch already
    carry their offsets, that batch and the ones after it the header the producer sent."""
    log = open_log(tmp_path)
    log.append_as_leader(batch(3), 0)
    log.append_as_leader(pbatch(0, 2), 0)
    for tail in (pbatch(0, 2), pbatch(7)):  # a duplicate, then a sequence gap
        buf = bytearray(batch(1) + tail + batch(1))
        if tail == pbatch(0, 2):
            assert log.append_as_leader(buf, 5).num_batches == 0
        else:
            with pytest.raises(OutOfOrderSequenceError):
                log.append_as_leader(buf, 5)
        headers = [h for _, h in iter_batches(buf)]
        assert [h.base_offset for h in headers] == [5, 0, 0]
        assert [h.partition_leader_epoch for h in headers] == [5, -1, -1]
    assert log.log_end_offset == 5
    log.close()
