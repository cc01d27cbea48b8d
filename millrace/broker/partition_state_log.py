"""``PartitionStateLog``: this broker's record of the leader and ISR changes it made or was
told of, with the reason, kept so that anyone can ask later why a partition's ISR shrank
(Kafka writes these only to ``state-change.log``; the console's timeline reads them here,
so they outlast a console restart).

Entries, oldest first, at most ``capacity`` for the whole broker (bounded memory whatever
the partition count):

- ``leader``: this broker took a new leadership term (LeaderAndIsr), with the epoch;
- ``isr-shrink`` / ``isr-expand``: an ISR change this leader proposed and ZooKeeper
  accepted (why: the followers that fell behind ``replica.lag.time.max.ms``, or the one
  that caught up), or one the controller set in a LeaderAndIsr of the same term (a
  broker that died).

Served as JSON by the broker's HTTP listener (``routes``:
``GET /v1/partitions/{topic}/state-changes``), under the listener's authentication and
its Describe-on-cluster check.  Nothing is written to disk: a restarted broker starts an
empty record.

Thread ownership: the broker's event-loop thread (the ISR manager's completions are
delivered there too).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from aiohttp import web

from millrace.common.isr import isr_changes

DEFAULT_CAPACITY = 10_000
STATE_CHANGES_PATH = "/v1/partitions/{topic}/state-changes"


class PartitionStateLog:
    def __init__(self, broker_id: int, clock_ms: Callable[[], int],
                 capacity: int = DEFAULT_CAPACITY) -> None:
        self.broker_id = broker_id
        self._clock_ms = clock_ms
        self._entries: deque[dict[str, Any]] = deque(maxlen=capacity)

    def record(self, topic: str, partition: int, kind: str, leader: int | None,
               isr: tuple[int, ...] | list[int], detail: str) -> None:
        self._entries.append({"t": self._clock_ms(), "topic": topic, "partition": partition,
                              "kind": kind, "leader": leader, "isr": list(isr),
                              "detail": detail, "broker": self.broker_id})

    def isr_changed(self, topic: str, partition: int, leader: int,
                    old: tuple[int, ...], new: tuple[int, ...], why: str) -> None:
        """Record ``old`` -> ``new`` as a shrink, an expansion, or both (a swap)."""
        for kind, text in isr_changes(old, new):
            self.record(topic, partition, kind, leader, new, f"{text}: {why}")

    def for_topic(self, topic: str) -> list[dict[str, Any]]:
        return [e for e in self._entries if e["topic"] == topic]

    def routes(self) -> list[web.RouteDef]:
        async def changes(request: web.Request) -> web.Response:
            topic = request.match_info["topic"]
            return web.json_response({"broker": self.broker_id,
                                      "changes": self.for_topic(topic)})
        return [web.get(STATE_CHANGES_PATH, changes)]
