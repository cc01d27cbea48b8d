"""``BrokerChannel`` reads each response in place (``_ChannelProtocol`` over a
``FrameReader``), against a real socket server that answers as a peer broker would, and
as a broken one would: a response in pieces, a peer that closes mid-frame, a size prefix
over the limit, bytes nobody asked for.  A decoded Fetch response's records stay views of
the receive buffer, and stay intact while the next responses arrive."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from millrace.broker.broker_channel import BrokerChannel
from millrace.common.errors import BrokerNotAvailableError
from millrace.protocol import ServerConnection
from millrace.protocol.primitives import INT32
from millrace.protocol.types import FetchRequest, FetchResponse

FETCH_V = 12

# Reply(request, body) -> bytes to write, or None to write nothing
Script = Callable[[Any, asyncio.StreamWriter, int], Awaitable[None]]


def _fetch_response(records: bytes) -> Any:
    part = FetchResponse.FetchableTopicResponse.PartitionData(partition_index=0,
                                                                records=records)
    return FetchResponse(responses=[FetchResponse.FetchableTopicResponse(
        topic="t", partitions=[part])])


def _records(body: Any) -> Any:
    return body.responses[0].partitions[0].records


async def _serve(script: Script) -> tuple[asyncio.Server, int]:
    """A peer that decodes each request and lets ``script`` answer the n-th one."""
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = ServerConnection()
        n = 0
        try:
            while True:
                (size,) = INT32.unpack(await reader.readexactly(4))
                request = conn.decode_request(memoryview(bytearray(
                    await reader.readexactly(size))))
                await script(request, writer, n)
                n += 1
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def _run(script: Script, scenario: Callable[[BrokerChannel], Awaitable[None]],
         max_frame_size: int = 100 * 1024 * 1024) -> None:
    async def main() -> None:
        server, port = await _serve(script)
        channel = BrokerChannel(1, "127.0.0.1", port, client_id="test",
                                request_timeout_ms=5_000, max_frame_size=max_frame_size)
        try:
            await scenario(channel)
        finally:
            channel.close()
            server.close()
            await server.wait_closed()

    asyncio.run(main())


def _request() -> Any:
    return FetchRequest(replica_id=2, max_wait_ms=0, min_bytes=1, topics=[])


async def _reply_in_pieces(request: Any, writer: asyncio.StreamWriter, n: int) -> None:
    data = ServerConnection.encode_response(request, _fetch_response(bytes([n]) * 300_000))
    for at in range(0, len(data), 7919):  # a prime: the size prefix splits too, at times
        writer.write(data[at:at + 7919])
        await writer.drain()


def test_responses_in_pieces_decode_and_their_records_stay_views_of_the_buffer() -> None:
    async def scenario(channel: BrokerChannel) -> None:
        first = _records(await channel.send(_request(), FETCH_V))
        assert isinstance(first, memoryview)  # no copy on the way to the log
        later = [_records(await channel.send(_request(), FETCH_V)) for _ in range(3)]
        assert bytes(first) == bytes([0]) * 300_000  # not overwritten by later reads
        assert [bytes(r) for r in later] == [bytes([n]) * 300_000 for n in (1, 2, 3)]

    _run(_reply_in_pieces, scenario)


def test_a_peer_closing_mid_frame_is_a_failed_send_then_a_fresh_connection() -> None:
    async def script(request: Any, writer: asyncio.StreamWriter, n: int) -> None:
        data = ServerConnection.encode_response(request, _fetch_response(b"x" * 1000))
        if n == 0:
            writer.write(data[:500])
            await writer.drain()
            writer.close()
            raise ConnectionError("the test's peer hangs up")
        writer.write(data)

    async def scenario(channel: BrokerChannel) -> None:
        with pytest.raises(BrokerNotAvailableError, match="ConnectionError"):
            await channel.send(_request(), FETCH_V)
        # the next send connects again (the script's connection count restarts at 0)
        with pytest.raises(BrokerNotAvailableError):
            await channel.send(_request(), FETCH_V)

    _run(script, scenario)


def test_a_size_prefix_over_the_limit_is_refused_before_buffering() -> None:
    async def script(request: Any, writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(INT32.pack(1 << 30))  # claims 1 GiB; nothing follows
        await writer.drain()

    async def scenario(channel: BrokerChannel) -> None:
        with pytest.raises(BrokerNotAvailableError, match="1073741824"):
            await channel.send(_request(), FETCH_V)

    _run(script, scenario, max_frame_size=1024 * 1024)


def test_bytes_after_the_response_fail_the_next_send() -> None:
    async def script(request: Any, writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(ServerConnection.encode_response(request, _fetch_response(b"x")) +
                     b"\x00\x00")
        await writer.drain()

    async def scenario(channel: BrokerChannel) -> None:
        assert bytes(_records(await channel.send(_request(), FETCH_V))) == b"x"
        for _ in range(50):  # the stray bytes may come in a read of their own
            await asyncio.sleep(0.01)
        with pytest.raises(BrokerNotAvailableError, match="2 unexpected bytes"):
            await channel.send(_request(), FETCH_V)

    _run(script, scenario)
