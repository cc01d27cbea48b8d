"""The broker's network layer: the Reactor of the seeds on asyncio (Kafka's SocketServer).

``SocketServer`` owns the listeners and the open connections.  One ``asyncio`` server
per listener plays the Acceptor; each accepted socket gets a
``BrokerConnection`` (an ``asyncio.Protocol``) wrapped around the sans-I/O
``ServerConnection``.  Bytes go in through ``data_received``; whole requests queue up and
a per-connection worker task hands them to the handlers *one at a time, in arrival
order*, so responses leave in request order even when clients pipeline (Kafka mutes a
channel while one of its requests is in flight; the queue plays that role).

Bounded memory: a frame's size prefix is checked against ``socket.request.max.bytes``
before its body is buffered, and reading pauses while more than ``MAX_QUEUED`` requests
wait on one connection, so TCP back-pressure reaches a client that floods us.
Connections idle for ``connections.max.idle.ms`` are closed.

Thread ownership: everything here runs on the broker's event-loop thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from typing import Any

from millrace.broker.config import KafkaConfig
from millrace.broker.context import RequestContext
from millrace.broker.handlers import HANDLERS
from millrace.broker.services import BrokerServices
from millrace.common.errors import FrameTooLargeError, ProtocolDecodeError
from millrace.common.time import Time
from millrace.protocol import (
    NEED_DATA,
    ApiVersionsFallback,
    Request,
    RequestDecodeError,
    ServerConnection,
    UnsupportedRequestError,
    api_versions_fallback_response,
)

log = logging.getLogger(__name__)

MAX_QUEUED = 64


class BrokerConnection(asyncio.Protocol):
    """One client connection; owned by the event-loop thread."""

    def __init__(self, server: SocketServer, listener: str) -> None:
        self.server = server
        self.listener = listener
        self.conn = ServerConnection(server.services.api_versions.enabled,
                                     server.config["socket.request.max.bytes"])
        self.transport: asyncio.Transport | None = None
        self.peer: tuple[str, int] = ("", 0)
        self.queue: deque[Request | ApiVersionsFallback] = deque()
        self.wakeup = asyncio.Event()
        self.worker: asyncio.Task[None] | None = None
        self.closed = False
        self.paused = False
        self.last_active = server.time.milliseconds()

    # ------------------------------------------------------------------ protocol callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple):
            self.peer = (str(peer[0]), int(peer[1]))
        self.server.connections.add(self)
        self.worker = asyncio.get_running_loop().create_task(self._work())

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self.last_active = self.server.time.milliseconds()
        try:
            self.conn.receive_data(data)
            while True:
                event = self.conn.next_event()
                if event is NEED_DATA:
                    break
                assert isinstance(event, Request | ApiVersionsFallback)
                self.queue.append(event)
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

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.server.connections.discard(self)
        self.wakeup.set()
        if self.worker is not None and not self.worker.done():
            self.worker.cancel()

    # ------------------------------------------------------------------ request processing
    def _finish_then_close(self) -> None:
        """Serve what was queued before the bad request, then close (like Kafka)."""
        self.queue.append(_CLOSE)  # type: ignore[arg-type]
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
                if self.paused and len(self.queue) < MAX_QUEUED // 2 and event is not _CLOSE:
                    self.paused = False
                    if self.transport is not None:
                        self.transport.resume_reading()
                if event is _CLOSE:
                    self.close()
                    return
                await self._serve(event)
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("connection %s:%s failed; closing it", *self.peer)
            self.close()

    async def _serve(self, event: Request | ApiVersionsFallback) -> None:
        if isinstance(event, ApiVersionsFallback):
            api_max = self.server.services.api_versions.enabled[18][1]
            self._write([api_versions_fallback_response(event.header.correlation_id, api_max)])
            return
        handler = HANDLERS.get(event.api.key)
        if handler is None:  # advertised but not yet served: behave like an unknown key
            log.warning("no handler for %s; closing connection from %s:%s", event.api.name,
                        *self.peer)
            self.close()
            return
        ctx = RequestContext(event.header, event.api, self.peer[0], self.peer[1],
                             self.server.services, self.listener)
        try:
            body = await handler(ctx, event.body)
        except Exception:
            log.exception("%s v%d from %s:%s (client %r) failed; closing the connection",
                          event.api.name, event.version, *self.peer, ctx.client_id)
            self.close()
            return
        if body is None:
            return
        parts = ServerConnection.encode_response_chunks(event, body)
        if len(parts) == 1:
            self._write(parts)
        else:
            await self._write_with_regions(parts)

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
                await part.send(loop, self.transport)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
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

    def __init__(self, config: KafkaConfig, time: Time) -> None:
        self.config = config
        self.time = time
        self._services: BrokerServices | None = None
        self.connections: set[BrokerConnection] = set()
        self._servers: list[asyncio.Server] = []
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
                    port=listener.port, reuse_address=True, backlog=512,
                    start_serving=False)
            except OSError as e:
                for bound in self._servers:
                    bound.close()
                self._servers.clear()
                raise ListenerBindError(
                    f"cannot listen on {listener.name}://{listener.host or '0.0.0.0'}:"
                    f"{listener.port} (listeners): {e.strerror or e}") from e
            self._servers.append(srv)

    async def start_serving(self, services: BrokerServices) -> None:
        """Accept connections, served by ``services``."""
        self._services = services
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
        """Close connections idle longer than connections.max.idle.ms (runs forever)."""
        max_idle = self.config["connections.max.idle.ms"]
        if max_idle < 0:
            return
        while True:
            await asyncio.sleep(min(max_idle / 1000 / 4, 10.0))
            now = self.time.milliseconds()
            for c in list(self.connections):
                if c.idle_for(now) > max_idle:
                    log.info("closing connection from %s:%s idle for %d ms", *c.peer,
                             c.idle_for(now))
                    c.close()
