"""Offset checkpoint files (Java: ``OffsetCheckpointFile`` over ``CheckpointFile``).

Kafka keeps one of each per log dir, all in the same text format::

    0                      <- format version
    2                      <- number of entries
    orders 0 1234          <- "<topic> <partition> <offset>", one per line
    orders 1 98

* ``recovery-point-offset-checkpoint`` — per partition, offset below which the log is known
  to be fsync'd; recovery after an unclean shutdown starts at its segment.
* ``replication-offset-checkpoint`` — high watermarks.
* ``log-start-offset-checkpoint`` — log start offsets moved by DeleteRecords/retention.
* ``cleaner-offset-checkpoint`` — first dirty offset of compacted logs.

Writes are atomic (KAFKA-1647): the new content goes to ``<name>.tmp``, is fsync'd, renamed
over the old file, and the directory is fsync'd, so a crash leaves either the old or the new
file, never a torn one.  Reading a malformed file raises ``CorruptCheckpointError`` naming the
file; a missing file reads as empty.

``CheckpointFile`` (Java: ``CheckpointFile<T>``) is the format itself: a version line, a
count line, then one entry per line, each turned to and from text by an ``EntryFormatter``.
``OffsetCheckpointFile`` is it with "<topic> <partition> <offset>" entries; the
per-partition ``leader-epoch-checkpoint`` (``leader_epoch_cache.py``) uses it with
"<epoch> <start offset>" entries.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterable, Mapping
from typing import Generic, Protocol, TypeVar

from millrace.common.errors import MillraceError

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
CURRENT_VERSION = 0

TopicPartition = tuple[str, int]


class CorruptCheckpointError(MillraceError):
    """A checkpoint file exists but is not in the expected format."""


def fsync_dir(path: str) -> None:
    """fsync a directory so that a rename or create inside it is durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new content."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        # a full disk: the old file stays whole; drop the half-written temp file (its
        # blocks are the only free space the broker can give back)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(os.path.abspath(path)))


T = TypeVar("T")


class EntryFormatter(Protocol[T]):
    """Turns one checkpoint entry into a line and back (Java: ``EntryFormatter``)."""

    def to_line(self, entry: T) -> str:
        """The entry as one line without newline; ValueError if it cannot be written."""
        ...

    def from_line(self, line: str) -> T | None:
        """The entry a line holds, or None if the line is malformed."""
        ...


class CheckpointFile(Generic[T]):
    """One checkpoint file of ``T`` entries: ``write(entries)`` / ``read()``.

    Thread-safe: a lock serialises writers, so periodic and shutdown checkpoints can race.
    """

    def __init__(self, path: str, formatter: EntryFormatter[T],
                 version: int = CURRENT_VERSION) -> None:
        self.path = path
        self.formatter = formatter
        self.version = version
        self._lock = threading.Lock()

    def write(self, entries: Iterable[T]) -> None:
        body = [self.formatter.to_line(e) for e in entries]
        data = "\n".join([str(self.version), str(len(body)), *body, ""]).encode()
        with self._lock:
            write_atomically(self.path, data)

    def read(self) -> list[T]:
        """The entries in file order; [] if the file does not exist."""
        with self._lock:
            try:
                with open(self.path, encoding="utf-8") as f:
                    text = f.read()
            except FileNotFoundError:
                return []
            except UnicodeDecodeError as e:
                raise CorruptCheckpointError(f"{self.path}: not text: {e}") from None
        return self._parse(text)

    def _parse(self, text: str) -> list[T]:
        lines = text.splitlines()

        def bad(why: str) -> CorruptCheckpointError:
            return CorruptCheckpointError(f"{self.path}: malformed checkpoint ({why})")

        if len(lines) < 2:
            raise bad("missing version or count line")
        try:
            version = int(lines[0].strip())
            count = int(lines[1].strip())
        except ValueError:
            raise bad("version and count must be integers") from None
        if version != self.version:
            raise bad(f"unsupported version {version}")
        entries = [ln for ln in lines[2:] if ln.strip()]
        if count != len(entries):
            raise bad(f"expected {count} entries, found {len(entries)}")
        out: list[T] = []
        for ln in entries:
            entry = self.formatter.from_line(ln)
            if entry is None:
                raise bad(f"line {ln!r}")
            out.append(entry)
        return out


class _OffsetFormatter:
    """"<topic> <partition> <offset>" lines."""

    def to_line(self, entry: tuple[TopicPartition, int]) -> str:
        (topic, partition), offset = entry
        if not topic or any(c.isspace() for c in topic):
            raise ValueError(f"topic name {topic!r} cannot be checkpointed")
        return f"{topic} {partition} {offset}"

    def from_line(self, line: str) -> tuple[TopicPartition, int] | None:
        parts = line.split()
        if len(parts) != 3:
            return None
        try:
            return (parts[0], int(parts[1])), int(parts[2])
        except ValueError:
            return None


class OffsetCheckpointFile:
    """A per-log-dir offsets checkpoint: ``write({(topic, partition): offset})`` /
    ``read()``.  Thread-safe (see ``CheckpointFile``)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._file = CheckpointFile(path, _OffsetFormatter())

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        self._file.write(sorted(offsets.items()))

    def read(self) -> dict[TopicPartition, int]:
        return dict(self._file.read())
