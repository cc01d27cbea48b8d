"""``Replica``: what a partition's leader knows about one follower (Kafka's ``Replica``).

The leader learns a follower's log end offset from the follower's fetches: a follower
fetching from offset N holds every record below N.  From the fetch history it also keeps
``last_caught_up_time_ms``, the last time the follower was known to have everything the
leader had:

- a fetch from at least the leader's current log end offset: caught up now;
- otherwise, a fetch from at least the leader's log end offset *at the previous fetch*:
  caught up as of that previous fetch (it has everything the leader had then).

A follower is in sync while its log end equals the leader's, or it caught up within
``replica.lag.time.max.ms``; the leader's ISR shrink drops the others.  On becoming
leader every follower's clock is reset: ISR members count as caught up now (they were in
sync with the old leader), the others as never (Kafka's ``resetReplicaState``).

Owned by the event-loop thread, like the ``Partition`` that holds it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class Replica:
    broker_id: int
    log_end_offset: int = -1
    last_fetch_leader_log_end_offset: int = -1
    last_fetch_time_ms: int = 0
    last_caught_up_time_ms: int = 0
    broker_epoch: int = -1

    def update_fetch_state(self, fetch_offset: int, leader_end_offset: int, now_ms: int,
                           broker_epoch: int = -1) -> None:
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms,
                                              self.last_fetch_time_ms)
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_log_end_offset = leader_end_offset
        self.last_fetch_time_ms = now_ms
        if broker_epoch >= 0:
            self.broker_epoch = broker_epoch

    def reset(self, now_ms: int, leader_end_offset: int, in_isr: bool) -> None:
        """A new leadership term: the follower's position is unknown until it fetches."""
        self.log_end_offset = -1
        self.last_fetch_leader_log_end_offset = -1
        self.last_fetch_time_ms = 0
        self.last_caught_up_time_ms = now_ms if in_isr else 0
        del leader_end_offset

    def is_caught_up(self, leader_end_offset: int, now_ms: int, lag_time_max_ms: int) -> bool:
        return (self.log_end_offset == leader_end_offset
                or now_ms - self.last_caught_up_time_ms <= lag_time_max_ms)
