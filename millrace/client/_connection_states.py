"""Per-node connection state and reconnect backoff (Java ``ClusterConnectionStates``).

A node's connection goes DISCONNECTED -> CONNECTING -> CHECKING_API_VERSIONS -> READY and
back to DISCONNECTED on any failure.  After a failure the next connect attempt waits
``reconnect.backoff.ms`` doubled per consecutive failure up to ``reconnect.backoff.max.ms``
(with 20% jitter); reaching READY resets the count.  A connect (including the ApiVersions
exchange) that takes longer than the setup timeout -- ``socket.connection.setup.timeout.ms``
doubled per failure up to ``...max.ms`` -- is abandoned.

Owned by the network thread.
"""

from __future__ import annotations

import enum
import random

from millrace.client._backoff import ExponentialBackoff
from millrace.protocol import ClientConnection

NEVER = 2**63 - 1


class ConnectionState(enum.Enum):
    DISCONNECTED = 0
    CONNECTING = 1
    CHECKING_API_VERSIONS = 2
    READY = 3


class NodeConnectionState:
    __slots__ = ("api_versions", "connection", "failed_attempts", "host",
                 "last_connect_attempt_ms", "port", "reconnect_backoff_ms", "setup_timeout_ms",
                 "state")

    def __init__(self, now_ms: int, host: str, port: int, reconnect_backoff_ms: int,
                 setup_timeout_ms: int) -> None:
        self.state = ConnectionState.CONNECTING
        self.last_connect_attempt_ms = now_ms
        self.failed_attempts = 0
        self.host = host
        self.port = port
        self.reconnect_backoff_ms = reconnect_backoff_ms
        self.setup_timeout_ms = setup_timeout_ms
        self.api_versions: dict[int, tuple[int, int]] = {}
        self.connection: ClientConnection | None = None


class ClusterConnectionStates:
    def __init__(self, reconnect_backoff_ms: int, reconnect_backoff_max_ms: int,
                 setup_timeout_ms: int, setup_timeout_max_ms: int,
                 rng: random.Random | None = None) -> None:
        self._reconnect = ExponentialBackoff(reconnect_backoff_ms, 2,
                                             max(reconnect_backoff_ms, reconnect_backoff_max_ms),
                                             0.2, rng)
        self._setup = ExponentialBackoff(setup_timeout_ms, 2,
                                         max(setup_timeout_ms, setup_timeout_max_ms), 0.2, rng)
        self._nodes: dict[int, NodeConnectionState] = {}

    def get(self, node_id: int) -> NodeConnectionState | None:
        return self._nodes.get(node_id)

    def state(self, node_id: int) -> ConnectionState:
        s = self._nodes.get(node_id)
        return s.state if s is not None else ConnectionState.DISCONNECTED

    def can_connect(self, node_id: int, now_ms: int) -> bool:
        s = self._nodes.get(node_id)
        if s is None:
            return True
        return (s.state is ConnectionState.DISCONNECTED
                and now_ms - s.last_connect_attempt_ms >= s.reconnect_backoff_ms)

    def is_blacked_out(self, node_id: int, now_ms: int) -> bool:
        s = self._nodes.get(node_id)
        return (s is not None and s.state is ConnectionState.DISCONNECTED
                and now_ms - s.last_connect_attempt_ms < s.reconnect_backoff_ms)

    def connection_delay(self, node_id: int, now_ms: int) -> int:
        """How long until a connect may be tried (0 = now; NEVER = wait for events)."""
        s = self._nodes.get(node_id)
        if s is None:
            return 0
        if s.state is ConnectionState.CONNECTING:
            return s.setup_timeout_ms
        if s.state is ConnectionState.DISCONNECTED:
            return max(s.reconnect_backoff_ms - (now_ms - s.last_connect_attempt_ms), 0)
        return NEVER

    def connecting(self, node_id: int, now_ms: int, host: str, port: int,
                   connection: ClientConnection) -> NodeConnectionState:
        s = self._nodes.get(node_id)
        if s is None:
            s = NodeConnectionState(now_ms, host, port, self._reconnect.backoff(0),
                                    self._setup.backoff(0))
            self._nodes[node_id] = s
        s.state = ConnectionState.CONNECTING
        s.last_connect_attempt_ms = now_ms
        s.host, s.port = host, port
        s.setup_timeout_ms = self._setup.backoff(s.failed_attempts)
        s.api_versions = {}
        s.connection = connection
        return s

    def checking_api_versions(self, node_id: int) -> None:
        self._nodes[node_id].state = ConnectionState.CHECKING_API_VERSIONS

    def ready(self, node_id: int) -> None:
        s = self._nodes[node_id]
        s.state = ConnectionState.READY
        s.failed_attempts = 0
        s.reconnect_backoff_ms = self._reconnect.backoff(0)

    def disconnected(self, node_id: int, now_ms: int) -> None:
        s = self._nodes.get(node_id)
        if s is None:
            return
        s.state = ConnectionState.DISCONNECTED
        s.last_connect_attempt_ms = now_ms
        s.reconnect_backoff_ms = self._reconnect.backoff(s.failed_attempts)
        s.failed_attempts += 1
        s.connection = None

    def is_ready(self, node_id: int) -> bool:
        s = self._nodes.get(node_id)
        return s is not None and s.state is ConnectionState.READY

    def is_connecting(self, node_id: int) -> bool:
        s = self._nodes.get(node_id)
        return s is not None and s.state in (ConnectionState.CONNECTING,
                                             ConnectionState.CHECKING_API_VERSIONS)

    def is_disconnected(self, node_id: int) -> bool:
        s = self._nodes.get(node_id)
        return s is None or s.state is ConnectionState.DISCONNECTED

    def nodes_with_setup_timeout(self, now_ms: int) -> list[int]:
        return [n for n, s in self._nodes.items()
                if s.state in (ConnectionState.CONNECTING, ConnectionState.CHECKING_API_VERSIONS)
                and now_ms - s.last_connect_attempt_ms > s.setup_timeout_ms]

    def remove(self, node_id: int) -> None:
        self._nodes.pop(node_id, None)

    def node_ids(self) -> list[int]:
        return list(self._nodes)
