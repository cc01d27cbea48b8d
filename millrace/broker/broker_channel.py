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

Owned by the event-loop thread; one task uses a channel at a time (``send`` holds a lock).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
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
from millrace.protocol import ClientConnection
from millrace.protocol.framing import size_error

TLS_HANDSHAKE_TIMEOUT_S = 10.0
# The stream reads on until it holds twice this much: a follower's fetch responses (up to
# replica.fetch.response.max.bytes, 10 MiB) arrive without pausing the socket every
# 128 KiB, asyncio's default.
STREAM_LIMIT = 4 * 1024 * 1024
_INT32 = struct.Struct(">i")

log = logging.getLogger(__name__)


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
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
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
            except (OSError, TimeoutError, ProtocolDecodeError, asyncio.IncompleteReadError,
                    ConnectionError, SaslAuthenticationError) as e:
                self.close()
                raise BrokerNotAvailableError(
                    f"request to broker {self.node_id} at {self.host}:{self.port} failed: "
                    f"{type(e).__name__}: {e}") from None

    async def _round_trip(self, body: Any, version: int) -> Any:
        if self._writer is None:
            security = self.security
            if security.ssl_context is not None:
                self._reader, self._writer = await asyncio.open_connection(
                    self.host, self.port, ssl=security.ssl_context, server_hostname=self.host,
                    ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S, limit=STREAM_LIMIT)
            else:
                self._reader, self._writer = await asyncio.open_connection(
                    self.host, self.port, limit=STREAM_LIMIT)
            self._conn = ClientConnection(self._client_id, self._max_frame)
            if security.uses_sasl:
                await authenticate(self._reader, self._writer, self._conn, security)
        assert self._reader is not None and self._conn is not None
        _, data = self._conn.send_request(body, version)
        self._writer.write(data)
        await self._writer.drain()
        if self._conn.buffered:  # bytes the SASL exchange read past its last response
            raise ProtocolDecodeError(f"{self._conn.buffered} unexpected bytes from the peer")
        # One response, read whole: its bytes are copied once out of the stream's buffer,
        # and a Fetch response's records are decoded as views of them, down to the
        # follower's pwrite.
        (size,) = _INT32.unpack(await self._reader.readexactly(4))
        error = size_error(size, self._max_frame)
        if error is not None:
            raise error
        frame = await self._reader.readexactly(size)
        return self._conn.decode_response(memoryview(frame)).body

    def close(self) -> None:
        if self._writer is not None:
            with contextlib.suppress(Exception):
                self._writer.close()
        self._reader = self._writer = None
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
