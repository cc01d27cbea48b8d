"""The group member's three clocks (Java ``Heartbeat``).

* heartbeat timer -- when the next Heartbeat is due (``heartbeat.interval.ms`` after the
  last one was sent; ``retry.backoff.ms`` after a failed one);
* session timer -- ``session.timeout.ms`` after the last successful answer: when it runs
  out the coordinator is presumed gone and is looked up again;
* poll timer -- ``max.poll.interval.ms`` after the application last called ``poll``: when it
  runs out the member leaves the group so that its partitions move on.

Pure bookkeeping on an injected clock; the coordinator guards it with its lock.
"""

from __future__ import annotations


class Heartbeat:
    def __init__(self, *, session_timeout_ms: int, heartbeat_interval_ms: int,
                 max_poll_interval_ms: int, retry_backoff_ms: int, now_ms: int) -> None:
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.max_poll_interval_ms = max_poll_interval_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.heartbeat_in_flight = False
        self.last_heartbeat_send_ms = 0
        self.last_poll_ms = now_ms
        self._next_heartbeat_ms = now_ms + heartbeat_interval_ms
        self._session_deadline_ms = now_ms + session_timeout_ms
        self._poll_deadline_ms = now_ms + max_poll_interval_ms

    def poll(self, now_ms: int) -> None:
        self.last_poll_ms = now_ms
        self._poll_deadline_ms = now_ms + self.max_poll_interval_ms

    def sent_heartbeat(self, now_ms: int) -> None:
        self.heartbeat_in_flight = True
        self.last_heartbeat_send_ms = now_ms
        self._next_heartbeat_ms = now_ms + self.heartbeat_interval_ms

    def fail_heartbeat(self, now_ms: int) -> None:
        self.heartbeat_in_flight = False
        self._next_heartbeat_ms = now_ms + self.retry_backoff_ms

    def receive_heartbeat(self, now_ms: int) -> None:
        self.heartbeat_in_flight = False
        self._session_deadline_ms = now_ms + self.session_timeout_ms

    def should_heartbeat(self, now_ms: int) -> bool:
        return now_ms >= self._next_heartbeat_ms

    def time_to_next_heartbeat(self, now_ms: int) -> int:
        return max(self._next_heartbeat_ms - now_ms, 0)

    def session_timeout_expired(self, now_ms: int) -> bool:
        return now_ms >= self._session_deadline_ms

    def poll_timeout_expired(self, now_ms: int) -> bool:
        return now_ms >= self._poll_deadline_ms

    def poll_time_remaining(self, now_ms: int) -> int:
        return max(self._poll_deadline_ms - now_ms, 0)

    def reset_session_timeout(self, now_ms: int) -> None:
        self._session_deadline_ms = now_ms + self.session_timeout_ms

    def reset_timeouts(self, now_ms: int) -> None:
        """A fresh start (after joining): every timer from now."""
        self._session_deadline_ms = now_ms + self.session_timeout_ms
        self._poll_deadline_ms = now_ms + self.max_poll_interval_ms
        self._next_heartbeat_ms = now_ms + self.heartbeat_interval_ms
        self.heartbeat_in_flight = False
