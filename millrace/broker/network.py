"""The broker's network layer: the Reactor of the seeds on asyncio (Kafka's SocketServer).

``SocketServer`` owns the listeners and the open connections.  One ``asyncio`` server
per listener plays the Acceptor; each accepted socket gets a
``BrokerConnection`` (an ``asyncio.BufferedProtocol``) wrapped around the sans-I/O
``ServerConnection``.  Bytes go in without a copy: the transport reads (``recv_into``,
or the TLS engine's ``read`` into a buffer) straight into the connection's reusable
receive buffer (``get_buffer``/``buffer_updated``, ``protocol.framing.FrameReader``), and
each request is decoded from a view of it, its record batches staying views down to the
log's ``pwrite`` (bench/README.md, "The byte path").  Whole requests queue up and
a per-connection worker task hands them to the handlers *one at a time, in arrival
order*, so responses leave in request order even when clients pipeline (Kafka mutes a
channel while one of its requests is in flight; the queue plays that role).

Bounded memory: a frame's size prefix is checked against ``socket.request.max.bytes``
before its body is buffered, and reading pauses while more than ``MAX_QUEUED`` requests
wait on one connection, so TCP back-pressure reaches a client that floods us.
Connections idle for ``connections.max.idle.ms`` are closed.

Security (each listener's ``ListenerSecurity``).  On an SSL / SASL_SSL listener the
accepted socket first goes through a TLS handshake (``start_tls_server``, bounded by
``TLS_HANDSHAKE_TIMEOUT_S``); a handshake that fails closes the connection at once and is
logged once with the peer and the reason, without holding up any other connection.  On
an SSL listener the principal is the mapped DN of the client's certificate.  On a
SASL_PLAINTEXT / SASL_SSL listener every frame before authentication completes goes, in
order, through the connection's ``SaslServerAuthenticator`` undecoded (frames bounded by
``sasl.server.max.receive.size``, reading paused while one waits); only then are frames
decoded as requests.  Every request's ``RequestContext`` carries the connection's
principal (``User:ANONYMOUS`` on PLAINTEXT), and the ``millrace.request`` logger
(DEBUG) logs each completed request with it, as Kafka's request logger does.

Client quotas (KIP-219).  While any client quota is configured, each request is charged
to its (user, client id) once its handler returns (``quota.throttling.charge``); a client
over its quota gets its response at once with ``throttle_time_ms`` set, and then its
connection is muted for that long: reading pauses (``throttled``, alongside the
back-pressure flag ``paused``: reading resumes only when neither holds it) and the
connection's worker waits before serving its next request.  Other connections never
wait.  Without quotas the cost per request is one flag test.

Request metrics (``metrics.request_metrics``).  Each request's instants are kept in a
``RequestTimes``: whole (``data_received``), taken up by the worker, parked in and woken
from a purgatory (marked through the ``CURRENT_REQUEST`` context variable, which the
worker sets before calling the handler), handled, handed to the transport, sent; once
sent, ``RequestMetrics.record`` turns them into Kafka's phase histograms and counts the
request and the error codes of its response.  With ``metrics.enabled=false`` none of
this runs (one test per request).

Thread ownership: everything here runs on the broker's event-loop thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time as _time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from millrace.broker.config import KafkaConfig
from millrace.broker.connection_quotas import ConnectionQuotas
from millrace.broker.context import RequestContext
from millrace.broker.handlers import HANDLERS
from millrace.broker.metrics.request_metrics import (
    CURRENT_REQUEST,
    RequestMetrics,
    RequestTimes,
    is_follower_fetch,
)
from millrace.broker.metrics.request_metrics import clock as request_clock
from millrace.broker.quota.client_quota_manager import ClientQuotas
from millrace.broker.quota.throttling import TimedCoroutine, cap_fetch, charge
from millrace.broker.security.listener_security import ListenerSecurity, build_all
from millrace.broker.security.sasl_server_authenticator import (
    Action,
    AuthStep,
    SaslServerAuthenticator,
)
from millrace.broker.services import BrokerServices
from millrace.broker.tls_transport import start_tls_server
from millrace.common.errors import FrameTooLargeError, InvalidRequestError, ProtocolDecodeError
from millrace.common.time import Time
from millrace.protocol import (
    NEED_DATA,
    ApiKey,
    ApiVersionsFallback,
    Request,
    RequestDecodeError,
    ServerConnection,
    UnsupportedRequestError,
    api_versions_fallback_response,
)
from millrace.security.kafka_principal import ANONYMOUS, KafkaPrincipal
from millrace.security.ssl_principal_mapper import NoMatchingRule

log = logging.getLogger(__name__)
request_log = logging.getLogger("millrace.request")

MAX_QUEUED = 64
PRE_AUTH_QUEUED = 2  # frames waiting before authentication: reading pauses beyond this
TLS_HANDSHAKE_TIMEOUT_S = 10.0
_BACKLOG = 512  # a listener's accept queue


class _Frame:
    """A frame not decoded yet: it arrived before its connection was authenticated."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


