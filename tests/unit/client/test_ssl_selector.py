"""``SslSelector``: TLS on the selector loop, against an in-process TLS server.

The client side is the real ``SslSelector`` (memory BIOs, non-blocking socket); the server
is a thread with a blocking ``ssl`` socket on the other end of a socketpair, using
certificates from ``millrace.security.certs``.  Nothing leaves the process.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from millrace.client._ssl_selector import SslSelector, describe_ssl_error
from millrace.security.certs import CertificateAuthority, IssuedCertificate, write_pem
from millrace.security.ssl_factory import client_ssl_context

NODE = 1


@dataclass
class Pki:
    ca: CertificateAuthority
    broker: IssuedCertificate
    client: IssuedCertificate
    dir: Path

    def files(self, name: str, issued: IssuedCertificate) -> tuple[str, str]:
        chain, key = self.dir / f"{name}.pem", self.dir / f"{name}.key"
        write_pem(chain, issued.chain_pem)
        write_pem(key, issued.key_pem, private=True)
        return str(chain), str(key)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    ca = CertificateAuthority.generate("unit CA")
    return Pki(ca, ca.issue("broker", hosts=["localhost", "127.0.0.1"]),
               ca.issue("alice", organization="Org"), tmp_path_factory.mktemp("pki"))


def server_context(pki: Pki, *, require_client_cert: bool = False,
                   max_version: ssl.TLSVersion | None = None) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    chain, key = pki.files("broker", pki.broker)
    ctx.load_cert_chain(chain, key)
    if require_client_cert:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(cadata=pki.ca.cert_pem.decode())
    if max_version is not None:
        ctx.maximum_version = max_version
    return ctx


def client_context(pki: Pki, *, with_cert: bool = False, trust: bytes | None = None,
                   max_version: ssl.TLSVersion | None = None) -> ssl.SSLContext:
    cert = key = None
    if with_cert:
        cert, key = pki.files("alice", pki.client)
    ctx = client_ssl_context(ca_location=None, certificate_location=cert, key_location=key,
                             key_password=None,
                             ca_pem=(trust or pki.ca.cert_pem).decode())
    if max_version is not None:
        ctx.maximum_version = max_version
    return ctx


class TlsServer:
    """The broker end: a blocking TLS socket in a thread; ``handler`` runs after the
    handshake, and what fails is kept in ``error``."""

    def __init__(self, sock: socket.socket, ctx: ssl.SSLContext | None,
                 handler: Callable[[socket.socket], None]) -> None:
        self.error: BaseException | None = None
        self.peer_subject: object = None
        self._sock = sock
        self._ctx = ctx
        self._handler = handler
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        conn: socket.socket = self._sock
        try:
            conn.settimeout(10)
            if self._ctx is not None:
                conn = self._ctx.wrap_socket(conn, server_side=True)
                self.peer_subject = conn.getpeercert()
            self._handler(conn)
        except BaseException as e:
            self.error = e
        finally:
            with contextlib.suppress(OSError):
                conn.close()

    def join(self) -> None:
        self._thread.join(10)
        assert not self._thread.is_alive()


def echo(conn: socket.socket) -> None:
    while data := conn.recv(65536):
        conn.sendall(data)


@contextlib.contextmanager
def tls_pair(client_ctx: ssl.SSLContext, server_ctx: ssl.SSLContext | None,
             handler: Callable[[socket.socket], None] = echo, host: str = "localhost"
             ) -> Iterator[tuple[SslSelector, TlsServer]]:
    ours, theirs = socket.socketpair()
    server = TlsServer(theirs, server_ctx, handler)
    selector = SslSelector(client_ctx)
    try:
        selector.register_connected(NODE, ours, host)
        yield selector, server
    finally:
        selector.close_all()
        server.join()


def poll_until(selector: SslSelector, done: Callable[[], bool], seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, "timed out"
        selector.poll(50)


def handshake(selector: SslSelector) -> dict[int, str]:
    """Poll until connected or disconnected; the disconnect reasons (empty if connected)."""
    disconnected: dict[int, str] = {}
    connected: list[int] = []

    def done() -> bool:
        connected.extend(selector.connected)
        disconnected.update(selector.disconnected)
        return bool(connected or disconnected)

    poll_until(selector, done)
    return disconnected


def exchange(selector: SslSelector, payloads: list[bytes]) -> tuple[bytes, list[object]]:
    """Send each payload (token = its index) and read the echo of all of them."""
    for i, data in enumerate(payloads):
        selector.send(NODE, data, i)
    expected = sum(len(p) for p in payloads)
    received = bytearray()
    sends: list[object] = []

    def done() -> bool:
        sends.extend(selector.completed_sends)
        for node, data in selector.completed_receives:
            assert node == NODE
            received.extend(data)
        assert not selector.disconnected, selector.disconnected
        return len(received) >= expected

    poll_until(selector, done)
    return bytes(received), sends


def test_handshake_then_requests_and_responses_round_trip(pki: Pki) -> None:
    with tls_pair(client_context(pki), server_context(pki)) as (selector, server):
        assert not selector.is_connected(NODE)  # not before the handshake is done
        assert handshake(selector) == {}
        assert selector.is_connected(NODE)
        payloads = [b"small", bytes(range(256)) * 4096, b"x" * 3_000_000, b"tail"]
        received, sends = exchange(selector, payloads)
        assert received == b"".join(payloads)
        assert sends == [0, 1, 2, 3]  # each send reported once, in order, when written
    assert server.error is None


def test_many_small_requests_in_one_poll(pki: Pki) -> None:
    with tls_pair(client_context(pki), server_context(pki)) as (selector, _):
        assert handshake(selector) == {}
        payloads = [f"request {i};".encode() for i in range(500)]
        received, sends = exchange(selector, payloads)
        assert received == b"".join(payloads) and sends == list(range(500))


def test_mutual_tls_presents_the_client_certificate(pki: Pki) -> None:
    ctx = client_context(pki, with_cert=True)
    with tls_pair(ctx, server_context(pki, require_client_cert=True)) as (selector, server):
        assert handshake(selector) == {}
        assert exchange(selector, [b"ping"])[0] == b"ping"
    assert server.error is None
    assert server.peer_subject is not None and "alice" in str(server.peer_subject)


def test_a_host_the_certificate_does_not_name_fails_the_handshake(pki: Pki) -> None:
    with tls_pair(client_context(pki), server_context(pki), host="broker.example") \
            as (selector, server):
        reasons = handshake(selector)
        assert selector.handshake_failures == reasons
        assert "certificate verify failed" in reasons[NODE]
        assert "Hostname mismatch" in reasons[NODE] and "broker.example" in reasons[NODE]
        assert not selector.has_channel(NODE)
    assert isinstance(server.error, ssl.SSLError)  # the broker saw our alert


def test_endpoint_identification_none_accepts_any_name(pki: Pki) -> None:
    ctx = client_ssl_context(ca_location=None, certificate_location=None, key_location=None,
                             key_password=None, endpoint_identification="none",
                             ca_pem=pki.ca.cert_pem.decode())
    with tls_pair(ctx, server_context(pki), host="broker.example") as (selector, _):
        assert handshake(selector) == {}
        assert exchange(selector, [b"ping"])[0] == b"ping"


def test_an_untrusted_ca_fails_the_handshake(pki: Pki) -> None:
    other = CertificateAuthority.generate("someone else")
    with tls_pair(client_context(pki, trust=other.cert_pem), server_context(pki)) \
            as (selector, _):
        reasons = handshake(selector)
        assert reasons[NODE].startswith("SSL handshake failed: certificate verify failed")
        assert selector.handshake_failures == reasons


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3])
def test_a_broker_rejecting_a_missing_client_certificate(pki: Pki,
                                                         version: ssl.TLSVersion) -> None:
    # TLS 1.2 fails inside the handshake; TLS 1.3 completes it on the client side and the
    # broker's alert is the first thing read: still a handshake failure, not a disconnect.
    ctx = client_context(pki, max_version=version)
    with tls_pair(ctx, server_context(pki, require_client_cert=True)) as (selector, _):
        reasons = handshake(selector)
        if not reasons:
            selector.send(NODE, b"ApiVersions", "first")
            poll_until(selector, lambda: bool(selector.disconnected))
            reasons = dict(selector.disconnected)
        assert reasons[NODE] == ("SSL handshake failed: sslv3 alert handshake failure"
                                 if version is ssl.TLSVersion.TLSv1_2 else
                                 "SSL handshake failed: tlsv13 alert certificate required")
        assert selector.handshake_failures == reasons


def test_a_plaintext_peer_fails_the_handshake(pki: Pki) -> None:
    def plaintext_broker(conn: socket.socket) -> None:
        conn.recv(1024)  # the ClientHello, read as a Kafka frame size ...
        conn.sendall(b"\x00\x00\x00\x10" + b"\x00" * 16)  # ... answered in plaintext

    with tls_pair(client_context(pki), None, plaintext_broker) as (selector, _):
        reasons = handshake(selector)
        assert reasons[NODE].startswith("SSL handshake failed")


def test_the_peer_closing_during_the_handshake_is_a_plain_disconnect(pki: Pki) -> None:
    def closes(conn: socket.socket) -> None:
        conn.recv(1024)

    with tls_pair(client_context(pki), None, closes) as (selector, _):
        reasons = handshake(selector)
        assert reasons == {NODE: "connection closed by the peer during the TLS handshake"}
        assert selector.handshake_failures == {}


def test_the_peer_closing_after_the_handshake(pki: Pki) -> None:
    def answers_then_closes(conn: socket.socket) -> None:
        conn.recv(1024)
        conn.sendall(b"last words")
        conn.unwrap()  # type: ignore[attr-defined]  # close_notify

    with tls_pair(client_context(pki), server_context(pki), answers_then_closes) \
            as (selector, _):
        assert handshake(selector) == {}
        selector.send(NODE, b"hello", 0)
        received = bytearray()
        reasons: dict[int, str] = {}

        def done() -> bool:
            for _, data in selector.completed_receives:
                received.extend(data)
            reasons.update(selector.disconnected)
            return bool(reasons)

        poll_until(selector, done)
        assert received == b"last words"  # delivered before the disconnect
        assert reasons == {NODE: "connection closed by the peer"}
        assert selector.handshake_failures == {}


def test_close_sends_close_notify(pki: Pki) -> None:
    seen: list[bytes] = []

    def reads_to_the_end(conn: socket.socket) -> None:
        seen.append(conn.recv(1024))
        seen.append(conn.recv(1024))  # b"" only after a clean TLS close

    with tls_pair(client_context(pki), server_context(pki), reads_to_the_end) \
            as (selector, server):
        assert handshake(selector) == {}
        selector.send(NODE, b"bye", 0)
        poll_until(selector, lambda: bool(selector.completed_sends))
        selector.close(NODE)
        server.join()
        assert server.error is None and seen == [b"bye", b""]


def test_describe_ssl_error_drops_openssl_noise() -> None:
    error = ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number (_ssl.c:1006)")
    assert describe_ssl_error(error) == "wrong version number"
