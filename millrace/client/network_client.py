"""The network layer shared by the clients (Java ``NetworkClient``).

Theory of operation.  One ``NetworkClient`` owns a ``Selector`` and, per broker node, a
sans-I/O ``ClientConnection`` (framing + correlation ids).  Callers -- the producer's
Sender, later the consumer -- work in three steps on the network thread:

1. ``ready(node, now)``: is the connection usable?  If not, start connecting (respecting
   the reconnect backoff) and answer False.  A new connection first exchanges
   ApiVersions; per API the client then uses the highest version both sides support.
   A broker that does not know our ApiVersions version answers UNSUPPORTED_VERSION with
   its own maximum, and we retry at that version.
2. ``send(request, now)``: encode the body at the negotiated version and write it; the
   request joins ``InFlightRequests`` (at most ``max.in.flight.requests.per.connection``).
3. ``poll(timeout, now)``: wait for I/O and return the completed ``ClientResponse``s,
   whose callbacks have run.  A response is also produced when a request can never be
   answered: the connection dropped (``disconnected``), the request outlived
   ``request.timeout.ms`` (the connection is then closed: ``timed_out``), no version is
   compatible (``version_mismatch``), or the request expects no answer (acks=0) and has
   been written.

The metadata updater inside keeps ``Metadata`` fresh: when a refresh is due it sends a
MetadataRequest to the least loaded node, connecting to one if need be.

Security (Java ``ChannelBuilders``/``SaslClientAuthenticator``).  TLS is the selector's
business (``SslSelector``): a connection is reported only after its handshake.  With
SASL (``sasl`` credentials given), a connection whose ApiVersions is answered becomes
AUTHENTICATING: ``SaslClientAuthenticator`` runs SaslHandshake and SaslAuthenticate as
internal requests, and only when it completes is the node READY -- no caller's request
ever precedes authentication.  A failed authentication (a SASL error answer, a TLS
handshake the broker or we rejected) closes the connection and is recorded twice: on
the node (``authentication_error(node)``: requests queued for it fail with it) and in
``Metadata`` (``authentication_failed``), from which every waiting call -- a producer's
metadata wait, a consumer's poll, an admin call -- raises it at once instead of waiting
for its timeout.  Reconnects continue with the usual backoff.  A connection closed
during SASL without an answer is not an authentication failure (Java: a broker older
than 1.0, a firewall or a network problem); it is retried and named if the wait runs out.

Re-authentication (KIP-368).  When the final SaslAuthenticate carries a session lifetime,
the session is renewed by reconnecting: at a random 85-95% of the lifetime the node
stops taking requests (DRAINING), and once its in-flight requests are answered the
connection is closed and the next ``ready`` opens and authenticates a new one at once,
without backoff and without failing anything.  This costs a TCP/TLS handshake per
lifetime (typically hours) and needs no second, in-band SaslHandshake state machine.

Owned by the network thread; only ``wakeup`` may be called from others.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from typing import Any

from millrace.client._client_security import SaslCredentials
from millrace.client._connection_states import NEVER, ClusterConnectionStates, ConnectionState
from millrace.client._in_flight_requests import InFlightRequests
from millrace.client._sasl_authenticator import SaslClientAuthenticator
from millrace.client._selector import Selector
from millrace.client.api_versions import ApiVersions
from millrace.client.cluster import Node
from millrace.client.errors import IllegalStateError, SslAuthenticationError
from millrace.client.metadata import Metadata
from millrace.common.errors import (
    Errors,
    KafkaError,
    MillraceError,
    ProtocolDecodeError,
    UnsupportedVersionError,
)
from millrace.common.time import SYSTEM_TIME, Time
from millrace.protocol import API, NEED_DATA, ApiKey, ClientConnection, Response
from millrace.protocol.api import REQUEST_CLASS_TO_API

log = logging.getLogger(__name__)

CLIENT_SOFTWARE_NAME = "millrace"
CLIENT_SOFTWARE_VERSION = "0.1.0"
_NOT_YET_READY = (ConnectionState.CONNECTING, ConnectionState.CHECKING_API_VERSIONS,
                  ConnectionState.AUTHENTICATING)
# requests the client sends on its own while setting a connection up
_SETUP_APIS = (ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE)
# a SASL session is renewed at a random point in this part of its lifetime (KIP-368)
REAUTHENTICATE_AT = (0.85, 0.95)

ResponseCallback = Callable[["ClientResponse"], None]


class ClientRequest:
    """A request for one node; version chosen at send time within [min, max]."""

    __slots__ = ("api_key", "body", "callback", "correlation_id", "created_ms", "destination",
                 "expect_response", "internal", "max_version", "min_version",
                 "request_timeout_ms", "send_completed", "send_ms", "version")

    def __init__(self, destination: int, body: Any, callback: ResponseCallback | None = None,
                 *, created_ms: int = 0, expect_response: bool = True,
                 request_timeout_ms: int = 30_000, min_version: int | None = None,
                 max_version: int | None = None) -> None:
        api = REQUEST_CLASS_TO_API[type(body)]
        self.destination = destination
        self.body = body
        self.api_key = api.key
        self.callback = callback
        self.created_ms = created_ms
        self.expect_response = expect_response
        self.request_timeout_ms = request_timeout_ms
        self.min_version = api.versions.low if min_version is None else min_version
        self.max_version = api.versions.high if max_version is None else max_version
        self.internal = False
        self.correlation_id = -1
        self.version = -1
        self.send_ms = 0
        self.send_completed = False

    def __repr__(self) -> str:
        return (f"ClientRequest({ApiKey(self.api_key).name} v{self.version} to node "
                f"{self.destination}, correlation id {self.correlation_id})")


class ClientResponse:
    __slots__ = ("authentication_error", "body", "disconnected", "received_ms", "request",
                 "timed_out", "version_mismatch")

    def __init__(self, request: ClientRequest, received_ms: int, body: Any = None, *,
                 disconnected: bool = False, timed_out: bool = False,
                 version_mismatch: KafkaError | None = None,
                 authentication_error: Exception | None = None) -> None:
        self.request = request
        self.received_ms = received_ms
        self.body = body
        self.disconnected = disconnected
        self.timed_out = timed_out
        self.version_mismatch = version_mismatch
        # the node could not be authenticated (the request was never sent)
        self.authentication_error = authentication_error

    @property
    def destination(self) -> int:
        return self.request.destination

    @property
    def request_latency_ms(self) -> int:
        return self.received_ms - self.request.send_ms

    @property
    def has_response(self) -> bool:
        return self.body is not None

    def on_complete(self) -> None:
        if self.request.callback is not None:
            self.request.callback(self)

    def __repr__(self) -> str:
        state = ("disconnected" if self.disconnected else
                 "version mismatch" if self.version_mismatch else "ok")
        return f"ClientResponse({self.request!r}, {state})"


class NetworkClient:
    def __init__(
        self,
        metadata: Metadata,
        *,
        selector: Selector | None = None,
        client_id: str = CLIENT_SOFTWARE_NAME,
        max_in_flight_requests_per_connection: int = 5,
        reconnect_backoff_ms: int = 50,
        reconnect_backoff_max_ms: int = 1000,
        request_timeout_ms: int = 30_000,
        connection_setup_timeout_ms: int = 10_000,
        connection_setup_timeout_max_ms: int = 30_000,
        send_buffer_bytes: int = 131072,
        receive_buffer_bytes: int = 32768,
        time: Time = SYSTEM_TIME,
        rng: random.Random | None = None,
        api_versions: ApiVersions | None = None,
        sasl: SaslCredentials | None = None,
    ) -> None:
        self._metadata = metadata
        self._api_versions = api_versions or ApiVersions()  # shared with the producer
        self._selector = selector or Selector(send_buffer_bytes, receive_buffer_bytes)
        self._client_id = client_id
        self._in_flight = InFlightRequests(max_in_flight_requests_per_connection)
        self._states = ClusterConnectionStates(
            reconnect_backoff_ms, reconnect_backoff_max_ms, connection_setup_timeout_ms,
            connection_setup_timeout_max_ms, rng)
        self._reconnect_backoff_ms = reconnect_backoff_ms
        self.request_timeout_ms = request_timeout_ms
        self._time = time
        self._random = rng or random.Random()
        self._aborted: list[ClientResponse] = []
        self._updater = _MetadataUpdater(self, metadata)
        self._closed = False
        self._sasl = sasl
        self._next_reauthentication_ms = NEVER  # the earliest session renewal due

    # ------------------------------------------------------------------ readiness
    def ready(self, node: Node, now_ms: int) -> bool:
        """True if a request can be sent to ``node`` now; else start connecting if allowed."""
        if self.is_ready(node.id, now_ms):
            return True
        if self._states.can_connect(node.id, now_ms):
            self._initiate_connect(node, now_ms)
        return False

    def is_ready(self, node_id: int, now_ms: int) -> bool:
        # A due metadata refresh goes first, so produce traffic cannot starve it.
        return (not self._updater.is_update_due(now_ms)
                and self.can_send_request(node_id))

    def can_send_request(self, node_id: int) -> bool:
        return (self._states.is_ready(node_id) and self._selector.is_connected(node_id)
                and self._in_flight.can_send_more(node_id))

    def connection_delay(self, node: Node, now_ms: int) -> int:
        return self._states.connection_delay(node.id, now_ms)

    def poll_delay_ms(self, node: Node, now_ms: int) -> int:
        return self._states.connection_delay(node.id, now_ms)

    def connection_failed(self, node: Node) -> bool:
        s = self._states.get(node.id)
        return s is not None and s.state is ConnectionState.DISCONNECTED and \
            s.failed_attempts > 0

    def is_blacked_out(self, node: Node, now_ms: int) -> bool:
        return self._states.is_blacked_out(node.id, now_ms)

    def authentication_error(self, node_id: int) -> Exception | None:
        """Why the last connection to the node failed to authenticate (None if it did not
        fail so); requests waiting for the node should fail with it."""
        return self._states.authentication_error(node_id)

    def api_versions(self, node_id: int) -> dict[int, tuple[int, int]]:
        s = self._states.get(node_id)
        return dict(s.api_versions) if s is not None else {}

    def in_flight_request_count(self, node_id: int | None = None) -> int:
        return self._in_flight.count(node_id)

    def has_in_flight_requests(self, node_id: int | None = None) -> bool:
        return not self._in_flight.is_empty(node_id)

    def least_loaded_node(self, now_ms: int) -> Node | None:
        """The ready node with the fewest requests in flight; else one that is connecting;
        else one we may connect to.  None when every node is in reconnect backoff."""
        nodes = self._metadata.fetch().nodes
        if not nodes:
            return None
        offset = self._random.randrange(len(nodes))
        best: Node | None = None
        best_count = NEVER
        connecting: Node | None = None
        can_connect: Node | None = None
        for i in range(len(nodes)):
            node = nodes[(offset + i) % len(nodes)]
            count = self._in_flight.count(node.id)
            if self.can_send_request(node.id):
                if count == 0:
                    return node
                if count < best_count:
                    best, best_count = node, count
            elif self._states.is_connecting(node.id):
                connecting = node
            elif self._states.can_connect(node.id, now_ms):
                can_connect = can_connect or node
        return best or connecting or can_connect

    # ------------------------------------------------------------------ connections
    def _initiate_connect(self, node: Node, now_ms: int) -> None:
        # Like Java's client, ignore bytes after a well-formed response body.
        connection = ClientConnection(self._client_id, allow_trailing=True)
        self._states.connecting(node.id, now_ms, node.host, node.port, connection)
        self._metadata.reachability.connecting(f"{node.host}:{node.port}")
        try:
            log.debug("connecting to node %s", node)
            self._selector.connect(node.id, node.host, node.port)
        except OSError as e:
            reason = (e.strerror or str(e)).lower()
            log.warning("connection to node %d (%s:%d) could not be established: %s",
                        node.id, node.host, node.port, reason)
            self._metadata.reachability.connection_failed(f"{node.host}:{node.port}", reason)
            self._states.disconnected(node.id, now_ms)
            self._metadata.request_update()

    def disconnect(self, node_id: int) -> None:
        """Close the connection; its in-flight requests complete as disconnected."""
        if self._states.is_disconnected(node_id):
            return
        self._selector.close(node_id)
        self._process_disconnection(node_id, self._time.milliseconds(), "disconnect requested",
                                    timed_out=False)

    def close_node(self, node_id: int) -> None:
        self._selector.close(node_id)
        for request in self._in_flight.clear_all(node_id):
            log.debug("dropping %r: connection closed", request)
        self._states.remove(node_id)

    def wakeup(self) -> None:
        self._selector.wakeup()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._selector.close_all()
        self._metadata.close()

    # ------------------------------------------------------------------ sending
    def send(self, request: ClientRequest, now_ms: int) -> None:
        node_id = request.destination
        if not self.can_send_request(node_id):
            raise IllegalStateError(f"attempt to send a request to node {node_id} "
                                    "which is not ready")
        state = self._states.get(node_id)
        assert state is not None
        broker = state.api_versions.get(request.api_key)
        if broker is None:
            error = UnsupportedVersionError(
                f"the broker at node {node_id} does not support {ApiKey(request.api_key).name}")
            self._aborted.append(ClientResponse(request, now_ms, version_mismatch=error))
            return
        version = min(request.max_version, broker[1], API[request.api_key].versions.high)
        if version < max(request.min_version, broker[0]):
            error = UnsupportedVersionError(
                f"{ApiKey(request.api_key).name}: the broker supports versions "
                f"{broker[0]}-{broker[1]}, this request needs {request.min_version}-"
                f"{request.max_version}")
            self._aborted.append(ClientResponse(request, now_ms, version_mismatch=error))
            return
        self._do_send(request, version, now_ms, state.connection)

    def _do_send(self, request: ClientRequest, version: int, now_ms: int,
                 connection: ClientConnection | None) -> None:
        assert connection is not None
        request.version = version
        request.send_ms = now_ms
        correlation_id, data = connection.send_request(request.body, version,
                                                       request.expect_response)
        request.correlation_id = correlation_id
        self._in_flight.add(request)
        if self._selector.send(request.destination, data, request):
            self._on_send_completed(request, now_ms)

    def _on_send_completed(self, request: ClientRequest, now_ms: int) -> None:
        request.send_completed = True
        if not request.expect_response:
            self._in_flight.remove(request)
            self._aborted.append(ClientResponse(request, now_ms))

    # ------------------------------------------------------------------ polling
    def poll(self, timeout_ms: int, now_ms: int) -> list[ClientResponse]:
        """Do network I/O for up to ``timeout_ms``; return the completed responses."""
        if self._closed:
            raise IllegalStateError("the network client is closed")
        if self._aborted:
            responses, self._aborted = self._aborted, []
            return self._complete(responses)
        metadata_timeout = self._updater.maybe_update(now_ms)
        self._selector.poll(min(timeout_ms, metadata_timeout, self.request_timeout_ms))
        now_ms = self._time.milliseconds()
        received: list[ClientResponse] = []
        selector = self._selector
        for token in selector.completed_sends:
            if isinstance(token, ClientRequest):
                self._on_send_completed(token, now_ms)
        for node_id, data in selector.completed_receives:
            self._handle_receive(node_id, data, now_ms, received)
        if selector.disconnected:
            self._handle_disconnections(selector.disconnected, now_ms)
        for node_id in selector.connected:
            self._handle_connected(node_id, now_ms)
        self._handle_timeouts(now_ms)
        if now_ms >= self._next_reauthentication_ms:
            self._renew_sessions(now_ms)
        if self._aborted:
            received.extend(self._aborted)
            self._aborted = []
        return self._complete(received)

    def _complete(self, responses: list[ClientResponse]) -> list[ClientResponse]:
        out = []
        for response in responses:
            try:
                response.on_complete()
            except Exception:
                log.exception("uncaught error in the completion of %r", response.request)
            if not response.request.internal:
                out.append(response)
        return out

    def _handle_receive(self, node_id: int, data: bytes, now_ms: int,
                        responses: list[ClientResponse]) -> None:
        state = self._states.get(node_id)
        if state is None or state.connection is None:
            return
        connection = state.connection
        try:
            connection.receive_data(data)
            while True:
                pending = connection.in_flight
                try:
                    event = connection.next_event()
                except ProtocolDecodeError:
                    if not self._retry_api_versions(node_id, connection, pending, now_ms):
                        raise
                    continue
                if event is NEED_DATA:
                    return
                assert isinstance(event, Response)
                request = self._in_flight.complete_next(node_id)
                if request.correlation_id != event.correlation_id:
                    raise ProtocolDecodeError(
                        f"response correlation id {event.correlation_id} does not match "
                        f"request {request.correlation_id}")
                if request.internal and request.api_key in _SETUP_APIS:
                    if request.api_key == ApiKey.API_VERSIONS:
                        self._handle_api_versions(node_id, request, event, now_ms)
                    else:
                        self._handle_sasl_response(node_id, request, event, now_ms)
                    if self._states.is_disconnected(node_id):
                        return
                    continue
                request.version = event.version
                responses.append(ClientResponse(request, now_ms, event.body))
        except ProtocolDecodeError as e:
            log.warning("closing the connection to node %d: %s", node_id, e)
            self._selector.close(node_id)
            self._process_disconnection(node_id, now_ms, str(e), timed_out=False)

    def _retry_api_versions(self, node_id: int, connection: ClientConnection, pending: int,
                            now_ms: int) -> bool:
        """An ApiVersions answer neither at our version nor in the v0 fallback layout
        (librdkafka's mock cluster answers versions it lacks that way): step down a version
        and ask again, as librdkafka does.  False if something else failed to decode."""
        request = self._in_flight.oldest(node_id)
        if (request is None or not request.internal or request.api_key != ApiKey.API_VERSIONS
                or request.version <= 0 or connection.in_flight != pending - 1):
            return False  # the frame itself (or another response) is broken
        self._in_flight.complete_next(node_id)
        log.debug("node %d: ApiVersions v%d answer did not decode; trying v%d", node_id,
                  request.version, request.version - 1)
        self._send_api_versions(node_id, request.version - 1, now_ms)
        return True

    def _handle_connected(self, node_id: int, now_ms: int) -> None:
        state = self._states.get(node_id)
        if state is None:
            return
        log.debug("connected to node %d", node_id)
        self._states.checking_api_versions(node_id)
        self._send_api_versions(node_id, API[ApiKey.API_VERSIONS].versions.high, now_ms)

    def _send_api_versions(self, node_id: int, version: int, now_ms: int) -> None:
        body = API[ApiKey.API_VERSIONS].request.cls(
            client_software_name=CLIENT_SOFTWARE_NAME,
            client_software_version=CLIENT_SOFTWARE_VERSION)
        self._send_internal(node_id, body, version, now_ms)

    def _send_internal(self, node_id: int, body: Any, version: int, now_ms: int) -> None:
        """Send a connection-setup request (ApiVersions, SASL) ahead of anything else."""
        state = self._states.get(node_id)
        assert state is not None
        request = ClientRequest(node_id, body, created_ms=now_ms,
                                request_timeout_ms=self.request_timeout_ms)
        request.internal = True
        self._do_send(request, version, now_ms, state.connection)

    def _handle_api_versions(self, node_id: int, request: ClientRequest, event: Response,
                             now_ms: int) -> None:
        body = event.body
        if body.error_code == Errors.UNSUPPORTED_VERSION:
            # The broker is older than us: it tells its own maximum in entry 18, if any.
            broker_max = next((k.max_version for k in body.api_keys
                               if k.api_key == ApiKey.API_VERSIONS), 0)
            retry_version = min(broker_max, request.version - 1)
            if retry_version >= 0:
                log.debug("node %d: retrying ApiVersions at v%d", node_id, retry_version)
                self._send_api_versions(node_id, retry_version, now_ms)
                return
        if body.error_code:
            log.warning("node %d answered ApiVersions with error %d; disconnecting",
                        node_id, body.error_code)
            self._selector.close(node_id)
            self._process_disconnection(node_id, now_ms, "ApiVersions failed", timed_out=False)
            return
        state = self._states.get(node_id)
        assert state is not None
        state.api_versions = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
        if request.version >= 3:
            self._api_versions.update_finalized_features(
                body.finalized_features_epoch,
                {f.name: f.max_version_level for f in body.finalized_features})
        if self._sasl is not None:
            self._start_authentication(node_id, state.api_versions, now_ms)
        else:
            self._ready(node_id, now_ms)

    def _ready(self, node_id: int, now_ms: int) -> None:
        state = self._states.get(node_id)
        assert state is not None
        authenticator = state.authenticator
        self._states.ready(node_id)
        self._metadata.reachability.broker_answered()
        if authenticator is not None and authenticator.session_lifetime_ms > 0:
            lifetime = authenticator.session_lifetime_ms
            at = now_ms + int(lifetime * self._random.uniform(*REAUTHENTICATE_AT))
            state.reauthenticate_at_ms = at
            self._next_reauthentication_ms = min(self._next_reauthentication_ms, at)
            log.debug("node %d is ready; SASL session of %d ms renewed in %d ms", node_id,
                      lifetime, at - now_ms)
        else:
            log.debug("node %d is ready", node_id)

    # ------------------------------------------------------------------ SASL
    def _start_authentication(self, node_id: int, api_versions: dict[int, tuple[int, int]],
                              now_ms: int) -> None:
        assert self._sasl is not None
        authenticator = SaslClientAuthenticator(self._sasl)
        self._states.authenticating(node_id, authenticator)
        try:
            body, version = authenticator.handshake_request(api_versions)
        except MillraceError as e:
            self._authentication_failed(node_id, e, now_ms)
            return
        log.debug("node %d: authenticating with SASL %s", node_id, authenticator.mechanism)
        self._send_internal(node_id, body, version, now_ms)

    def _handle_sasl_response(self, node_id: int, request: ClientRequest, event: Response,
                              now_ms: int) -> None:
        state = self._states.get(node_id)
        authenticator = state.authenticator if state is not None else None
        if authenticator is None or state is None \
                or state.state is not ConnectionState.AUTHENTICATING:
            raise ProtocolDecodeError(f"unexpected {ApiKey(request.api_key).name} response")
        following: tuple[Any, int] | None
        try:
            if request.api_key == ApiKey.SASL_HANDSHAKE:
                following = authenticator.handle_handshake_response(event.body)
            else:
                following = authenticator.handle_authenticate_response(event.body)
        except MillraceError as e:
            self._authentication_failed(node_id, e, now_ms)
            return
        if following is None:
            self._ready(node_id, now_ms)
        else:
            self._send_internal(node_id, following[0], following[1], now_ms)

    def _authentication_failed(self, node_id: int, error: MillraceError, now_ms: int) -> None:
        self._selector.close(node_id)
        self._process_disconnection(node_id, now_ms, str(error), timed_out=False,
                                    authentication_error=error)

    def _renew_sessions(self, now_ms: int) -> None:
        """Retire connections whose SASL session is due (see the module docstring)."""
        next_due = NEVER
        for node_id in self._states.node_ids():
            state = self._states.get(node_id)
            if state is None or state.state not in (ConnectionState.READY,
                                                    ConnectionState.DRAINING):
                continue
            if state.reauthenticate_at_ms > now_ms:
                next_due = min(next_due, state.reauthenticate_at_ms)
            elif self._in_flight.count(node_id):
                state.state = ConnectionState.DRAINING  # answers still to come
                next_due = now_ms
            else:
                log.debug("node %d: SASL session due for renewal; reconnecting", node_id)
                self._selector.close(node_id)
                self._states.closed_for_reauthentication(node_id, now_ms)
        self._next_reauthentication_ms = next_due

    def _handle_disconnections(self, disconnected: dict[int, str], now_ms: int) -> None:
        tls_failures: dict[int, str] | None = getattr(self._selector, "handshake_failures",
                                                      None)
        for node_id, reason in disconnected.items():
            error: MillraceError | None = None
            if tls_failures and node_id in tls_failures:
                state = self._states.get(node_id)
                where = f" ({state.host}:{state.port})" if state is not None else ""
                error = SslAuthenticationError(f"{tls_failures[node_id]}{where}")
            self._process_disconnection(node_id, now_ms, reason, timed_out=False,
                                        authentication_error=error)

    def _process_disconnection(self, node_id: int, now_ms: int, reason: str, *,
                               timed_out: bool,
                               authentication_error: MillraceError | None = None) -> None:
        state = self._states.get(node_id)
        previous = state.state if state is not None else ConnectionState.DISCONNECTED
        if state is not None and authentication_error is not None:
            log.warning("connection to node %d (%s:%d) failed authentication: %s",
                        node_id, state.host, state.port, reason)
            self._states.authentication_failed(node_id, now_ms, authentication_error)
            self._metadata.authentication_failed(f"{state.host}:{state.port}",
                                                 authentication_error)
        else:
            if state is not None and previous in _NOT_YET_READY:
                # never got as far as a usable connection: "no broker reachable at ..."
                self._metadata.reachability.connection_failed(f"{state.host}:{state.port}",
                                                              reason)
            self._states.disconnected(node_id, now_ms)
            if state is not None and previous is ConnectionState.CONNECTING:
                log.warning("connection to node %d (%s:%d) could not be established: %s",
                            node_id, state.host, state.port, reason)
            elif state is not None and previous is ConnectionState.AUTHENTICATING:
                log.warning("connection to node %d (%s:%d) was closed during SASL "
                            "authentication (%s): the broker may be older than 1.0 and "
                            "reject the credentials, a firewall may block it, or the "
                            "network failed", node_id, state.host, state.port, reason)
            else:
                log.debug("node %d disconnected: %s", node_id, reason)
        for request in self._in_flight.clear_all(node_id):
            if request.internal and request.api_key in _SETUP_APIS:
                continue
            self._aborted.append(ClientResponse(request, now_ms, disconnected=True,
                                                timed_out=timed_out))
        self._updater.handle_server_disconnect(now_ms)

    def _handle_timeouts(self, now_ms: int) -> None:
        for node_id in self._in_flight.nodes_with_timed_out_requests(now_ms):
            log.warning("disconnecting from node %d: a request timed out", node_id)
            self._selector.close(node_id)
            self._process_disconnection(node_id, now_ms, "request timed out", timed_out=True)
        for node_id in self._states.nodes_with_setup_timeout(now_ms):
            log.warning("disconnecting from node %d: connection setup timed out", node_id)
            self._selector.close(node_id)
            self._process_disconnection(node_id, now_ms, "connection setup timed out",
                                        timed_out=True)


class _MetadataUpdater:
    """Sends MetadataRequests when ``Metadata`` says a refresh is due (network thread)."""

    def __init__(self, client: NetworkClient, metadata: Metadata) -> None:
        self._client = client
        self._metadata = metadata
        self._in_flight: ClientRequest | None = None

    def is_update_due(self, now_ms: int) -> bool:
        return self._in_flight is None and self._metadata.time_to_next_update(now_ms) == 0

    def maybe_update(self, now_ms: int) -> int:
        """Send a MetadataRequest if due; returns ms until the updater wants to run again."""
        metadata_timeout = self._metadata.time_to_next_update(now_ms)
        if self._in_flight is not None:
            return self._client.request_timeout_ms
        if metadata_timeout > 0:
            return metadata_timeout
        node = self._client.least_loaded_node(now_ms)
        if node is None:
            return self._client._reconnect_backoff_ms
        if self._client.can_send_request(node.id):
            self._send(node, now_ms)
            return self._client.request_timeout_ms
        if self._client._states.is_connecting(node.id):
            return self._client._reconnect_backoff_ms
        if self._client._states.can_connect(node.id, now_ms):
            self._client._initiate_connect(node, now_ms)
        return self._client._reconnect_backoff_ms

    def _send(self, node: Node, now_ms: int) -> None:
        topics = self._metadata.metadata_request_topics(now_ms)
        cls = API[ApiKey.METADATA].request.cls
        body = cls(
            topics=None if topics is None else [cls.MetadataRequestTopic(name=t) for t in topics],
            allow_auto_topic_creation=self._metadata.allow_auto_topic_creation())
        request_version = self._metadata.request_version()

        def on_response(response: ClientResponse) -> None:
            self._in_flight = None
            if response.body is None:
                self._metadata.failed_update(response.received_ms)
                return
            if not response.body.brokers:
                # A broker the controller has not sent its first UpdateMetadata yet (it
                # listens before it knows the cluster) answers with no brokers at all.
                # Taking that as the cluster would leave no node to ask again; like
                # Java's client, keep what we had and retry after the backoff.
                log.debug("ignoring a metadata response without brokers from node %d",
                          node.id)
                self._metadata.failed_update(response.received_ms)
                return
            self._metadata.update(response.body, request_version, response.received_ms, topics)

        request = ClientRequest(node.id, body, on_response, created_ms=now_ms,
                                request_timeout_ms=self._client.request_timeout_ms,
                                min_version=1)
        request.internal = True
        self._in_flight = request
        log.debug("sending metadata request for %s to node %s",
                  "all topics" if topics is None else topics, node)
        self._client.send(request, now_ms)

    def handle_server_disconnect(self, now_ms: int) -> None:
        if self.is_update_due(now_ms):
            self._metadata.failed_update(now_ms)
        self._metadata.request_update()
