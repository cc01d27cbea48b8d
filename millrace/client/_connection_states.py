"""Per-node connection state and reconnect backoff (Java ``ClusterConnectionStates``).

A node's connection goes DISCONNECTED -> CONNECTING -> CHECKING_API_VERSIONS ->
[AUTHENTICATING ->] READY and back to DISCONNECTED on any failure.  CONNECTING includes the
TLS handshake (the selector reports the connection only once it is done); AUTHENTICATING
is the SASL exchange of SASL_* protocols (``_sasl_authenticator``), so no request of the
caller's ever precedes authentication.  A failed authentication leaves the node
DISCONNECTED with its ``authentication_error`` set (Java's AUTHENTICATION_FAILED state)
until the next attempt.  A READY connection whose SASL session is due for renewal is
DRAINING until its in-flight requests are answered, then closed without counting as a
failure (``closed_for_reauthentication``): the next connect is immediate.  After a failure the next connect attempt waits
``reconnect.backoff.ms`` doubled per consecutive failure up to ``reconnect.backoff.max.ms``
(with 20% jitter); reaching READY resets the count.  A connect (including the ApiVersions
exchange) that takes longer than the setup timeout -- ``socket.connection.setup.timeout.ms``
doubled per failure up to ``...max.ms`` -- is abandoned.

Owned by the network thread.
"""

from __future__ import annotations

import copy
import enum
import random
from typing import TYPE_CHECKING

from millrace.client._backoff import ExponentialBackoff
from millrace.protocol import ClientConnection

if TYPE_CHECKING:
    from millrace.client._sasl_authenticator import SaslClientAuthenticator

NEVER = 2**63 - 1


class ConnectionState(enum.Enum):
    DISCONNECTED = 0
    CONNECTING = 1
    CHECKING_API_VERSIONS = 2
    READY = 3
    AUTHENTICATING = 4
    DRAINING = 5  # READY, but the SASL session is due: no new requests, then reconnect


_SETTING_UP = (ConnectionState.CONNECTING, ConnectionState.CHECKING_API_VERSIONS,
               ConnectionState.AUTHENTICATING)


class NodeConnectionState:
    __slots__ = ("api_versions", "authentication_error", "authenticator", "connection",
                 "failed_attempts", "host", "last_connect_attempt_ms", "port",
                 "reauthenticate_at_ms", "reconnect_backoff_ms", "setup_timeout_ms", "state")

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
        self.authenticator: SaslClientAuthenticator | None = None
        self.authentication_error: Exception | None = None
        self.reauthenticate_at_ms = NEVER  # when the SASL session must be renewed


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
        s.authenticator = None
        s.authentication_error = None
        s.reauthenticate_at_ms = NEVER
        return s

    def checking_api_versions(self, node_id: int) -> None:
        self._nodes[node_id].state = ConnectionState.CHECKING_API_VERSIONS

    def authenticating(self, node_id: int, authenticator: SaslClientAuthenticator) -> None:
        s = self._nodes[node_id]
        s.state = ConnectionState.AUTHENTICATING
        s.authenticator = authenticator

    def authentication_failed(self, node_id: int, now_ms: int, error: Exception) -> None:
        """DISCONNECTED with ``error`` kept for whoever waits on this node, and the usual
        reconnect backoff (Java keeps retrying, failing each waiting call)."""
        self.disconnected(node_id, now_ms)
        s = self._nodes.get(node_id)
        if s is not None:
            s.authentication_error = error

    def authentication_error(self, node_id: int) -> Exception | None:
        s = self._nodes.get(node_id)
        error = s.authentication_error if s is not None else None
        return copy.copy(error)  # one per waiting request: each gets its own traceback

    def closed_for_reauthentication(self, node_id: int, now_ms: int) -> None:
        """DISCONNECTED on purpose (the session expires): reconnect at once, no backoff,
        and not a failure."""
        s = self._nodes[node_id]
        s.state = ConnectionState.DISCONNECTED
        s.connection = None
        s.authenticator = None
        s.reconnect_backoff_ms = 0
        s.last_connect_attempt_ms = now_ms

    def ready(self, node_id: int) -> None:
        s = self._nodes[node_id]
        s.state = ConnectionState.READY
        s.failed_attempts = 0
        s.reconnect_backoff_ms = self._reconnect.backoff(0)
        s.authenticator = None

    def disconnected(self, node_id: int, now_ms: int) -> None:
        s = self._nodes.get(node_id)
        if s is None:
            return
        s.state = ConnectionState.DISCONNECTED
        s.last_connect_attempt_ms = now_ms
        s.reconnect_backoff_ms = self._reconnect.backoff(s.failed_attempts)
        s.failed_attempts += 1
        s.connection = None
        s.authenticator = None

    def is_ready(self, node_id: int) -> bool:
        s = self._nodes.get(node_id)
        return s is not None and s.state is ConnectionState.READY

    def is_connecting(self, node_id: int) -> bool:
        s = self._nodes.get(node_id)
        return s is not None and s.state in _SETTING_UP

    def is_disconnected(self, node_id: int) -> bool:
        s = self._nodes.get(node_id)
        return s is None or s.state is ConnectionState.DISCONNECTED

    def nodes_with_setup_timeout(self, now_ms: int) -> list[int]:
        return [n for n, s in self._nodes.items()
                if s.state in _SETTING_UP
                and now_ms - s.last_connect_attempt_ms > s.setup_timeout_ms]

    def remove(self, node_id: int) -> None:
        self._nodes.pop(node_id, None)

    def node_ids(self) -> list[int]:
        return list(self._nodes)