IDLE_TRIM_MS = 5_000  # a connection idle this long gives its receive buffers back


class BrokerConnection(asyncio.BufferedProtocol):
    """One client connection; owned by the event-loop thread."""

    def __init__(self, server: SocketServer, listener: str) -> None:
        self.server = server
        self.listener = listener
        self.conn = ServerConnection(server.services.api_versions.enabled,
                                     server.config["socket.request.max.bytes"])
        self.security: ListenerSecurity = server.listener_security[listener]
        self.principal: KafkaPrincipal = ANONYMOUS
        self.authenticator: SaslServerAuthenticator | None = None
        if self.security.uses_sasl:
            self.authenticator = SaslServerAuthenticator(self.security,
                                                         self.conn.decode_request)
            self.conn.max_frame_size = min(self.security.max_receive_size,
                                           server.config["socket.request.max.bytes"])
        self.transport: asyncio.Transport | None = None
        self.peer: tuple[str, int] = ("", 0)
        self.queue: deque[Request | ApiVersionsFallback | _Frame] = deque()
        self.arrivals: deque[float] = deque()  # when each queued request was whole
        self.wakeup = asyncio.Event()
        self.writable = asyncio.Event()  # cleared while the transport pauses writing
        self.writable.set()
        self.worker: asyncio.Task[None] | None = None
        self.closed = False
        self.paused = False  # reading paused for back-pressure (too many queued)
        self.throttled = False  # reading paused by a client quota (KIP-219 mute)
        self.counted = False  # by server.quotas: given back once, in connection_lost
        self.last_active = server.time.milliseconds()
        self.trimmed = True  # the receive buffers were given back (idle)

    # ------------------------------------------------------------------ protocol callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple):
            self.peer = (str(peer[0]), int(peer[1]))
        refusal = self.server.quotas.accept(self.listener, self.peer[0])
        if refusal is not None:  # over a connection limit: closed before any work
            self.closed = True
            transport.abort()
            unlogged = self.server.quotas.should_log(refusal)
            if unlogged is not None:
                log.info("closing connection from %s:%s on listener %s: %s%s", *self.peer,
                         self.listener, refusal,
                         f" ({unlogged} more refused since the last such line)"
                         if unlogged else "")
            return
        self.counted = True
        self.server.connections.add(self)
        sock = transport.get_extra_info("socket")
        if sock is not None:  # Kafka's Acceptor: SO_SNDBUF per connection, and keepalive
            send_buffer = self.server.config["socket.send.buffer.bytes"]
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
                if send_buffer != -1:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
        loop = asyncio.get_running_loop()
        if self.security.ssl_context is not None:
            transport.pause_reading()  # nothing is read in clear on a TLS listener
            self.worker = loop.create_task(self._start_tls(transport))
        else:
            self.worker = loop.create_task(self._work())

    async def _start_tls(self, raw: asyncio.Transport) -> None:
        assert self.security.ssl_context is not None
        try:
            tls = await start_tls_server(raw, self, self.security.ssl_context,
                                         handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S)
        except asyncio.CancelledError:
            self._release_quota()
            raise
        except BaseException as e:
            # asyncio aborts a handshake past its timeout with ConnectionAbortedError
            timed_out = isinstance(e, TimeoutError | ConnectionAbortedError)
            reason = (f"no handshake within the timeout ({TLS_HANDSHAKE_TIMEOUT_S:.0f} s)"
                      if timed_out else f"{type(e).__name__}: {e}")
            log.warning("TLS handshake with %s:%s on listener %s failed: %s", *self.peer,
                        self.listener, reason)
            raw.close()
            self.connection_lost(None)
            return
        if tls is None:  # closed during the handshake
            self.connection_lost(None)
            return
        self.transport = tls
        if self.security.protocol == "SSL":
            try:
                self.principal = self.security.ssl_principal(tls.get_extra_info("ssl_object"))
            except NoMatchingRule as e:
                log.warning("closing connection from %s:%s on listener %s: no "
                            "ssl.principal.mapping.rules rule matches its certificate (%s)",
                            *self.peer, self.listener, e)
                self.close()
                return
        await self._work()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.conn.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        self.conn.buffer_updated(nbytes)
        self._received()

    def data_received(self, data: bytes) -> None:
        """Bytes handed over whole (a transport that does not lend buffers)."""
        self.conn.receive_data(data)
        self._received()

    def _received(self) -> None:
        if self.closed:
            return
        self.last_active = self.server.time.milliseconds()
        self.trimmed = False
        if self.authenticator is not None and not self.authenticator.complete:
            self._receive_unauthenticated()
            return
        arrived = request_clock() if self.server.request_metrics is not None else 0.0
        try:
            while True:
                event = self.conn.next_event()
                if event is NEED_DATA:
                    break
                assert isinstance(event, Request | ApiVersionsFallback)
                self.queue.append(event)
                self.arrivals.append(arrived)
        except UnsupportedRequestError as e:
            log.warning("closing connection from %s:%s: %s (client %r, correlation id %d)",
                        *self.peer, e, e.header.client_id, e.header.correlation_id)
            self._finish_then_close()
            return
        except RequestDecodeError as e:
            log.warning("closing connection from %s:%s: malformed %s request (correlation "
                        "id %d): %s", *self.peer, e.header.api_key, e.header.correlation_id, e)
            self._finish_then_close()
            return
        except FrameTooLargeError as e:
            log.warning("closing connection from %s:%s: %s", *self.peer, e)
            self.close()
            return
        except ProtocolDecodeError as e:
            log.warning("closing connection from %s:%s: %s", *self.peer, e)
            self.close()
            return
        if self.queue:
            self.wakeup.set()
        if len(self.queue) >= MAX_QUEUED and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()

    def _receive_unauthenticated(self) -> None:
        """Frames before authentication stay undecoded: the authenticator reads each in
        the state the previous one left (a SASL v0 token is no request).  They are copied
        out of the receive buffer (small, and kept across awaits)."""
        arrived = request_clock() if self.server.request_metrics is not None else 0.0
        try:
            while True:
                frame = self.conn.next_frame()
                if frame is NEED_DATA:
                    break
                assert isinstance(frame, memoryview)
                self.queue.append(_Frame(frame.tobytes()))
                frame.release()
                self.arrivals.append(arrived)
        except ProtocolDecodeError as e:  # FrameTooLargeError included
            log.warning("closing connection from %s:%s on listener %s before "
                        "authentication: %s (sasl.server.max.receive.size)", *self.peer,
                        self.listener, e)
            self.close()
            return
        if self.queue:
            self.wakeup.set()
        if len(self.queue) >= PRE_AUTH_QUEUED and not self.paused and \
                self.transport is not None:
            self.paused = True
            self.transport.pause_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self._release_quota()
        self.closed = True
        self.writable.set()
        self.server.connections.discard(self)
        self.wakeup.set()
        if self.worker is not None and not self.worker.done() and \
                self.worker is not asyncio.current_task():
            self.worker.cancel()

    def _release_quota(self) -> None:
        """Give the connection's slot back, once (connection_lost may come twice after a
        failed TLS handshake)."""
        if self.counted:
            self.counted = False
            self.server.quotas.release(self.listener, self.peer[0])

    # ------------------------------------------------------------------ request processing
    def _finish_then_close(self) -> None:
        """Serve what was queued before the bad request, then close (like Kafka)."""
        self.queue.append(_CLOSE)  # type: ignore[arg-type]
        self.arrivals.append(0.0)
        self.wakeup.set()
        if self.transport is not None and not self.paused:
            self.paused = True
            self.transport.pause_reading()

    async def _work(self) -> None:
        try:
            while not self.closed:
                if not self.queue:
                    self.wakeup.clear()
                    await self.wakeup.wait()
                    continue
                event = self.queue.popleft()
                arrived = self.arrivals.popleft()
                if self.paused and len(self.queue) < MAX_QUEUED // 2 and event is not _CLOSE:
                    self.paused = False
                    if self.transport is not None and not self.throttled:
                        self.transport.resume_reading()
                if event is _CLOSE:
                    self.close()
                    return
                if isinstance(event, _Frame):
                    await self._serve_frame(event.data, arrived)
                    continue
                await self._serve(event, arrived=arrived)
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("connection %s:%s failed; closing it", *self.peer)
            self.close()

    async def _serve_frame(self, frame: bytes, arrived: float) -> None:
        """A frame that arrived before authentication completed."""
        authenticator = self.authenticator
        assert authenticator is not None
        if not authenticator.complete:
            await self._apply(authenticator.receive(frame, self.server.time.milliseconds()),
                              arrived)
            return
        try:  # authenticated meanwhile: an ordinary request
            event = self.conn.decode_request(frame)
        except (UnsupportedRequestError, RequestDecodeError) as e:
            log.warning("closing connection from %s:%s: %s", *self.peer, e)
            self.close()
            return
        await self._serve(event, arrived=arrived)

    async def _apply(self, step: AuthStep, arrived: float = 0.0) -> None:
        if step.action is Action.SERVE:
            assert step.request is not None
            await self._serve(step.request, authenticating=True, arrived=arrived)
        elif step.action is Action.REPLY:
            assert step.data is not None
            self._write([step.data])
            authenticator = self.authenticator
            if authenticator is not None and authenticator.complete and \
                    authenticator.principal is not None:
                if self.principal != authenticator.principal:
                    log.debug("connection from %s:%s on listener %s authenticated as %s "
                              "(SASL/%s)", *self.peer, self.listener,
                              authenticator.principal, authenticator.mechanism)
                self.principal = authenticator.principal
                self.conn.max_frame_size = self.server.config["socket.request.max.bytes"]
        elif step.action is Action.FAIL:
            log.info("authentication of %s:%s on listener %s failed: %s", *self.peer,
                     self.listener, step.reason)
            if self.transport is not None and not self.paused:
                self.paused = True
                self.transport.pause_reading()
            await asyncio.sleep(self.security.failed_authentication_delay_ms / 1000)
            if step.data is not None:
                self._write([step.data])
            self.close()
        else:
            log.info("closing connection from %s:%s on listener %s: %s", *self.peer,
                     self.listener, step.reason)
            self.close()

    async def _serve(self, event: Request | ApiVersionsFallback, *,
                     authenticating: bool = False, arrived: float = 0.0) -> None:
        if isinstance(event, ApiVersionsFallback):
            api_max = self.server.services.api_versions.enabled[18][1]
            self._write([api_versions_fallback_response(event.header.correlation_id, api_max)])
            return
        authenticator = self.authenticator
        if authenticator is not None and not authenticating:
            now = self.server.time.milliseconds()
            key = event.api.key
            step: AuthStep | None = None
            if key == ApiKey.SASL_HANDSHAKE:
                step = authenticator.maybe_reauthenticate(event, now)
            elif key == ApiKey.SASL_AUTHENTICATE and authenticator.reauthenticating:
                step = authenticator.reauthenticate(event, now)
            elif authenticator.session_expired(now):
                log.info("closing connection from %s:%s on listener %s: the SASL session "
                         "of %s expired (connections.max.reauth.ms) and %s v%d is no "
                         "re-authentication", *self.peer, self.listener, self.principal,
                         event.api.name, event.version)
                self.close()
                return
            if step is not None:
                await self._apply(step, arrived)
                return
        handler = HANDLERS.get(event.api.key)
        if handler is None:  # advertised but not yet served: behave like an unknown key
            log.warning("no handler for %s; closing connection from %s:%s", event.api.name,
                        *self.peer)
            self.close()
            return
        ctx = RequestContext(event.header, event.api, self.peer[0], self.peer[1],
                             self.server.services, self.listener, self.principal,
                             self.security.protocol)
        started = _time.monotonic() if request_log.isEnabledFor(logging.DEBUG) else 0.0
        request_metrics = self.server.request_metrics
        times: RequestTimes | None = None
        if request_metrics is not None:
            times = RequestTimes(arrived or request_clock())
            times.dequeued = request_clock()
            CURRENT_REQUEST.set(times)  # the worker task's context: purgatories mark it
        quotas = self.server.client_quotas
        throttling = quotas.enabled and not authenticating  # the one check without quotas
        timed: TimedCoroutine | None = None
        try:
            if throttling:
                cap_fetch(quotas, ctx, event)
                if quotas.request.enabled and quotas.request.limits(ctx.principal.name,
                                                                    ctx.client_id):
                    timed = TimedCoroutine(handler(ctx, event.body))
            body = await (timed if timed is not None else handler(ctx, event.body))
        except InvalidRequestError as e:  # a request the handler refuses whole (Kafka closes)
            log.warning("closing connection from %s:%s: invalid %s v%d (client %r): %s",
                        *self.peer, event.api.name, event.version, ctx.client_id, e)
            self.close()
            return
        except Exception:
            log.exception("%s v%d from %s:%s (client %r, %s) failed; closing the connection",
                          event.api.name, event.version, *self.peer, ctx.client_id,
                          self.principal)
            self.close()
            return
        if started:
            request_log.debug(
                "Completed request: %s v%d correlation id %d from client %r at %s:%s "
                "principal %s listener %s (%s) in %.2f ms", event.api.name, event.version,
                event.correlation_id, ctx.client_id, *self.peer, self.principal,
                self.listener, self.security.protocol, (_time.monotonic() - started) * 1000)
        if times is not None:
            times.handled = request_clock()
        if throttling:
            await self._respond_and_throttle(quotas, ctx, event, body, timed, times)
        elif body is not None:
            parts = ServerConnection.encode_response_chunks(event, body)
            if times is not None:
                times.written = request_clock()
            if len(parts) == 1:
                self._write(parts)
            else:
                await self._write_with_regions(parts)
        if times is not None and request_metrics is not None:
            if not times.sent:
                times.sent = request_clock()
            request_metrics.record(event.api.key, event.api.name, event.version, body, times,
                                   follower=is_follower_fetch(event.api.key, event.body))

    async def _respond_and_throttle(self, quotas: ClientQuotas, ctx: RequestContext,
                                    event: Request, body: Any,
                                    timed: TimedCoroutine | None,
                                    times: RequestTimes | None) -> None:
        """KIP-219: charge the request to its client's quotas, send the response at once
        (with its ``throttle_time_ms``; a throttled Fetch without data), then mute the
        connection for the throttle time: reading pauses and this connection's worker
        serves nothing more until it is over, so a client that ignores the throttle time
        (librdkafka) is held to its quota as well.  Other connections are not touched."""
        throttle_ms, parts = charge(quotas, ctx, event, body, timed,
                                    self.server.time.milliseconds())
        if times is not None:
            times.written = request_clock()
            times.throttle_ms = max(0, throttle_ms)
        if len(parts) == 1:
            self._write(parts)
        elif parts:
            await self._write_with_regions(parts)
        if throttle_ms <= 0 or self.closed:
            return
        if times is not None:  # sent before the mute (KIP-219): the mute is ThrottleTimeMs
            times.sent = request_clock()
        self.throttled = True
        if self.transport is not None and not self.paused:
            self.transport.pause_reading()
        try:
            await self.server.sleep(throttle_ms / 1000)
        finally:
            self.throttled = False
            # back-pressure may hold reading still; the worker resumes it as it drains
            if self.transport is not None and not self.paused and not self.closed:
                self.transport.resume_reading()

    def _write(self, parts: list[Any]) -> None:
        if self.transport is not None and not self.closed:
            for part in parts:
                self.transport.write(part)

    async def _write_with_regions(self, parts: list[Any]) -> None:
        """Bytes go through the transport; file regions through sendfile where possible."""
        loop = asyncio.get_running_loop()
        for part in parts:
            if self.closed or self.transport is None:
                return
            if isinstance(part, bytes | bytearray):
                self.transport.write(part)
            else:
                await part.send(loop, self.transport, self._drain)

    def pause_writing(self) -> None:  # the transport's buffer is over its high-water mark
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()

    async def _drain(self) -> None:
        """Return once the transport takes more (or the connection is gone)."""
        if not self.writable.is_set() and not self.closed:
            await self.writable.wait()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.writable.set()
            if self.transport is not None:
                self.transport.close()

    def idle_for(self, now_ms: int) -> int:
        return now_ms - self.last_active if not self.queue else 0


