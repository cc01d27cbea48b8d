"""``socket.send.buffer.bytes`` and ``socket.receive.buffer.bytes`` reach the sockets, as in
Kafka's Acceptor: SO_RCVBUF on the listening socket (accepted sockets inherit it), SO_SNDBUF
on each accepted socket; -1 leaves the operating system's default (and its autotuning).
Linux reports twice the size asked for (its bookkeeping overhead), so the checks compare
with what a plain socket given the same value reports."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from millrace.broker.network import SocketServer
from millrace.common.errors import ConfigError
from tests.unit.broker.brokergen import Broker


def _reported(option: int, value: int | None) -> int:
    """What the kernel reports for ``option`` on a fresh TCP socket set to ``value``."""
    with socket.socket() as s:
        if value is not None:
            s.setsockopt(socket.SOL_SOCKET, option, value)
        return int(s.getsockopt(socket.SOL_SOCKET, option))


def _accepted_buffers(tmp_path: Path, **settings: str) -> tuple[int, int, int]:
    """(listening SO_RCVBUF, accepted SO_RCVBUF, accepted SO_SNDBUF) on a serving broker."""
    broker = Broker(str(tmp_path / "logs"), listeners="PLAINTEXT://127.0.0.1:0", **settings)

    async def scenario() -> tuple[int, int, int]:
        server = SocketServer(broker.config, broker.time)
        await server.bind()
        await server.start_serving(broker.services)
        try:
            host, port = server.bound_addresses()[0]
            _, writer = await asyncio.open_connection(host, port)
            for _ in range(100):
                if server.connections:
                    break
                await asyncio.sleep(0.01)
            (conn,) = server.connections
            assert conn.transport is not None
            accepted = conn.transport.get_extra_info("socket")
            listening = server._servers[0].sockets[0]
            writer.close()
            return (int(listening.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)),
                    int(accepted.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)),
                    int(accepted.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)))
        finally:
            await server.shutdown()

    try:
        return asyncio.run(scenario())
    finally:
        broker.close()


def test_configured_sizes_are_set_on_the_listening_and_accepted_sockets(
        tmp_path: Path) -> None:
    listening, received, sent = _accepted_buffers(
        tmp_path, **{"socket.receive.buffer.bytes": "40000",
                     "socket.send.buffer.bytes": "30000"})
    assert listening == received == _reported(socket.SO_RCVBUF, 40000)
    assert sent == _reported(socket.SO_SNDBUF, 30000)
    assert received != _reported(socket.SO_RCVBUF, None)  # not the default by chance


def test_minus_one_leaves_the_system_defaults(tmp_path: Path) -> None:
    listening, received, sent = _accepted_buffers(
        tmp_path, **{"socket.receive.buffer.bytes": "-1", "socket.send.buffer.bytes": "-1"})
    # the control: a size that was set would show as twice itself
    assert received != _reported(socket.SO_RCVBUF, 40000)
    assert listening == _reported(socket.SO_RCVBUF, None)
    assert sent >= _reported(socket.SO_SNDBUF, None)  # autotuning may have grown it


@pytest.mark.parametrize("name", ["socket.send.buffer.bytes", "socket.receive.buffer.bytes"])
def test_a_size_below_minus_one_is_refused_by_name(tmp_path: Path, name: str) -> None:
    with pytest.raises(ConfigError, match=name):
        Broker(str(tmp_path / "logs"), **{name: "-2"})
