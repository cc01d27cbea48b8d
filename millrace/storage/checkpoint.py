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
file, never a torn one.  Reading a malformed file raises ``CorruptCheckpointError``; a
missing file reads as empty.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping

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
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(os.path.abspath(path)))


class OffsetCheckpointFile:
    """One checkpoint file: ``write({(topic, partition): offset})`` / ``read()``.

    Thread-safe: a lock serialises writers, so periodic and shutdown checkpoints can race.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        lines = [str(CURRENT_VERSION), str(len(offsets))]
        for (topic, partition), offset in sorted(offsets.items()):
            if not topic or any(c.isspace() for c in topic):
                raise ValueError(f"topic name {topic!r} cannot be checkpointed")
            lines.append(f"{topic} {partition} {offset}")
        data = ("\n".join(lines) + "\n").encode()
        with self._lock:
            write_atomically(self.path, data)

    def read(self) -> dict[TopicPartition, int]:
        with self._lock:
            try:
                with open(self.path, encoding="utf-8") as f:
                    text = f.read()
            except FileNotFoundError:
                return {}
            except UnicodeDecodeError as e:
                raise CorruptCheckpointError(f"{self.path}: not text: {e}") from None
        return self._parse(text)

    def _parse(self, text: str) -> dict[TopicPartition, int]:
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
        if version != CURRENT_VERSION:
            raise bad(f"unsupported version {version}")
        entries = [ln for ln in lines[2:] if ln.strip()]
        if count != len(entries):
            raise bad(f"expected {count} entries, found {len(entries)}")
        out: dict[TopicPartition, int] = {}
        for ln in entries:
            parts = ln.split()
            if len(parts) != 3:
                raise bad(f"line {ln!r}")
            try:
                out[(parts[0], int(parts[1]))] = int(parts[2])
            except ValueError:
                raise bad(f"line {ln!r}") from None
        return out
