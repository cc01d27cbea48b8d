"""The background thread that keeps a member in its group (Java's
``AbstractCoordinator.HeartbeatThread``).

Enabled while the member is in a generation (from the JoinGroup answer on; disabled while
it (re)joins), ``run_once`` does, under the coordinator's lock:

* a non-blocking network poll (skipped when the application thread is polling anyway), so
  answers are read even while the application is busy between ``poll`` calls;
* coordinator unknown -> look it up; no answer within ``session.timeout.ms`` -> mark the
  coordinator unknown (its connection is dropped); no ``poll`` within
  ``max.poll.interval.ms`` -> leave the group (``maybe_leave_group``);
* otherwise send a Heartbeat every ``heartbeat.interval.ms``; its answer is handled by the
  coordinator (rejoin, generation reset) and recorded here in the ``Heartbeat`` timers.

An error that must reach the application (a fenced static member, a crash of this loop) is
kept in ``fatal_error`` and raised by the next ``poll``.  Tests step ``run_once(wait=False)``
instead of starting the thread.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from millrace.client.errors import IllegalStateError
from millrace.common.errors import FencedInstanceIdError, RebalanceInProgressError

if TYPE_CHECKING:
    from millrace.client.consumer._internals.abstract_coordinator import AbstractCoordinator

log = logging.getLogger(__name__)


class HeartbeatThread:
    def __init__(self, coordinator: AbstractCoordinator, start_thread: bool = True) -> None:
        self._coordinator = coordinator
        self._start_thread = start_thread
        self._thread: threading.Thread | None = None
        self.enabled = False  # guarded by the coordinator's _lock
        self.closed = False  # guarded by the coordinator's _lock
        self.fatal_error: BaseException | None = None  # guarded by the coordinator's _lock

    def start_if_needed(self) -> None:
        c = self._coordinator
        with c._lock:
            if self._thread is not None or self.closed or not self._start_thread:
                return
            self._thread = threading.Thread(
                target=self._loop, daemon=True,
                name=f"millrace-coordinator-heartbeat-thread | {c.group_id}")
            self._thread.start()

    def enable(self) -> None:
        c = self._coordinator
        with c._lock:
            self.enabled = True
            c.heartbeat.reset_timeouts(c._time.milliseconds())
            c._cond.notify_all()

    def disable(self) -> None:
        with self._coordinator._lock:
            self.enabled = False

    def _loop(self) -> None:
        try:
            while self.run_once():
                pass
        except BaseException as e:  # surfaced by the next poll
            log.error("group %s: heartbeat thread failed", self._coordinator.group_id,
                      exc_info=True)
            with self._coordinator._lock:
                self.fatal_error = e

    def run_once(self, wait: bool = True) -> bool:
        """One step; False when the thread should exit."""
        c = self._coordinator
        with c._lock:
            if self.closed:
                return False
            if not self.enabled or c.has_not_joined_group():
                self.enabled = False
                if wait:
                    c._cond.wait(1.0)
                return True
            c._client.poll_no_wakeup()
            now = c._time.milliseconds()
            heartbeat = c.heartbeat
            if c.coordinator_unknown():
                c.lookup_coordinator()
                wait_ms: float = c.retry_backoff_ms
            elif heartbeat.session_timeout_expired(now):
                c.mark_coordinator_unknown("session timed out without receiving a heartbeat "
                                           "response", disconnect=True)
                wait_ms = 0
            elif heartbeat.poll_timeout_expired(now):
                log.warning(
                    "group %s: consumer poll timeout has expired. This means the time between "
                    "subsequent calls to poll() was longer than the configured "
                    "max.poll.interval.ms, which typically implies that the poll loop is "
                    "spending too much time processing messages. Leaving the group.",
                    c.group_id)
                c.maybe_leave_group("consumer poll timeout has expired")
                wait_ms = 0
            elif not heartbeat.should_heartbeat(now):
                wait_ms = min(c.retry_backoff_ms, heartbeat.time_to_next_heartbeat(now))
            else:
                heartbeat.sent_heartbeat(now)
                c.send_heartbeat_request().add_listener(self._on_success, self._on_failure)
                c._client.poll_no_wakeup()
                wait_ms = c.retry_backoff_ms
            if wait and wait_ms > 0:
                c._cond.wait(wait_ms / 1000.0)
            return True

    def _on_success(self, _: Any) -> None:
        c = self._coordinator
        with c._lock:
            c.heartbeat.receive_heartbeat(c._time.milliseconds())

    def _on_failure(self, error: BaseException) -> None:
        c = self._coordinator
        with c._lock:
            now = c._time.milliseconds()
            if isinstance(error, RebalanceInProgressError):
                c.heartbeat.receive_heartbeat(now)  # an answer all the same
            else:
                c.heartbeat.fail_heartbeat(now)
            if isinstance(error, FencedInstanceIdError):
                self.fatal_error = error
            c._cond.notify_all()

    def take_fatal_error(self) -> BaseException | None:
        with self._coordinator._lock:
            error, self.fatal_error = self.fatal_error, None
            return error

    def close(self) -> None:
        """Stop and join the thread (never from the thread itself)."""
        c = self._coordinator
        with c._lock:
            self.closed = True
            self.enabled = False
            thread, self._thread = self._thread, None
            c._cond.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join(10)
            if thread.is_alive():
                raise IllegalStateError("the heartbeat thread did not stop within 10 s")