_CLOSE = object()


class ListenerBindError(Exception):
    """A listener's address could not be bound (taken, or not this machine's)."""


class SocketServer:
    """The listeners and their connections (Kafka's ``SocketServer``); owned by the
    event-loop thread."""

    def __init__(self, config: KafkaConfig, time: Time,
                 listener_security: dict[str, ListenerSecurity] | None = None) -> None:
        self.config = config
        self.time = time
        self._services: BrokerServices | None = None
        self.connections: set[BrokerConnection] = set()
        self.quotas = ConnectionQuotas(config, time)  # validates the limits' configs
        self.client_quotas = ClientQuotas(config)  # replaced by the services' when serving
        # per-request metrics (None: metrics.enabled=false, or not serving yet)
        self.request_metrics: RequestMetrics | None = None
        self.sleep: Callable[[float], Awaitable[None]] = asyncio.sleep  # a throttle's mute
        self.listener_security: dict[str, ListenerSecurity] = (
            listener_security if listener_security is not None else build_all(config))
        self._servers: list[asyncio.Server] = []
        self._server_listeners: list[str] = []
        self._reaper: asyncio.Task[None] | None = None

    @property
    def services(self) -> BrokerServices:
        assert self._services is not None, "attach the services before serving"
        return self._services

    async def bind(self) -> None:
        """Bind every listener without accepting yet (``start_serving`` does): the broker
        binds before it touches its log dirs, so a taken port fails at once, with nothing
        created on disk.  ListenerBindError names the listener and the socket error."""
        loop = asyncio.get_running_loop()
        for listener in self.config.listeners:
            host = listener.host or None
            try:
                srv = await loop.create_server(
                    lambda name=listener.name: BrokerConnection(self, name), host=host,
                    port=listener.port, reuse_address=True, backlog=_BACKLOG,
                    start_serving=False)
            except OSError as e:
                for bound in self._servers:
                    bound.close()
                self._servers.clear()
                self._server_listeners.clear()
                raise ListenerBindError(
                    f"cannot listen on {listener.name}://{listener.host or '0.0.0.0'}:"
                    f"{listener.port} (listeners): {e.strerror or e}") from e
            # Listen now, accept from start_serving on, as Kafka's acceptors do: the
            # broker is registered in ZooKeeper in between, and a controller that dials
            # it then waits in the backlog for its first UpdateMetadata to be read
            # instead of being refused and retrying.
            receive_buffer = self.config["socket.receive.buffer.bytes"]
            for ts in srv.sockets:  # asyncio's wrappers have no listen()
                sock = socket.socket(ts.family, ts.type, ts.proto,
                                     fileno=ts.fileno())
                if receive_buffer != -1:  # before listen: accepted sockets inherit it,
                    # and the window scale they offer is chosen from it (as in Kafka)
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
                sock.listen(_BACKLOG)
                sock.detach()  # the fd stays asyncio's
            self._servers.append(srv)
            self._server_listeners.append(listener.name)

    def bound_port_of(self, listener: str) -> int:
        """The port ``listener`` is bound to (its configured port may be 0)."""
        srv = self._servers[self._server_listeners.index(listener)]
        return int(srv.sockets[0].getsockname()[1])

    async def start_serving(self, services: BrokerServices) -> None:
        """Accept connections, served by ``services``; the connection quotas follow the
        IP quotas (``connection_creation_rate``) of its quota store from now on."""
        self._services = services
        self.client_quotas = services.client_quotas
        if self.config["metrics.enabled"]:
            self.request_metrics = RequestMetrics(services.metrics)
        store = services.quota_store
        self.quotas.load_ip_rates(
            await asyncio.get_running_loop().run_in_executor(None, store.load_ip_quotas)
            if store.blocking else store.load_ip_quotas())
        store.watch_ip_quotas(self.quotas.update_ip_rate)
        for security in self.listener_security.values():
            security.scram_lookup = services.credentials.scram_credential
        for srv in self._servers:
            await srv.start_serving()
        self._reaper = asyncio.get_running_loop().create_task(self._reap_idle_connections())

    def bound_addresses(self) -> list[tuple[str, int]]:
        return [(str(sock.getsockname()[0]), int(sock.getsockname()[1]))
                for srv in self._servers for sock in srv.sockets]

    async def shutdown(self) -> None:
        """Stop accepting and close every connection."""
        for srv in self._servers:
            srv.close()
        for c in list(self.connections):
            c.close()
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
        for srv in self._servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(srv.wait_closed(), 2)

    async def _reap_idle_connections(self) -> None:
        """Close connections idle longer than connections.max.idle.ms (-1: never), and
        take the receive buffers of those idle over ``IDLE_TRIM_MS`` (runs forever)."""
        max_idle = self.config["connections.max.idle.ms"]
        while True:
            await asyncio.sleep(min(max_idle / 1000 / 4, 10.0) if max_idle >= 0 else 10.0)
            now = self.time.milliseconds()
            for c in list(self.connections):
                if not c.trimmed and now - c.last_active > IDLE_TRIM_MS and not c.queue:
                    c.trimmed = True
                    c.conn.trim()
                if max_idle >= 0 and c.idle_for(now) > max_idle:
                    log.info("closing connection from %s:%s idle for %d ms", *c.peer,
                             c.idle_for(now))
                    c.close()
