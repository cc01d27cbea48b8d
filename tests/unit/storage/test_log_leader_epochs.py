"""The leader epoch cache inside Log: appends, truncation, log start moves, load/rebuild."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from millrace.record.batch import iter_batches
from millrace.storage import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, FetchIsolation, Log
from millrace.storage.leader_epoch_cache import LEADER_EPOCH_CHECKPOINT
from tests.unit.storage.storagegen import T0, batch, config, open_log


def pairs(log: Log) -> list[tuple[int, int]]:
    return [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries()]


def file_text(log: Log) -> str:
    with open(os.path.join(log.dir, LEADER_EPOCH_CHECKPOINT)) as f:
        return f.read()


def append(log: Log, epoch: int, n_batches: int = 1, per_batch: int = 1,
           value_size: int = 0) -> None:
    for _ in range(n_batches):
        values = [b"x" * value_size] * per_batch if value_size else per_batch
        log.append_as_leader(batch(values), epoch)


def abandon(log: Log) -> None:
    """A crash: the object is dropped without close (its descriptors are released so the
    test leaves no open files; nothing is flushed or written)."""
    log._local.close(sync=False)


def reopen(log: Log, **kwargs: object) -> Log:
    cfg = kwargs.pop("cfg", log.config)
    return Log(log.dir, cfg, **kwargs)  # type: ignore[arg-type]


# ------------------------------------------------------------------ appends


def test_leader_appends_record_where_each_new_epoch_starts(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    assert (log.latest_epoch, pairs(log)) == (-1, [])
    assert log.end_offset_for_epoch(0) == (-1, -1)
    append(log, 0, 3, per_batch=2)          # offsets 0..5
    append(log, 3, 1, per_batch=4)          # 6..9
    append(log, 3, 1)                       # 10
    append(log, 4, 2)                       # 11..12
    assert pairs(log) == [(0, 0), (3, 6), (4, 11)]
    assert file_text(log) == "0\n3\n0 0\n3 6\n4 11\n"
    assert log.latest_epoch == 4
    assert log.end_offset_for_epoch(0) == (0, 6)
    assert log.end_offset_for_epoch(2) == (0, 6)
    assert log.end_offset_for_epoch(3) == (3, 11)
    assert log.end_offset_for_epoch(4) == (4, 13)
    assert log.end_offset_for_epoch(5) == (-1, -1)
    log.close()


def test_appends_without_an_epoch_record_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, -1, 2)
    assert pairs(log) == [] and log.log_end_offset == 2
    assert not os.path.exists(os.path.join(log.dir, LEADER_EPOCH_CHECKPOINT))
    log.close()


def test_a_retried_batch_at_a_new_epoch_records_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    sent = batch(2, producer_id=7, producer_epoch=0, base_sequence=0)
    log.append_as_leader(sent, 1)
    info = log.append_as_leader(sent, 2)  # the retry reaches the next leader epoch
    assert (info.first_offset, info.num_batches) == (0, 0)
    assert pairs(log) == [(1, 0)]
    log.close()


def test_follower_appends_take_each_batchs_epoch(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "a")
    for epoch, n in [(0, 2), (2, 1), (2, 1), (5, 3)]:
        append(leader, epoch, n)
    follower = open_log(tmp_path / "b")
    data = leader.read(0, 10**6, FetchIsolation.LOG_END).read()
    follower.append_as_follower(data)
    assert pairs(follower) == pairs(leader) == [(0, 0), (2, 2), (5, 4)]
    assert file_text(follower) == "0\n3\n0 0\n2 2\n5 4\n"
    # the leader's next epoch reaches the follower with its first batch
    append(leader, 6)
    follower.append_as_follower(leader.read(7, 10**6, FetchIsolation.LOG_END).read())
    assert pairs(follower) == [(0, 0), (2, 2), (5, 4), (6, 7)]
    leader.close()
    follower.close()


def test_list_offsets_epochs_come_from_the_cache(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, 1, 3)
    append(log, 2, 3)
    log.update_high_watermark(6)
    log.leader_epoch_cache.assign(4, log.log_end_offset)  # new leader, nothing written yet
    latest = log.fetch_offset_by_timestamp(LATEST_TIMESTAMP)
    assert latest is not None and (latest.offset, latest.leader_epoch) == (6, 4)
    earliest = log.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP)
    assert earliest is not None and (earliest.offset, earliest.leader_epoch) == (0, 1)
    log.delete_records_before(4)
    earliest = log.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP)
    assert earliest is not None and (earliest.offset, earliest.leader_epoch) == (4, 2)
    log.close()


# ------------------------------------------------------------------ truncation


def test_truncate_to_drops_the_entries_past_the_new_end(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, 0, 2)            # 0..1
    append(log, 1, 1, 3)         # 2..4 in one batch
    append(log, 2, 2)            # 5..6
    assert pairs(log) == [(0, 0), (1, 2), (2, 5)]
    assert log.truncate_to(6) is True
    assert pairs(log) == [(0, 0), (1, 2), (2, 5)]
    assert log.truncate_to(5) is True
    assert pairs(log) == [(0, 0), (1, 2)]
    assert log.truncate_to(3) is True  # the batch 2..4 straddles 3: the log ends at 2
    assert log.log_end_offset == 2
    assert pairs(log) == [(0, 0)]
    assert file_text(log) == "0\n1\n0 0\n"
    log.close()


def test_truncate_to_the_log_end_drops_an_empty_epoch_at_the_end(tmp_path: Path) -> None:
    # a leader that recorded its epoch (KAFKA-7415) and lost leadership before writing
    log = open_log(tmp_path)
    append(log, 0, 3)
    log.leader_epoch_cache.assign(1, 3)
    assert log.truncate_to(3) is False
    assert pairs(log) == [(0, 0)] and file_text(log) == "0\n1\n0 0\n"
    log.close()


def test_truncate_fully_clears_the_cache(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, 0, 3)
    append(log, 1, 3)
    log.truncate_fully_and_start_at(10)
    assert pairs(log) == [] and log.latest_epoch == -1 and file_text(log) == "0\n0\n"
    append(log, 2)
    assert pairs(log) == [(2, 10)]
    log.close()


def test_delete_records_clips_the_first_entry(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, 0, 4)
    append(log, 3, 4)
    log.update_high_watermark(8)
    log.delete_records_before(2)
    assert pairs(log) == [(0, 2), (3, 4)]
    log.delete_records_before(6)
    assert pairs(log) == [(3, 6)] and file_text(log) == "0\n1\n3 6\n"
    log.close()


def test_retention_clips_the_first_entry_to_the_first_segment(tmp_path: Path) -> None:
    log = open_log(tmp_path, cfg=config(segment_bytes=300, retention_bytes=400,
                                        file_delete_delay_ms=0))
    for epoch in range(4):
        append(log, epoch, 3, value_size=60)
    log.update_high_watermark(log.log_end_offset)
    assert pairs(log) == [(0, 0), (1, 3), (2, 6), (3, 9)]
    assert log.delete_old_segments(T0) > 0
    start = log.log_start_offset
    assert start == log.segments[0].base_offset and start > 0
    expected = [(e, s) for e, s in [(0, 0), (1, 3), (2, 6), (3, 9)] if s > start]
    first_epoch = max(e for e, s in [(0, 0), (1, 3), (2, 6), (3, 9)] if s <= start)
    assert pairs(log) == [(first_epoch, start), *expected]
    log.close()


# ------------------------------------------------------------------ load


def test_reload_after_close(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, 0, 2)
    append(log, 5, 2)
    log.close()
    again = reopen(log, had_clean_shutdown=True)
    assert pairs(again) == [(0, 0), (5, 2)] and again.end_offset_for_epoch(0) == (0, 2)
    append(again, 5)
    append(again, 6)
    assert pairs(again) == [(0, 0), (5, 2), (6, 5)]
    again.close()


def test_reload_after_a_crash(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, 0, 2)
    append(log, 5, 2)
    log.leader_epoch_cache.assign(7, 4)
    abandon(log)
    assert file_text(log) == "0\n3\n0 0\n5 2\n7 4\n"  # written when it happened
    again = reopen(log, had_clean_shutdown=False)
    # an entry at the log end names no record and goes on load, as in Kafka (a leader
    # assigns its epoch again when it is made leader after the restart)
    assert pairs(again) == [(0, 0), (5, 2)]
    assert file_text(again) == "0\n2\n0 0\n5 2\n"
    assert again.end_offset_for_epoch(5) == (5, 4)
    again.close()


def test_load_trims_entries_a_crash_left_past_the_log_end(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, 0, 3)
    append(log, 2, 3)
    abandon(log)
    # the epoch file was written but the records of epochs 4 and 6 never reached the disk
    with open(os.path.join(log.dir, LEADER_EPOCH_CHECKPOINT), "w") as f:
        f.write("0\n4\n0 0\n2 3\n4 6\n6 9\n")
    again = reopen(log, had_clean_shutdown=False)
    assert pairs(again) == [(0, 0), (2, 3)]
    assert file_text(again) == "0\n2\n0 0\n2 3\n"
    again.close()


def test_unclean_load_adds_epochs_the_file_missed(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, 0, 3)
    log.flush()
    append(log, 2, 3)
    abandon(log)
    with open(os.path.join(log.dir, LEADER_EPOCH_CHECKPOINT), "w") as f:
        f.write("0\n1\n0 0\n")  # as if epoch 2's entry were lost
    again = reopen(log, had_clean_shutdown=False, recovery_point=3)
    assert pairs(again) == [(0, 0), (2, 3)]
    again.close()


def test_load_clips_the_first_entry_to_the_log_start(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, 1, 6)
    log.close()
    again = reopen(log, had_clean_shutdown=True, log_start_offset=4)
    assert pairs(again) == [(1, 4)]
    again.close()


def test_missing_file_is_rebuilt_from_the_batches(tmp_path: Path) -> None:
    log = open_log(tmp_path, cfg=config(segment_bytes=300))
    for epoch, n in [(0, 3), (0, 2), (3, 4), (4, 1), (9, 2)]:
        append(log, epoch, n, value_size=40)
    assert len(log.segments) > 2
    expected = pairs(log)
    assert expected == [(0, 0), (3, 5), (4, 9), (9, 10)]
    log.close()
    os.unlink(os.path.join(log.dir, LEADER_EPOCH_CHECKPOINT))
    again = reopen(log, had_clean_shutdown=True, log_start_offset=2)
    assert pairs(again) == [(0, 2), (3, 5), (4, 9), (9, 10)]
    assert file_text(again) == "0\n4\n0 2\n3 5\n4 9\n9 10\n"
    again.close()


def test_corrupt_file_is_rebuilt_with_a_warning(tmp_path: Path,
                                                caplog: pytest.LogCaptureFixture) -> None:
    log = open_log(tmp_path)
    append(log, 2, 2)
    append(log, 3, 1)
    log.close()
    path = os.path.join(log.dir, LEADER_EPOCH_CHECKPOINT)
    with open(path, "w") as f:
        f.write("0\n7\n2 0\n")
    with caplog.at_level(logging.WARNING, logger="millrace.storage"):
        again = reopen(log, had_clean_shutdown=True)
    assert f"{path}: malformed checkpoint (expected 7 entries, found 1)" in caplog.text
    assert pairs(again) == [(2, 0), (3, 2)]
    assert file_text(again) == "0\n2\n2 0\n3 2\n"
    again.close()


def test_corrupt_file_of_an_empty_log_is_replaced(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.close()
    with open(os.path.join(log.dir, LEADER_EPOCH_CHECKPOINT), "w") as f:
        f.write("garbage")
    again = reopen(log)
    assert pairs(again) == [] and file_text(again) == "0\n0\n"
    again.close()


def test_a_new_log_writes_no_file_until_an_epoch_is_known(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.close()
    assert LEADER_EPOCH_CHECKPOINT not in os.listdir(log.dir)


def test_rename_and_delete(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, 1, 2)
    new_dir = str(tmp_path / "topic-0.abc-delete")
    log.rename_dir(new_dir)
    assert log.leader_epoch_cache.checkpoint.path == os.path.join(new_dir, LEADER_EPOCH_CHECKPOINT)
    with open(os.path.join(new_dir, LEADER_EPOCH_CHECKPOINT)) as f:
        assert f.read() == "0\n1\n1 0\n"
    log.delete()
    assert pairs(log) == [] and not os.path.exists(new_dir)


def test_headers_carry_the_epochs_the_cache_names(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for epoch in (0, 0, 1, 3, 3, 3, 8):
        append(log, epoch)
    data = log.read_all_bytes()
    firsts: dict[int, int] = {}
    for _, h in iter_batches(data):
        firsts.setdefault(h.partition_leader_epoch, h.base_offset)
    assert pairs(log) == sorted(firsts.items()) == [(0, 0), (1, 2), (3, 3), (8, 6)]
    log.close()
