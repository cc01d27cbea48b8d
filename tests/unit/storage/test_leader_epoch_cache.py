"""LeaderEpochFileCache and its checkpoint file: Kafka's rules with exact values."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest

from millrace.common.errors import KafkaStorageError
from millrace.storage.checkpoint import CorruptCheckpointError
from millrace.storage.leader_epoch_cache import (
    LEADER_EPOCH_CHECKPOINT,
    EpochEntry,
    LeaderEpochCheckpointFile,
    LeaderEpochFileCache,
)


def cache_in(tmp_path: Path, *entries: tuple[int, int]) -> LeaderEpochFileCache:
    c = LeaderEpochFileCache(LeaderEpochCheckpointFile.in_dir(str(tmp_path)), "t-0")
    for epoch, start in entries:
        c.assign(epoch, start)
    return c


def pairs(c: LeaderEpochFileCache) -> list[tuple[int, int]]:
    return [(e.epoch, e.start_offset) for e in c.entries()]


def file_text(tmp_path: Path) -> str:
    return (tmp_path / LEADER_EPOCH_CHECKPOINT).read_text()


# ------------------------------------------------------------------ assign


def test_assign_appends_new_epochs_and_ignores_the_same_epoch_going_on(tmp_path: Path) -> None:
    c = cache_in(tmp_path)
    assert (c.latest_epoch, c.latest_entry, c.earliest_entry, len(c)) == (-1, None, None, 0)
    assert not (tmp_path / LEADER_EPOCH_CHECKPOINT).exists()  # nothing to write yet
    assert c.assign(0, 0) is True
    assert file_text(tmp_path) == "0\n1\n0 0\n"
    assert c.assign(0, 5) is False  # epoch 0 goes on: no change, no write
    assert c.assign(0, 0) is False
    assert c.assign(2, 100) is True
    assert c.assign(5, 180) is True
    assert pairs(c) == [(0, 0), (2, 100), (5, 180)]
    assert (c.latest_epoch, c.latest_entry, c.earliest_entry) == (5, (5, 180), (0, 0))
    assert file_text(tmp_path) == "0\n3\n0 0\n2 100\n5 180\n"
    assert c.epoch_entry(2) == EpochEntry(2, 100) and c.epoch_entry(3) is None
    assert (c.previous_epoch(5), c.previous_epoch(2), c.previous_epoch(0)) == (2, 0, -1)


def test_assign_the_latest_epoch_at_an_earlier_offset_moves_its_start(tmp_path: Path) -> None:
    c = cache_in(tmp_path, (0, 0), (2, 100))
    assert c.assign(2, 90) is True
    assert pairs(c) == [(0, 0), (2, 90)]


def test_assign_an_older_epoch_replaces_the_conflicting_tail(tmp_path: Path,
                                                             caplog: pytest.LogCaptureFixture
                                                             ) -> None:
    c = cache_in(tmp_path, (0, 0), (2, 100), (5, 180))
    with caplog.at_level(logging.WARNING, logger="millrace.storage"):
        assert c.assign(3, 150) is True
    assert pairs(c) == [(0, 0), (2, 100), (3, 150)]
    assert "replaced conflicting entries [(5, 180)]" in caplog.text
    assert file_text(tmp_path) == "0\n3\n0 0\n2 100\n3 150\n"
    # an epoch at or below an existing one drops it and everything after
    assert c.assign(2, 120) is True
    assert pairs(c) == [(0, 0), (2, 120)]


def test_assign_a_newer_epoch_at_an_earlier_offset_drops_later_starts(tmp_path: Path) -> None:
    c = cache_in(tmp_path, (0, 0), (2, 100), (5, 180))
    assert c.assign(6, 120) is True
    assert pairs(c) == [(0, 0), (2, 100), (6, 120)]
    assert c.assign(7, 100) is True  # start == an entry's start: that entry goes too
    assert pairs(c) == [(0, 0), (7, 100)]


def test_a_new_epoch_at_the_same_start_replaces_an_empty_epoch_quietly(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # KAFKA-7415: a leader records (epoch, LEO) before writing; if it never wrote, the next
    # epoch starts at the same offset and the empty one goes without a warning
    c = cache_in(tmp_path, (0, 0), (2, 100))
    with caplog.at_level(logging.WARNING, logger="millrace.storage"):
        assert c.assign(3, 100) is True
    assert pairs(c) == [(0, 0), (3, 100)]
    assert caplog.text == ""


@pytest.mark.parametrize("epoch,start", [(-1, 0), (0, -1), (-2, 5)])
def test_negative_entries_are_refused(tmp_path: Path, epoch: int, start: int) -> None:
    c = cache_in(tmp_path, (0, 0))
    with pytest.raises(ValueError, match="invalid leader epoch entry"):
        c.assign(epoch, start)
    assert pairs(c) == [(0, 0)]


def test_assign_entries_writes_once(tmp_path: Path) -> None:
    c = cache_in(tmp_path)
    assert c.assign_entries([EpochEntry(1, 0), EpochEntry(1, 3), EpochEntry(4, 7)]) is True
    assert pairs(c) == [(1, 0), (4, 7)]
    assert file_text(tmp_path) == "0\n2\n1 0\n4 7\n"
    assert c.assign_entries([EpochEntry(4, 9)]) is False


def test_flush_false_defers_the_write_until_flush(tmp_path: Path) -> None:
    c = cache_in(tmp_path, (0, 0))
    assert c.assign(1, 10, flush=False) is True
    assert file_text(tmp_path) == "0\n1\n0 0\n"
    c.flush()
    assert file_text(tmp_path) == "0\n2\n0 0\n1 10\n"
    os.unlink(tmp_path / LEADER_EPOCH_CHECKPOINT)
    c.flush()  # nothing pending: no write
    assert not (tmp_path / LEADER_EPOCH_CHECKPOINT).exists()
    c.flush(force=True)
    assert file_text(tmp_path) == "0\n2\n0 0\n1 10\n"


# ------------------------------------------------------------------ end_offset_for


@pytest.mark.parametrize("requested,expected", [
    (-1, (-1, -1)),     # UNDEFINED asked: UNDEFINED answered
    (0, (0, 100)),      # ends where epoch 2 starts
    (1, (0, 100)),      # unknown epoch between two: the largest below it
    (2, (2, 180)),
    (3, (2, 180)),
    (4, (2, 180)),
    (5, (5, 250)),      # the latest epoch ends at the log end
    (6, (-1, -1)),      # above every epoch
])
def test_end_offset_for(tmp_path: Path, requested: int, expected: tuple[int, int]) -> None:
    c = cache_in(tmp_path, (0, 0), (2, 100), (5, 180))
    assert c.end_offset_for(requested, 250) == expected


def test_end_offset_for_an_epoch_below_the_first(tmp_path: Path) -> None:
    # the older epochs left with the start of the log: the requested epoch ends where
    # the first known one starts (Kafka, KAFKA-7415 on)
    c = cache_in(tmp_path, (3, 50), (5, 80))
    assert c.end_offset_for(1, 99) == (1, 50)
    assert c.end_offset_for(4, 99) == (3, 80)


def test_end_offset_for_an_empty_cache_is_undefined(tmp_path: Path) -> None:
    c = cache_in(tmp_path)
    assert c.end_offset_for(0, 10) == (-1, -1)
    assert c.end_offset_for(-1, 10) == (-1, -1)


@pytest.mark.parametrize("offset,epoch", [
    (0, 0), (99, 0), (100, 2), (179, 2), (180, 5), (10**12, 5)])
def test_epoch_for_offset(tmp_path: Path, offset: int, epoch: int) -> None:
    c = cache_in(tmp_path, (0, 0), (2, 100), (5, 180))
    assert c.epoch_for_offset(offset) == epoch


def test_epoch_for_offset_before_the_first_entry(tmp_path: Path) -> None:
    c = cache_in(tmp_path, (3, 50))
    assert (c.epoch_for_offset(49), c.epoch_for_offset(50)) == (-1, 3)


# ------------------------------------------------------------------ truncation


@pytest.mark.parametrize("end,expected,changed", [
    (181, [(0, 0), (2, 100), (5, 180)], False),
    (180, [(0, 0), (2, 100)], True),    # entries starting at the end go
    (150, [(0, 0), (2, 100)], True),
    (100, [(0, 0)], True),
    (0, [], True),
    (-1, [(0, 0), (2, 100), (5, 180)], False),
])
def test_truncate_from_end(tmp_path: Path, end: int, expected: list[tuple[int, int]],
                           changed: bool) -> None:
    c = cache_in(tmp_path, (0, 0), (2, 100), (5, 180))
    assert c.truncate_from_end(end) is changed
    assert pairs(c) == expected
    assert LeaderEpochFileCache(c.checkpoint).entries() == c.entries()  # written


@pytest.mark.parametrize("start,expected,changed", [
    (0, [(0, 0), (2, 100), (5, 180)], False),   # the first entry already starts there
    (50, [(0, 50), (2, 100), (5, 180)], True),  # clipped, not dropped
    (100, [(2, 100), (5, 180)], True),
    (150, [(2, 150), (5, 180)], True),
    (180, [(5, 180)], True),
    (250, [(5, 250)], True),
])
def test_truncate_from_start(tmp_path: Path, start: int, expected: list[tuple[int, int]],
                             changed: bool) -> None:
    c = cache_in(tmp_path, (0, 0), (2, 100), (5, 180))
    assert c.truncate_from_start(start) is changed
    assert pairs(c) == expected
    assert LeaderEpochFileCache(c.checkpoint).entries() == c.entries()


def test_truncate_from_start_before_the_first_entry_changes_nothing(tmp_path: Path) -> None:
    c = cache_in(tmp_path, (3, 50))
    assert c.truncate_from_start(49) is False
    assert pairs(c) == [(3, 50)]


def test_clear_and_flush_and_clear(tmp_path: Path) -> None:
    c = cache_in(tmp_path, (0, 0), (2, 100))
    c.clear_and_flush()
    assert pairs(c) == [] and file_text(tmp_path) == "0\n0\n"
    c.assign(4, 7)
    c.clear()  # memory only
    assert pairs(c) == [] and file_text(tmp_path) == "0\n1\n4 7\n"


# ------------------------------------------------------------------ the file


def test_file_round_trip(tmp_path: Path) -> None:
    cache_in(tmp_path, (0, 0), (2, 100), (5, 180))
    assert sorted(os.listdir(tmp_path)) == [LEADER_EPOCH_CHECKPOINT]  # no .tmp left
    again = LeaderEpochFileCache(LeaderEpochCheckpointFile.in_dir(str(tmp_path)))
    assert pairs(again) == [(0, 0), (2, 100), (5, 180)]
    assert LeaderEpochCheckpointFile.in_dir(str(tmp_path)).read() == [
        EpochEntry(0, 0), EpochEntry(2, 100), EpochEntry(5, 180)]


def test_missing_file_is_an_empty_cache(tmp_path: Path) -> None:
    assert LeaderEpochCheckpointFile.in_dir(str(tmp_path)).read() == []
    assert pairs(cache_in(tmp_path)) == []


def test_a_file_with_conflicting_entries_is_read_as_kafka_assigns_them(tmp_path: Path) -> None:
    (tmp_path / LEADER_EPOCH_CHECKPOINT).write_text("0\n3\n3 10\n2 20\n4 30\n")
    c = LeaderEpochFileCache(LeaderEpochCheckpointFile.in_dir(str(tmp_path)))
    assert pairs(c) == [(2, 20), (4, 30)]
    c.flush()  # the file differed from memory: rewritten
    assert file_text(tmp_path) == "0\n2\n2 20\n4 30\n"


@pytest.mark.parametrize("text", [
    "", "0\n", "1\n0\n", "0\n2\n0 0\n", "0\n1\n0\n", "0\n1\n0 x\n", "0\n1\n0 0 0\n",
    "zero\n0\n", "0\n1\n1.5 3\n",
])
def test_corrupt_file_raises_naming_it(tmp_path: Path, text: str) -> None:
    (tmp_path / LEADER_EPOCH_CHECKPOINT).write_text(text)
    with pytest.raises(CorruptCheckpointError) as e:
        LeaderEpochFileCache(LeaderEpochCheckpointFile.in_dir(str(tmp_path)))
    assert str(tmp_path / LEADER_EPOCH_CHECKPOINT) in str(e.value)


def test_binary_file_is_corrupt(tmp_path: Path) -> None:
    (tmp_path / LEADER_EPOCH_CHECKPOINT).write_bytes(b"\xff\xfe\x00")
    with pytest.raises(CorruptCheckpointError, match=LEADER_EPOCH_CHECKPOINT):
        LeaderEpochCheckpointFile.in_dir(str(tmp_path)).read()


@pytest.mark.parametrize("line", ["-1 0", "0 -5"])
def test_negative_entry_in_file_is_corrupt(tmp_path: Path, line: str) -> None:
    (tmp_path / LEADER_EPOCH_CHECKPOINT).write_text(f"0\n1\n{line}\n")
    with pytest.raises(CorruptCheckpointError, match=f"line '{line}'"):
        LeaderEpochFileCache(LeaderEpochCheckpointFile.in_dir(str(tmp_path)))


def test_write_failure_names_the_file_and_keeps_the_change_pending(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    d.mkdir()
    c = cache_in(d, (0, 0))
    shutil.rmtree(d)
    with pytest.raises(KafkaStorageError, match=f"{d}/{LEADER_EPOCH_CHECKPOINT}"):
        c.assign(1, 5)
    assert pairs(c) == [(0, 0), (1, 5)]
    d.mkdir()
    c.flush()
    assert file_text(d) == "0\n2\n0 0\n1 5\n"


def test_rename_dir_follows_the_partition_dir(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    c = cache_in(tmp_path / "a", (0, 0))
    os.rename(tmp_path / "a", tmp_path / "b")
    c.rename_dir(str(tmp_path / "b"))
    c.assign(1, 3)
    assert file_text(tmp_path / "b") == "0\n2\n0 0\n1 3\n"
