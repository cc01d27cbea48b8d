"""``LogDirFailureChannel``: a dir goes offline once, on its first I/O error, and every
listener hears of it exactly once (also one registered after the failure).  A log's
``LogDirErrorHandler`` and ``@reports_io_errors``: an I/O error out of a marked method
takes the dir offline and reaches the caller as ``KafkaStorageError``; other errors pass
unchanged."""

from __future__ import annotations

import errno
import threading

import pytest

from millrace.common.errors import KafkaStorageError
from millrace.storage import LogDirFailureChannel
from millrace.storage.log_dir_failure_channel import (
    LogDirErrorHandler,
    io_error_of,
    reports_io_errors,
)

ENOSPC = OSError(errno.ENOSPC, "No space left on device")


def test_first_error_takes_the_dir_offline_and_tells_listeners_once() -> None:
    channel = LogDirFailureChannel()
    heard: list[tuple[str, str, BaseException | None]] = []
    channel.add_listener(lambda d, why, e: heard.append((d, why, e)))
    assert not channel.has_offline_log_dir("/data/a")
    assert channel.maybe_add_offline_log_dir("/data/a", "append of t-0 failed", ENOSPC)
    assert not channel.maybe_add_offline_log_dir("/data/a/", "flush of t-1 failed", ENOSPC)
    assert heard == [("/data/a", "append of t-0 failed: [Errno 28] No space left on device",
                      ENOSPC)]
    assert channel.has_offline_log_dir("/data/a") and channel.has_offline_log_dir("/data/./a")
    assert not channel.has_offline_log_dir("/data/b")
    assert channel.offline_log_dirs == ["/data/a"]
    assert channel.offline_reason("/data/a") == heard[0][1]
    assert channel.offline_reason("/data/b") is None


def test_a_listener_added_later_hears_of_dirs_already_offline() -> None:
    channel = LogDirFailureChannel()
    channel.maybe_add_offline_log_dir("/data/a", "checkpoint failed", ENOSPC)
    heard: list[str] = []
    channel.add_listener(lambda d, why, e: heard.append(d))
    assert heard == ["/data/a"]


def test_a_failing_listener_does_not_hide_the_failure_from_the_next() -> None:
    channel = LogDirFailureChannel()
    heard: list[str] = []

    def broken(d: str, why: str, e: BaseException | None) -> None:
        raise RuntimeError("listener bug")

    channel.add_listener(broken)
    channel.add_listener(lambda d, why, e: heard.append(d))
    assert channel.maybe_add_offline_log_dir("/data/a", "roll failed", ENOSPC)
    assert heard == ["/data/a"]


def test_racing_reports_take_the_dir_offline_exactly_once() -> None:
    channel = LogDirFailureChannel()
    heard: list[str] = []
    channel.add_listener(lambda d, why, e: heard.append(why))
    firsts: list[bool] = []
    barrier = threading.Barrier(8)

    def report(i: int) -> None:
        barrier.wait()
        firsts.append(channel.maybe_add_offline_log_dir("/data/a", f"writer {i}", ENOSPC))

    threads = [threading.Thread(target=report, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert firsts.count(True) == 1 and len(heard) == 1


def test_io_error_of_tells_io_errors_from_other_storage_errors() -> None:
    assert io_error_of(ENOSPC) is ENOSPC
    try:
        try:
            raise ENOSPC
        except OSError as e:
            raise KafkaStorageError("append failed") from e
    except KafkaStorageError as wrapped:
        assert io_error_of(wrapped) is ENOSPC
    assert io_error_of(KafkaStorageError("log /x is closed")) is None


class _Writer:
    def __init__(self, errors: LogDirErrorHandler, error: BaseException) -> None:
        self.log_dir_errors = errors
        self.error = error

    @reports_io_errors("append")
    def append(self, n: int) -> int:
        raise self.error


def test_an_io_error_out_of_a_marked_method_takes_the_dir_offline() -> None:
    channel = LogDirFailureChannel()
    errors = LogDirErrorHandler(channel, "/data/a", "t-0")
    errors.check_online()
    with pytest.raises(KafkaStorageError, match=r"append of t-0 in /data/a failed: "
                       r"\[Errno 28\]") as raised:
        _Writer(errors, ENOSPC).append(1)
    assert raised.value.__cause__ is ENOSPC
    assert errors.offline and channel.offline_log_dirs == ["/data/a"]
    with pytest.raises(KafkaStorageError, match="log dir /data/a of t-0 is offline: "
                       "append of t-0 in /data/a failed"):
        errors.check_online()
    # a sibling log of the same dir is offline too
    assert LogDirErrorHandler(channel, "/data/a", "t-1").offline


def test_errors_that_are_not_io_pass_through_unreported() -> None:
    channel = LogDirFailureChannel()
    errors = LogDirErrorHandler(channel, "/data/a", "t-0")
    closed = KafkaStorageError("log /data/a/t-0 is closed")
    with pytest.raises(KafkaStorageError) as raised:
        _Writer(errors, closed).append(1)
    assert raised.value is closed
    with pytest.raises(ValueError):
        _Writer(errors, ValueError("bug")).append(1)
    assert not errors.offline and channel.offline_log_dirs == []


def test_without_a_channel_an_io_error_is_raised_but_nothing_goes_offline() -> None:
    errors = LogDirErrorHandler(None, "/data/a", "t-0")
    with pytest.raises(KafkaStorageError, match="append of t-0 in /data/a failed"):
        _Writer(errors, ENOSPC).append(1)
    assert not errors.offline
    errors.check_online()
