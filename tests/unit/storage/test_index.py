from __future__ import annotations

import struct
from pathlib import Path

import pytest

from millrace.storage import CorruptIndexError, OffsetIndex, TimeIndex


def test_offset_index_lookup_is_floor(tmp_path: Path) -> None:
    idx = OffsetIndex(str(tmp_path / "x.index"), 100, 1024)
    for off, pos in [(105, 400), (110, 900), (130, 4000)]:
        idx.append(off, pos)
    assert idx.lookup(99) == (100, 0)
    assert idx.lookup(104) == (100, 0)
    assert idx.lookup(105) == (105, 400)
    assert idx.lookup(129) == (110, 900)
    assert idx.lookup(10**12) == (130, 4000)
    idx.close()


def test_offset_index_file_is_kafkas_format_and_reloads(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    idx = OffsetIndex(str(path), 100, 1024)
    idx.create()
    idx.append(105, 400)
    idx.append(110, 900)
    assert path.read_bytes() == b""  # buffered until written
    idx.write_buffer()
    assert path.read_bytes() == struct.pack(">iiii", 5, 400, 10, 900)
    idx.close()
    again = OffsetIndex(str(path), 100, 1024)
    assert again.entries == 2 and again.lookup(111) == (110, 900)
    again.sanity_check(log_size=1000)
    again.close()


def test_offset_index_rejects_non_increasing_and_full(tmp_path: Path) -> None:
    idx = OffsetIndex(str(tmp_path / "x.index"), 0, 16)  # room for 2 entries
    idx.append(1, 10)
    with pytest.raises(CorruptIndexError):
        idx.append(1, 20)
    idx.append(2, 20)
    assert idx.is_full
    with pytest.raises(CorruptIndexError):
        idx.append(3, 30)
    idx.close()


def test_offset_index_truncate(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    idx = OffsetIndex(str(path), 0, 1024)
    for i in range(1, 6):
        idx.append(i * 10, i * 100)
    idx.write_buffer()
    idx.append(60, 600)  # buffered, then cut
    idx.truncate_to(30)
    assert idx.entries == 2 and idx.lookup(1000) == (20, 200)
    idx.close()
    assert path.read_bytes() == struct.pack(">iiii", 10, 100, 20, 200)


@pytest.mark.parametrize("content", [
    b"\x00" * 7,                                   # not a multiple of 8
    struct.pack(">iiii", 5, 100, 5, 200),          # offsets not increasing
    struct.pack(">iiii", 5, 100, 6, 50),           # positions going back
    struct.pack(">ii", 5, 5000),                   # position past the log
    b"\x00" * 16,                                  # zeroed
])
def test_offset_index_sanity_check_catches_damage(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "x.index"
    path.write_bytes(content)
    idx = OffsetIndex(str(path), 0, 1024)
    with pytest.raises(CorruptIndexError):
        idx.sanity_check(log_size=1000)
    idx.close()


def test_time_index_only_grows_and_looks_up_floor(tmp_path: Path) -> None:
    path = tmp_path / "x.timeindex"
    ti = TimeIndex(str(path), 50, 1024)
    assert ti.maybe_append(1000, 55)
    assert not ti.maybe_append(1000, 56)  # same timestamp: skipped
    assert not ti.maybe_append(900, 57)
    assert not ti.maybe_append(-1, 58)
    assert ti.maybe_append(2000, 60)
    assert ti.lookup(999) == (-1, 50)
    assert ti.lookup(1500) == (1000, 55)
    assert ti.lookup(5000) == (2000, 60)
    assert ti.last_entry() == (2000, 60)
    ti.close()
    assert path.read_bytes() == struct.pack(">qiqi", 1000, 5, 2000, 10)
    again = TimeIndex(str(path), 50, 1024)
    again.sanity_check(last_offset=60)
    with pytest.raises(CorruptIndexError):
        again.sanity_check(last_offset=59)  # entry past the end of the log
    again.truncate_to(60)
    assert again.last_entry() == (1000, 55)
    again.close()
    assert path.read_bytes() == struct.pack(">qi", 1000, 5)


def test_time_index_full(tmp_path: Path) -> None:
    ti = TimeIndex(str(tmp_path / "x.timeindex"), 0, 24)
    assert ti.maybe_append(1, 0) and ti.maybe_append(2, 1)
    assert ti.is_full and not ti.maybe_append(3, 2)
    assert ti.maybe_append(3, 2, skip_full_check=True)
    ti.close()


def _open_fds_on(path: Path) -> int:
    fd_dir = Path("/proc/self/fd")
    count = 0
    for fd in fd_dir.iterdir():
        try:
            if Path(fd.readlink()) == path:
                count += 1
        except OSError:  # closed while listing (the listing's own descriptor)
            continue
    return count


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
@pytest.mark.parametrize("cls", [OffsetIndex, TimeIndex])
def test_a_created_index_holds_no_descriptor_until_written_and_flush_syncs_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cls: type[OffsetIndex | TimeIndex]
        ) -> None:
    """Idle partitions must not hold two descriptors each (10,000 partitions ran out of
    them); the new file is still synced by the next flush, and a deleted one is not
    brought back by it."""
    import os
    synced: list[int] = []
    real_sync = os.fdatasync

    def fdatasync(fd: int) -> None:
        synced.append(fd)
        real_sync(fd)
    monkeypatch.setattr(os, "fdatasync", fdatasync)
    path = tmp_path / "x.idx"
    idx = cls(str(path), 0, 1024)
    idx.create()
    assert path.exists() and path.read_bytes() == b""
    assert _open_fds_on(path) == 0
    idx.flush()
    assert len(synced) == 1 and _open_fds_on(path) == 0
    idx.flush()  # nothing new: no second sync of an unwritten file
    assert len(synced) == 1
    if isinstance(idx, OffsetIndex):
        idx.append(5, 100)
    else:
        idx.maybe_append(1000, 5)
    idx.flush()  # written: the descriptor is opened, kept and synced as before
    assert len(synced) == 2 and _open_fds_on(path) == 1
    idx.close()
    assert _open_fds_on(path) == 0

    gone = cls(str(tmp_path / "gone.idx"), 0, 1024)
    gone.create()
    os.unlink(gone.path)
    gone.flush()
    assert not Path(gone.path).exists()
    gone.close()
