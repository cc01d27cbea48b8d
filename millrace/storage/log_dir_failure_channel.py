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

How a log reports (Java: ``LocalLog.maybeHandleIOException``): every method of ``Log``
that writes is marked ``@reports_io_errors(what)``: an ``OSError`` (ENOSPC, EIO, EROFS...)
out of it -- raw, or already wrapped in ``KafkaStorageError`` by a segment or the epoch
cache -- marks the log's parent dir offline here (``LogDirErrorHandler.io_failed``) and
reaches the caller as ``KafkaStorageError``.  From then on every log of that dir refuses
reads and writes (``check_online``), so a write that hit the error is never acknowledged
and none after it is attempted.  A segment append that failed has already cut its partial
write, so the file still ends on a batch boundary.

Thread-safe: appends run on the event-loop thread, flushes, retention and the cleaner
on others.  Listeners are called on the reporting thread, once per dir, outside the
lock; they must hand the work to their own thread (the broker uses
``loop.call_soon_threadsafe``).
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Callable
from typing import Concatenate, ParamSpec, Protocol, TypeVar

from millrace.common.errors import KafkaError, KafkaStorageError

log = logging.getLogger("millrace.storage")

_P = ParamSpec("_P")
_R = TypeVar("_R")

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
        if not self._offline:  # every append asks: no path to normalize while all is well
            return False
        with self._lock:
            return self._key(log_dir) in self._offline

    def offline_reason(self, log_dir: str) -> str | None:
        with self._lock:
            return self._offline.get(self._key(log_dir))

    @property
    def offline_log_dirs(self) -> list[str]:
        with self._lock:
            return sorted(self._offline)


class LogDirErrorHandler:
    """One log's side of the channel: whether its dir is offline, and the report of an
    I/O error in it (Java: ``UnifiedLog``'s ``logDirFailureChannel`` and ``parentDir``).
    Without a channel (a log opened by a tool) nothing is ever offline."""

    def __init__(self, channel: LogDirFailureChannel | None, log_dir: str, name: str) -> None:
        self.channel = channel
        self.log_dir = log_dir  # the log dir a partition dir lives in
        self.name = name  # "<topic>-<partition>", for the messages

    @property
    def offline(self) -> bool:
        ch = self.channel
        return ch is not None and ch.has_offline_log_dir(self.log_dir)

    def check_online(self) -> None:
        """Raise ``KafkaStorageError`` if the dir is offline."""
        if self.offline:
            raise KafkaStorageError(
                f"log dir {self.log_dir} of {self.name} is offline: "
                f"{self.channel.offline_reason(self.log_dir)}"  # type: ignore[union-attr]
            )

    def io_failed(self, what: str, error: OSError) -> KafkaError:
        """Report an I/O error of this log's dir; the error to raise to the caller."""
        message = f"{what} of {self.name} in {self.log_dir} failed"
        if self.channel is not None:
            self.channel.maybe_add_offline_log_dir(self.log_dir, message, error)
        return KafkaStorageError(f"{message}: {error}")


class InLogDir(Protocol):
    """What ``reports_io_errors`` needs of the object whose methods it marks."""

    @property
    def log_dir_errors(self) -> LogDirErrorHandler: ...


_S = TypeVar("_S", bound=InLogDir)


def reports_io_errors(what: str) -> Callable[[Callable[Concatenate[_S, _P], _R]],
                                             Callable[Concatenate[_S, _P], _R]]:
    """Mark a writing method of a log: an I/O error out of it takes the log dir offline
    and is raised as ``KafkaStorageError`` (see the module docstring)."""
    def decorate(method: Callable[Concatenate[_S, _P], _R]) -> Callable[Concatenate[_S, _P], _R]:
        @functools.wraps(method)
        def wrapper(self: _S, *args: _P.args, **kwargs: _P.kwargs) -> _R:
            try:
                return method(self, *args, **kwargs)
            except (OSError, KafkaStorageError) as e:
                cause = io_error_of(e)
                if cause is None:
                    raise
                raise self.log_dir_errors.io_failed(what, cause) from cause
        return wrapper
    return decorate
