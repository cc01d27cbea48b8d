"""Where I/O errors in a log dir are reported (Java: ``LogDirFailureChannel``).

Why a channel: an I/O error (ENOSPC on a full disk, EIO from a failing one, EROFS after
the kernel remounted it read-only) can surface in any of a dozen places -- an append,
a segment roll, an index write, an fsync, a checkpoint, a producer snapshot, the
cleaner.  What it means is the same each time: the dir can no longer be trusted to hold
what the broker acknowledges.  So every one of those places does two things only:
report the dir here (``maybe_add_offline_log_dir``) and raise ``KafkaStorageError`` to
its caller.  The reaction lives in one room, the broker (``KafkaServer``), which
listens here; storage never decides to shut a process down.

Once offline, a dir stays offline for the life of the process: every ``Log`` in it
refuses further reads and writes with ``KafkaStorageError`` (``check_online``), so
nothing more is appended or acknowledged from it, and ``LogManager.shutdown`` neither
flushes nor checkpoints it nor writes its clean-shutdown marker -- the next start
recovers it from its files (valid batches only; a torn tail is cut).  Kafka takes just
that dir's partitions offline and keeps serving the others; when *all* of a broker's
dirs are offline it halts ("Shutdown broker because all log dirs in ... have failed").
A millrace broker has one log dir, so the first failure is the last.

Thread-safe: appends run on the event-loop thread, flushes, retention and the cleaner
on others.  Listeners are called on the reporting thread, once per dir, outside the
lock; they must hand the work to their own thread (the broker uses
``loop.call_soon_threadsafe``).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

log = logging.getLogger("millrace.storage")

# (log dir, message, the error): called once, when the dir goes offline
OfflineLogDirListener = Callable[[str, str, BaseException | None], None]


def io_error_of(error: BaseException) -> OSError | None:
    """The I/O error behind ``error``: itself if it is an ``OSError``, else the
    ``OSError`` a storage error was raised from (``KafkaStorageError(...) from e``); None
    for storage errors that are not I/O (a closed log, a dir already offline)."""
    if isinstance(error, OSError):
        return error
    cause = error.__cause__
    return cause if isinstance(cause, OSError) else None


class LogDirFailureChannel:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._offline: dict[str, str] = {}  # guarded by _lock: dir -> why
        self._listeners: list[OfflineLogDirListener] = []  # guarded by _lock

    @staticmethod
    def _key(log_dir: str) -> str:
        return os.path.abspath(log_dir)

    def add_listener(self, listener: OfflineLogDirListener) -> None:
        """Call ``listener`` for every dir that goes offline from now on, and at once for
        those already offline (a failure during start-up is not missed)."""
        with self._lock:
            self._listeners.append(listener)
            already = list(self._offline.items())
        for d, why in already:
            listener(d, why, None)

    def maybe_add_offline_log_dir(self, log_dir: str, message: str,
                                  error: BaseException | None = None) -> bool:
        """Mark ``log_dir`` offline because of ``error``; True the first time (the
        listeners are told then), False if it already was."""
        d = self._key(log_dir)
        with self._lock:
            if d in self._offline:
                return False
            why = f"{message}: {error}" if error is not None else message
            self._offline[d] = why
            listeners = list(self._listeners)
        log.error("log dir %s is offline: %s", d, why)
        for listener in listeners:
            try:
                listener(d, why, error)
            except Exception:  # one listener's bug must not hide the failure from the next
                log.exception("offline log dir listener failed for %s", d)
        return True

    def has_offline_log_dir(self, log_dir: str) -> bool:
        with self._lock:
            return self._key(log_dir) in self._offline

    def offline_reason(self, log_dir: str) -> str | None:
        with self._lock:
            return self._offline.get(self._key(log_dir))

    @property
    def offline_log_dirs(self) -> list[str]:
        with self._lock:
            return sorted(self._offline)
