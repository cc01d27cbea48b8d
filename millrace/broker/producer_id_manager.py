"""``ProducerIdManager``: producer ids for idempotent (and later transactional) producers.

Ids come from blocks of ``BLOCK_SIZE`` reserved durably through the cluster metadata
(Kafka's ``/latest_producer_id_block`` in ZooKeeper mode), so neither a restarted broker
nor another broker ever hands out an id twice.

Thread ownership: the event-loop thread.
"""

from __future__ import annotations

from collections.abc import Callable

BLOCK_SIZE = 1000


class ProducerIdManager:
    def __init__(self, reserve: Callable[[int], tuple[int, int]]) -> None:
        self._reserve = reserve
        self._next = 0
        self._end = 0

    def generate_producer_id(self) -> int:
        if self._next >= self._end:
            self._next, self._end = self._reserve(BLOCK_SIZE)
        pid = self._next
        self._next += 1
        return pid
