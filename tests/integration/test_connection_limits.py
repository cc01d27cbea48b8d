"""Connection limits against a real broker process: a socket over ``max.connections.per.ip``
(or its override, or a listener's ``max.connections``) is closed at accept while the
connections already open keep being served; closing one frees its slot; the refusal is
logged once, and a flood of refusals does not flood the log."""

from __future__ import annotations

import contextlib
import socket
import ssl
import struct
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from millrace.protocol import NEED_DATA, ApiVersionsRequest, ClientConnection, Response
from millrace.security.certs import CertificateAuthority, write_pem
from millrace.testing.broker_process import BrokerProcess
from millrace.testing.raw_connection import RawConnection

pytestmark = [pytest.mark.integration]

IO_TIMEOUT = 5.0


def _served(conn: RawConnection) -> bool:
    return bool(conn.call(ApiVersionsRequest(), 0).error_code == 0)


def _closed_at_once(port: int) -> bool:
    """Connect and send an ApiVersions request: True if the broker closes the socket
    without answering."""
    with socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT) as sock:
        try:
            # ApiVersions v0, correlation id 1, client id "x"
            sock.sendall(b"\x00\x00\x00\x0b\x00\x12\x00\x00\x00\x00\x00\x01\x00\x01x")
            return sock.recv(1024) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True


def _refusal_lines(broker: BrokerProcess, limit: str) -> list[str]:
    return [line for line in broker.logs().splitlines()
            if "closing connection from 127.0.0.1" in line and limit in line]


def _open(stack: ExitStack, port: int, n: int) -> list[RawConnection]:
    conns = [stack.enter_context(RawConnection(port, timeout_s=IO_TIMEOUT)) for _ in range(n)]
    assert all(_served(c) for c in conns)  # each is counted by the broker by now
    return conns


def _eventually_served(port: int) -> RawConnection:
    """A slot freed by a close is free once the broker has seen the close."""
    deadline = time.monotonic() + IO_TIMEOUT
    while True:
        try:
            conn = RawConnection(port, timeout_s=IO_TIMEOUT)
        except OSError:
            conn = None
        if conn is not None:
            try:
                if _served(conn):
                    return conn
            except (AssertionError, OSError):
                pass
            conn.close()
        if time.monotonic() > deadline:
            raise AssertionError("the freed slot was not given back")
        time.sleep(0.05)


StartBroker = Callable[[dict[str, str]], BrokerProcess]


@pytest.fixture
def broker_with(tmp_path: Path) -> Iterator[StartBroker]:
    started: list[BrokerProcess] = []

    def start(overrides: dict[str, str]) -> BrokerProcess:
        b = BrokerProcess(tmp_path / f"b{len(started)}", overrides=overrides).start()
        started.append(b)
        return b

    yield start
    for b in started:
        b.stop()


def test_fourth_connection_from_one_ip_is_closed_at_once(broker_with: StartBroker) -> None:
    broker = broker_with({"max.connections.per.ip": "3"})
    with ExitStack() as stack:
        conns = _open(stack, broker.port, 3)
        assert _closed_at_once(broker.port)
        assert all(_served(c) for c in conns)  # the first three are still answered
        time.sleep(0.2)
        assert len(_refusal_lines(broker, "max.connections.per.ip=3 reached")) == 1

        conns[0].close()  # closing one frees a slot
        stack.enter_context(_eventually_served(broker.port))
        assert _closed_at_once(broker.port)  # and only one

        # a flood of refused sockets: the log gets about one line per second, not one each
        start = time.monotonic()
        refused = sum(_closed_at_once(broker.port) for _ in range(40))
        elapsed = time.monotonic() - start
        assert refused == 40
        assert all(_served(c) for c in conns[1:])
        time.sleep(0.2)
        lines = _refusal_lines(broker, "max.connections.per.ip=3 reached")
        assert 1 <= len(lines) <= 2 + int(elapsed), lines
        # the next line, a second on, tells how many refusals were not logged
        time.sleep(1.1)
        assert _closed_at_once(broker.port)
        time.sleep(0.2)
        last = _refusal_lines(broker, "max.connections.per.ip=3 reached")[-1]
        assert "more refused since the last such line" in last, last
        assert broker.proc is not None and broker.proc.poll() is None


