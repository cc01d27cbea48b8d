"""Requests sent to each node and not yet answered (Java ``InFlightRequests``).

Kafka answers in order on a connection, so each node's requests form a FIFO: the oldest
is the one the next response belongs to.  ``can_send_more`` enforces
``max.in.flight.requests.per.connection``.  (Java also waits until the previous request
is written, because its channel holds one send at a time; our selector queues requests
per connection and writes them together, so the in-flight limit alone bounds the queue.)

Owned by the network thread.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from millrace.client.network_client import ClientRequest


class InFlightRequests:
    def __init__(self, max_in_flight_per_connection: int) -> None:
        self.max_in_flight_per_connection = max_in_flight_per_connection
        self._requests: dict[int, deque[ClientRequest]] = {}
        self._count = 0

    def add(self, request: ClientRequest) -> None:
        queue = self._requests.get(request.destination)
        if queue is None:
            queue = self._requests[request.destination] = deque()
        queue.append(request)
        self._count += 1

    def complete_next(self, node_id: int) -> ClientRequest:
        """Remove and return the oldest request to ``node_id`` (its response arrived)."""
        request = self._requests[node_id].popleft()
        self._count -= 1
        return request

    def remove(self, request: ClientRequest) -> None:
        self._requests[request.destination].remove(request)
        self._count -= 1

    def oldest(self, node_id: int) -> ClientRequest | None:
        queue = self._requests.get(node_id)
        return queue[0] if queue else None

    def can_send_more(self, node_id: int) -> bool:
        queue = self._requests.get(node_id)
        return not queue or len(queue) < self.max_in_flight_per_connection

    def count(self, node_id: int | None = None) -> int:
        if node_id is None:
            return self._count
        queue = self._requests.get(node_id)
        return len(queue) if queue else 0

    def is_empty(self, node_id: int | None = None) -> bool:
        return self.count(node_id) == 0

    def clear_all(self, node_id: int) -> list[ClientRequest]:
        """Remove every request to ``node_id``, oldest first (the connection is gone)."""
        queue = self._requests.pop(node_id, None)
        if not queue:
            return []
        self._count -= len(queue)
        return list(queue)

    def nodes_with_timed_out_requests(self, now_ms: int) -> list[int]:
        out = []
        for node_id, queue in self._requests.items():
            for request in queue:
                if now_ms - request.send_ms > request.request_timeout_ms:
                    out.append(node_id)
                    break
        return out
