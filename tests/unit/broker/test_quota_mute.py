"""The KIP-219 mute on a ``BrokerConnection`` without sockets (a fake transport, the
broker's services on MockTime, the mute's sleep held by the test): the throttled client
gets its answer at once with ``throttle_time_ms``, then its connection stops reading and
serves nothing more until the throttle is over, while another client on the same broker
is served meanwhile; the mute and the back-pressure pause never undo each other."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from millrace.broker.network import BrokerConnection, SocketServer
from millrace.broker.quota.entity import PRODUCER_BYTE_RATE, QuotaEntity
from millrace.protocol import NEED_DATA, ApiKey, ApiVersionsRequest, ClientConnection, Response
from tests.unit.broker.brokergen import Broker, batch, produce_req, settle

TOPIC = "t"


class FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.reading = True
        self.closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def write(self, data: Any) -> None:
        self.written += data

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def is_reading(self) -> bool:
        return self.reading

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True


class Mute:
    """The server's sleep for a throttle, released by the test."""

    def __init__(self) -> None:
        self.requested: list[float] = []
        self.release = asyncio.Event()

    async def __call__(self, seconds: float) -> None:
        self.requested.append(seconds)
        await self.release.wait()


class Client:
    def __init__(self, server: SocketServer, client_id: str) -> None:
        self.conn = ClientConnection(client_id)
        self.transport = FakeTransport()
        self.broker_side = BrokerConnection(server, "PLAINTEXT")
        self.broker_side.connection_made(self.transport)
        self._seen = 0

    def send(self, body: Any, version: int) -> None:
        _, data = self.conn.send_request(body, version)
        self.broker_side.data_received(data)

    def responses(self) -> list[Response]:
        self.conn.receive_data(bytes(self.transport.written[self._seen:]))
        self._seen = len(self.transport.written)
        out = []
        while (event := self.conn.next_event()) is not NEED_DATA:
            assert isinstance(event, Response)
            out.append(event)
        return out

    def close(self) -> None:
        self.broker_side.connection_lost(None)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    # 2 samples of 1 s: the shortest window, so small numbers give round throttle times
    b = Broker(str(tmp_path / "logs"), **{"quota.window.num": "2"})
    b.create_topic(TOPIC)
    try:
        yield b
    finally:
        b.close()


def _server(broker: Broker) -> tuple[SocketServer, Mute]:
    server = SocketServer(broker.config, broker.time)
    server._services = broker.services
    server.client_quotas = broker.services.client_quotas
    mute = Mute()
    server.sleep = mute
    return server, mute


def _produce(size: int) -> Any:
    return produce_req({(TOPIC, 0): batch(bytes(size))})


def test_throttled_client_is_answered_then_muted_other_clients_are_not(
        broker: Broker) -> None:
    async def run() -> None:
        server, mute = _server(broker)
        broker.services.quota_store.alter(QuotaEntity(None, "slow"),
                                          {PRODUCER_BYTE_RATE: 1000.0})
        slow, fast = Client(server, "slow"), Client(server, "fast")
        slow.send(_produce(2900), 9)  # ~3 kB over the 1 s minimum window: 3x the quota
        await settle()
        (first,) = slow.responses()
        assert first.body.throttle_time_ms > 1000 and mute.requested
        assert not slow.transport.reading
        slow.send(ApiVersionsRequest(), 0)  # pipelined: waits for the throttle
        fast.send(_produce(2900), 9)         # no quota on this client id
        await settle()
        assert slow.responses() == []
        (answer,) = fast.responses()
        assert answer.body.throttle_time_ms == 0 and fast.transport.reading
        mute.release.set()
        await settle()
        (later,) = slow.responses()
        assert later.api.key == ApiKey.API_VERSIONS and slow.transport.reading
        slow.close()
        fast.close()

    asyncio.run(run())


def test_no_quota_no_mute_negative_control(broker: Broker) -> None:
    async def run() -> None:
        server, mute = _server(broker)
        client = Client(server, "slow")
        for _ in range(3):
            client.send(_produce(2900), 9)
        await settle()
        assert [r.body.throttle_time_ms for r in client.responses()] == [0, 0, 0]
        assert mute.requested == [] and client.transport.reading
        client.close()

    asyncio.run(run())


def test_mute_and_back_pressure_never_resume_each_other(broker: Broker) -> None:
    async def run() -> None:
        server, mute = _server(broker)
        broker.services.quota_store.alter(QuotaEntity(None, "slow"),
                                          {PRODUCER_BYTE_RATE: 1000.0})
        client = Client(server, "slow")
        conn = client.broker_side
        client.send(_produce(2900), 9)
        await settle()
        assert conn.throttled and not client.transport.reading
        # while muted, back-pressure also holds reading (a flood already buffered)
        conn.paused = True
        mute.release.set()
        await settle(1)
        assert not conn.throttled
        assert not client.transport.reading  # the throttle's end leaves back-pressure be
        conn.paused = False
        client.close()

    asyncio.run(run())