def test_override_for_127_0_0_1_raises_its_limit(broker_with: StartBroker) -> None:
    broker = broker_with({"max.connections.per.ip": "1",
                          "max.connections.per.ip.overrides": "127.0.0.1:4"})
    with ExitStack() as stack:
        conns = _open(stack, broker.port, 4)
        assert _closed_at_once(broker.port)
        assert all(_served(c) for c in conns)
        time.sleep(0.2)
        assert len(_refusal_lines(broker, "max.connections.per.ip.overrides=4 reached")) == 1


def test_listener_max_connections(broker_with: StartBroker) -> None:
    broker = broker_with({"listener.name.plaintext.max.connections": "2"})
    with ExitStack() as stack:
        conns = _open(stack, broker.port, 2)
        assert _closed_at_once(broker.port)
        assert all(_served(c) for c in conns)
        conns[1].close()
        stack.enter_context(_eventually_served(broker.port))
        assert _closed_at_once(broker.port)
        time.sleep(0.2)
        lines = _refusal_lines(broker, "listener.name.plaintext.max.connections=2 reached")
        assert len(lines) >= 1 and "on listener PLAINTEXT" in lines[0], lines


def test_bad_override_stops_the_broker_naming_the_key(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path, overrides={"max.connections.per.ip.overrides": "127.0.0.1"},
                      start_timeout=20)
    with pytest.raises(RuntimeError, match=r"max\.connections\.per\.ip\.overrides"):
        b.start()  # the process exits at start-up; the launcher's error carries its log


def _tls_api_versions(port: int, ctx: ssl.SSLContext) -> bool:
    """An ApiVersions answer over TLS (False if the broker closed the socket)."""
    conn = ClientConnection(client_id="tls")
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT) as raw, \
                ctx.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
            sock.sendall(conn.send_request(ApiVersionsRequest(), 0)[1])
            while (event := conn.next_event()) is NEED_DATA:
                chunk = sock.recv(65536)
                if not chunk:
                    return False
                conn.receive_data(chunk)
            return isinstance(event, Response) and event.body.error_code == 0
    except (OSError, ssl.SSLError):
        return False


def test_connections_closed_during_tls_handshakes_give_their_slot_back(
        tmp_path: Path) -> None:
    ca = CertificateAuthority.generate()
    write_pem(tmp_path / "ca.pem", ca.cert_pem)
    write_pem(tmp_path / "broker.pem",
              ca.issue("broker", hosts=["localhost", "127.0.0.1"]).key_and_chain_pem,
              private=True)
    ctx = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))
    overrides = {"max.connections.per.ip": "2", "security.inter.broker.protocol": "SSL",
                 "ssl.keystore.location": str(tmp_path / "broker.pem"),
                 "ssl.truststore.location": str(tmp_path / "ca.pem")}
    with BrokerProcess(tmp_path / "data", overrides=overrides,
                       listener_protocol="SSL") as broker:
        for i in range(60):  # churn: closed before, during and after a failed handshake
            with socket.create_connection(("127.0.0.1", broker.port),
                                          timeout=IO_TIMEOUT) as sock, \
                    contextlib.suppress(OSError):  # refused while earlier closes queue
                if i % 3 == 1:
                    sock.sendall(b"\x16\x03\x01" + struct.pack(">H", 5) + b"junk!")
                elif i % 3 == 2:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                    struct.pack("ii", 1, 0))  # RST, not FIN
        deadline = time.monotonic() + IO_TIMEOUT
        with ExitStack() as stack:
            held: list[ssl.SSLSocket] = []
            while len(held) < 2:  # the churn's slots come back once the broker saw it
                raw = socket.create_connection(("127.0.0.1", broker.port), timeout=IO_TIMEOUT)
                try:
                    held.append(stack.enter_context(
                        ctx.wrap_socket(raw, server_hostname="127.0.0.1")))
                except (OSError, ssl.SSLError):
                    raw.close()
                    assert time.monotonic() < deadline, "slots of closed sockets were lost"
                    time.sleep(0.05)
            assert not _tls_api_versions(broker.port, ctx)  # two held: the third is refused
        deadline = time.monotonic() + IO_TIMEOUT
        while not _tls_api_versions(broker.port, ctx):
            assert time.monotonic() < deadline, "closed TLS connections kept their slots"
            time.sleep(0.05)
