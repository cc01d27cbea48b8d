"""``BrokerChannel``: one broker's connection to another, for requests it sends itself.

Replica fetchers (Fetch, OffsetForLeaderEpoch to the leader) and the controller
(LeaderAndIsr, UpdateMetadata, StopReplica to every broker) talk to other brokers with
Kafka's own APIs.  The broker never imports the client package, so this is the broker's
own small asyncio adapter around the sans-I/O ``ClientConnection``: it connects lazily,
sends one request at a time (a fetcher and a controller queue each keep one request in
flight, as in Kafka), waits for its response up to ``request_timeout_ms``, and on any
failure closes the socket and raises ``BrokerNotAvailableError`` so the caller backs off
and retries on a fresh connection.  Versions are fixed by the caller: both ends are
millrace brokers of the same release.

A channel connects with the inter-broker listener's security (``ChannelSecurity``: TLS
and/or SASL, see ``security/inter_broker.py``): the TLS handshake and the SASL exchange
happen on connect, before the first request; a failure of either is a failed send like
any other.

Responses are read in place, as the broker's own connections read requests: the socket
(or the TLS engine) writes into a ``FrameReader``'s reusable buffer through
``_ChannelProtocol`` (an ``asyncio.BufferedProtocol``), and a response is decoded from a
view of it.  A follower's fetched records stay views of that buffer down to its
``pwrite``; nothing copies a fetch response in Python (a stream reader copied each one
twice, into its buffer and out of it).

Owned by the event-loop thread; one task uses a channel at a time (``send`` holds a lock).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from millrace.broker.security.inter_broker import (
    PLAINTEXT_CHANNEL,
    ChannelSecurity,
    authenticate,
)
from millrace.common.errors import (
    BrokerNotAvailableError,
    ProtocolDecodeError,
    SaslAuthenticationError,
)
from millrace.protocol import NEED_DATA, ClientConnection
from millrace.protocol.framing import FrameReader

TLS_HANDSHAKE_TIMEOUT_S = 10.0

log = logging.getLogger(__name__)


class _ChannelProtocol(asyncio.BufferedProtocol):
    """The channel's end of its socket: response frames read in place (``read_frame``),
    requests written with back-pressure (``write``)."""

    def __init__(self, max_frame_size: int) -> None:
        self.frames = FrameReader(max_frame_size)
        self.transport: asyncio.Transport | None = None
        self._waiter: asyncio.Future[memoryview] | None = None
        self._lost: str | None = None  # why the connection is gone
        self._writable = asyncio.Event()
        self._writable.set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.frames.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        self.frames.buffer_updated(nbytes)
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        try:
            frame = self.frames.next_frame()
        except ProtocolDecodeError as e:
            waiter.set_exception(e)
            return
        if frame is not NEED_DATA:
            assert isinstance(frame, memoryview)
            waiter.set_result(frame)

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = f"{type(exc).__name__}: {exc}" if exc else "closed by the peer"
        self._writable.set()
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(ConnectionError(f"connection {self._lost}"))

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    async def write(self, data: bytes) -> None:
        """Write ``data``; return once the transport takes more."""
        if self._lost is not None or self.transport is None:
            raise ConnectionError(f"connection {self._lost or 'not open'}")
        self.transport.write(data)
        await self._writable.wait()

    async def read_frame(self) -> memoryview:
        """The next whole frame, a view of the receive buffer (kept valid while viewed)."""
        frame = self.frames.next_frame()
        if frame is not NEED_DATA:
            assert isinstance(frame, memoryview)
            return frame
        if self._lost is not None:
            raise ConnectionError(f"connection {self._lost}")
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            return await self._waiter
        finally:
            self._waiter = None

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class BrokerChannel:
    def __init__(self, node_id: int, host: str, port: int, *, client_id: str,
                 request_timeout_ms: int = 30_000, max_frame_size: int = 100 * 1024 * 1024,
                 security: ChannelSecurity = PLAINTEXT_CHANNEL) -> None:
        self.node_id = node_id
        self.security = security
        self.host = host
        self.port = port
        self._client_id = client_id
        self._timeout_s = request_timeout_ms / 1000
        self._max_frame = max_frame_size
        self._protocol: _ChannelProtocol | None = None
        self._conn: ClientConnection | None = None
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"BrokerChannel(node {self.node_id} at {self.host}:{self.port})"

    def update_endpoint(self, host: str, port: int) -> None:
        if (host, port) != (self.host, self.port):
            self.host, self.port = host, port
            self.close()

    async def send(self, body: Any, version: int) -> Any:
        """Send ``body`` at ``version`` and return the response body."""
        async with self._lock:
            try:
                return await asyncio.wait_for(self._round_trip(body, version), self._timeout_s)
            except (OSError, TimeoutError, ProtocolDecodeError, ConnectionError,
                    SaslAuthenticationError) as e:
                self.close()
                raise BrokerNotAvailableError(
                    f"request to broker {self.node_id} at {self.host}:{self.port} failed: "
                    f"{type(e).__name__}: {e}") from None

    async def _round_trip(self, body: Any, version: int) -> Any:
        protocol = self._protocol
        if protocol is None:
            protocol = await self._connect()
        assert self._conn is not None
        if protocol.frames.buffered:  # one request in flight: nothing may come unasked
            raise ProtocolDecodeError(f"{protocol.frames.buffered} unexpected bytes from "
                                      "the peer")
        return await self._exchange(body, version)

    async def _connect(self) -> _ChannelProtocol:
        security = self.security
        loop = asyncio.get_running_loop()
        if security.ssl_context is not None:
            _, protocol = await loop.create_connection(
                lambda: _ChannelProtocol(self._max_frame), self.host, self.port,
                ssl=security.ssl_context, server_hostname=self.host,
                ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S)
        else:
            _, protocol = await loop.create_connection(
                lambda: _ChannelProtocol(self._max_frame), self.host, self.port)
        self._protocol = protocol
        self._conn = ClientConnection(self._client_id, self._max_frame)
        if security.uses_sasl:
            await authenticate(self._exchange, security)
        return protocol

    async def _exchange(self, body: Any, version: int) -> Any:
        """One request and its response, on the open connection."""
        assert self._protocol is not None and self._conn is not None
        _, data = self._conn.send_request(body, version)
        await self._protocol.write(data)
        frame = await self._protocol.read_frame()
        return self._conn.decode_response(frame).body

    def close(self) -> None:
        if self._protocol is not None:
            self._protocol.close()
        self._protocol = None
        self._conn = None


class BrokerChannels:
    """One ``BrokerChannel`` per broker that this broker sends a kind of request to (the
    transaction coordinator's markers, the leaders' KIP-890 verifications), created on
    first use; ``endpoint(node)`` is looked up on every send, so a broker that came back
    on another address is reached there."""

    def __init__(self, endpoint: Callable[[int], tuple[str, int] | None], *, client_id: str,
                 request_timeout_ms: int, security: ChannelSecurity = PLAINTEXT_CHANNEL
                 ) -> None:
        self._security = security
        self._endpoint = endpoint
        self._client_id = client_id
        self._timeout_ms = request_timeout_ms
        self._channels: dict[int, BrokerChannel] = {}

    async def send(self, node: int, body: Any, version: int) -> Any:
        """``BrokerNotAvailableError`` when ``node`` is not registered or does not answer."""
        address = self._endpoint(node)
        if address is None:
            raise BrokerNotAvailableError(f"broker {node} is not registered")
        channel = self._channels.get(node)
        if channel is None:
            channel = self._channels[node] = BrokerChannel(
                node, *address, client_id=self._client_id,
                request_timeout_ms=self._timeout_ms, security=self._security)
        else:
            channel.update_endpoint(*address)
        return await channel.send(body, version)

    def close(self) -> None:
        for channel in self._channels.values():
            channel.close()
        self._channels.clear()
