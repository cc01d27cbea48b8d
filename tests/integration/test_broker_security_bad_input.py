"""Hostile input against the security layer of a real broker process.

One broker serves the module with four listeners (PLAINTEXT, SASL_PLAINTEXT, SSL,
SASL_SSL; PLAIN users in JAAS, a SCRAM-SHA-256 user created through the admin API).  Each
case sends something an attacker or a broken client would -- a request before
authentication, an oversized pre-authentication frame, a SCRAM client-final with a
foreign nonce or a replayed proof, a PLAIN authorization id for someone else, garbage
instead of a TLS ClientHello, a handshake that stops half-way -- and checks what
happened to *that* connection.  After every case an autouse fixture checks that the
broker is alive, still authenticates a good SASL client and serves it, and logged no
traceback."""

from __future__ import annotations

import contextlib
import socket
import ssl
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from millrace.client.admin import KafkaAdminClient
from millrace.client.admin.types import (
    ScramCredentialInfo,
    UserScramCredentialUpsertion,
)
from millrace.client.admin.types import ScramMechanism as AdminScramMechanism
from millrace.common.errors import Errors
from millrace.launcher.broker_process import BrokerProcess, free_port
from millrace.protocol import NEED_DATA, ClientConnection, Response
from millrace.protocol.types import (
    ApiVersionsRequest,
    DescribeConfigsRequest,
    MetadataRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from millrace.security.certs import CertificateAuthority, write_pem
from millrace.security.sasl.scram import ScramMechanism, ScramSaslClient

pytestmark = [pytest.mark.integration]

IO_TIMEOUT = 15.0
FAILED_AUTH_DELAY_MS = 100
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_alice="alice-secret" user_admin="admin-secret";')


class Listeners:
    def __init__(self) -> None:
        self.plaintext, self.sasl_plaintext, self.ssl, self.sasl_ssl = (
            free_port() for _ in range(4))


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d: Path = tmp_path_factory.mktemp("pki")
    ca = CertificateAuthority.generate()
    leaf = ca.issue("broker", hosts=["localhost", "127.0.0.1"])
    write_pem(d / "ca.pem", ca.cert_pem)
    write_pem(d / "broker.pem", leaf.key_and_chain_pem, private=True)
    return d


@pytest.fixture(scope="module")
def ports() -> Listeners:
    return Listeners()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, pki: Path,
           ports: Listeners) -> Iterator[BrokerProcess]:
    data: Path = tmp_path_factory.mktemp("secure-bad-input")
    overrides = {
        "listeners": (f"PLAINTEXT://127.0.0.1:{ports.plaintext},"
                      f"SASL_PLAINTEXT://127.0.0.1:{ports.sasl_plaintext},"
                      f"SSL://127.0.0.1:{ports.ssl},SASL_SSL://127.0.0.1:{ports.sasl_ssl}"),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "sasl.jaas.config": JAAS,
        "ssl.keystore.location": str(pki / "broker.pem"),
        "ssl.truststore.location": str(pki / "ca.pem"),
        "connection.failed.authentication.delay.ms": str(FAILED_AUTH_DELAY_MS),
    }
    with BrokerProcess(data, port=ports.plaintext, overrides=overrides) as b:
        with KafkaAdminClient(bootstrap_servers=b.bootstrap) as admin:
            admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
                "bob", ScramCredentialInfo(AdminScramMechanism.SCRAM_SHA_256, 4096),
                "bob-secret")]).all()
        yield b
    assert b.proc is not None and b.proc.returncode == 0, b.logs()[-5000:]


# ---------------------------------------------------------------------------- helpers
class Channel:
    """One socket, requests one at a time, framed by millrace's sans-I/O codec."""

    def __init__(self, port: int, *, tls: ssl.SSLContext | None = None) -> None:
        raw = socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT)
        self.sock: socket.socket = (tls.wrap_socket(raw, server_hostname="localhost")
                                    if tls is not None else raw)
        self.conn = ClientConnection(client_id="security-bad-input")

    def send(self, body: Any, version: int) -> None:
        _, data = self.conn.send_request(body, version)
        self.sock.sendall(data)

    def call(self, body: Any, version: int) -> Any:
        self.send(body, version)
        return self.receive()

    def receive(self) -> Any:
        while True:
            event = self.conn.next_event()
            if event is not NEED_DATA:
                assert isinstance(event, Response)
                return event.body
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("closed by the broker")
            self.conn.receive_data(chunk)

    def closed_without_answer(self) -> bool:
        """True when the broker closed the connection and sent nothing more."""
        try:
            return self.sock.recv(1 << 16) == b""
        except (ConnectionResetError, ssl.SSLError):
            return True

    def close(self) -> None:
        self.sock.close()


def _tls_context(pki: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(pki / "ca.pem"))


def _plain_login(channel: Channel, user: str, password: str, authzid: str = "") -> Any:
    hs = channel.call(SaslHandshakeRequest(mechanism="PLAIN"), 1)
    assert hs.error_code == 0
    token = f"{authzid}\0{user}\0{password}".encode()
    return channel.call(SaslAuthenticateRequest(auth_bytes=token), 1)


def _scram_first(channel: Channel, client: ScramSaslClient) -> bytes:
    assert channel.call(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), 1).error_code == 0
    first = client.evaluate_challenge(b"")
    assert first is not None
    resp = channel.call(SaslAuthenticateRequest(auth_bytes=first), 1)
    assert resp.error_code == 0, resp.error_message
    return bytes(resp.auth_bytes)


@pytest.fixture(autouse=True)
def good_clients_unaffected(broker: BrokerProcess, ports: Listeners) -> Iterator[None]:
    start = len(broker.logs())
    yield
    assert broker.proc is not None and broker.proc.poll() is None, broker.logs()[-5000:]
    channel = Channel(ports.sasl_plaintext)
    try:
        assert _plain_login(channel, "alice", "alice-secret").error_code == 0
        meta = channel.call(MetadataRequest(topics=None), 9)
        assert [b.port for b in meta.brokers] == [ports.sasl_plaintext]
    finally:
        channel.close()
    assert "Traceback" not in broker.logs()[start:], broker.logs()[start:][-5000:]


# ---------------------------------------------------------------------------- SASL
def test_a_request_before_authentication_closes_the_connection_unanswered(
        ports: Listeners) -> None:
    channel = Channel(ports.sasl_plaintext)
    try:
        channel.send(MetadataRequest(topics=None), 9)
        assert channel.closed_without_answer()
    finally:
        channel.close()


def test_a_request_after_the_handshake_instead_of_authenticate_closes(
        ports: Listeners) -> None:
    channel = Channel(ports.sasl_plaintext)
    try:
        assert channel.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
        channel.send(MetadataRequest(topics=None), 9)
        assert channel.closed_without_answer()
    finally:
        channel.close()


@pytest.mark.parametrize("size", [512 * 1024 + 1, 2**31 - 1], ids=["max-plus-one", "int32-max"])
def test_an_oversized_frame_before_authentication_is_refused(
        broker: BrokerProcess, ports: Listeners, size: int) -> None:
    assert broker.proc is not None
    status = Path(f"/proc/{broker.proc.pid}/status")

    def peak() -> int:
        line = next(x for x in status.read_text().splitlines() if x.startswith("VmHWM:"))
        return int(line.split()[1]) * 1024
    before = peak()
    with socket.create_connection(("127.0.0.1", ports.sasl_plaintext),
                                  timeout=IO_TIMEOUT) as sock:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(struct.pack(">i", size) + b"\0" * 8192)
        with contextlib.suppress(ConnectionResetError):
            assert sock.recv(1024) == b""
    assert peak() - before < 16 * 1024 * 1024  # the claimed size was never allocated
    assert "sasl.server.max.receive.size" in broker.logs()


def test_wrong_password_is_answered_after_the_failure_delay_then_closed(
        ports: Listeners) -> None:
    channel = Channel(ports.sasl_plaintext)
    try:
        started = time.monotonic()
        resp = _plain_login(channel, "alice", "guess")
        waited = time.monotonic() - started
        assert resp.error_code == Errors.SASL_AUTHENTICATION_FAILED
        assert resp.error_message == "Authentication failed: Invalid username or password"
        assert waited >= FAILED_AUTH_DELAY_MS / 1000 * 0.9  # the broker held the answer back
        assert channel.closed_without_answer()
    finally:
        channel.close()


def test_plain_authorization_id_of_someone_else_is_refused(ports: Listeners) -> None:
    channel = Channel(ports.sasl_plaintext)
    try:
        resp = _plain_login(channel, "alice", "alice-secret", authzid="admin")
        assert resp.error_code == Errors.SASL_AUTHENTICATION_FAILED
        assert "authorization id that is different" in (resp.error_message or "")
    finally:
        channel.close()


def test_scram_client_final_with_a_foreign_nonce_is_refused(ports: Listeners) -> None:
    channel = Channel(ports.sasl_plaintext)
    try:
        client = ScramSaslClient(ScramMechanism.SCRAM_SHA_256, "bob", "bob-secret")
        server_first = _scram_first(channel, client)
        final = client.evaluate_challenge(server_first)
        assert final is not None
        fields = dict(part.split("=", 1) for part in final.decode().split(","))
        forged = final.decode().replace(f"r={fields['r']}", "r=" + "x" * len(fields["r"]))
        resp = channel.call(SaslAuthenticateRequest(auth_bytes=forged.encode()), 1)
        assert resp.error_code == Errors.SASL_AUTHENTICATION_FAILED
        assert "bob" not in (resp.error_message or "")  # the generic message
    finally:
        channel.close()


def test_a_replayed_scram_proof_is_refused(ports: Listeners) -> None:
    first_channel = Channel(ports.sasl_plaintext)
    nonce = "fixed-client-nonce-for-replay-test"
    try:
        client = ScramSaslClient(ScramMechanism.SCRAM_SHA_256, "bob", "bob-secret",
                                 nonce=nonce)
        final = client.evaluate_challenge(_scram_first(first_channel, client))
        assert final is not None
        ok = first_channel.call(SaslAuthenticateRequest(auth_bytes=final), 1)
        assert ok.error_code == 0
    finally:
        first_channel.close()
    # An eavesdropper replays the same client-first and client-final on a new connection:
    # the server's nonce differs, so the old proof does not verify.
    replay = Channel(ports.sasl_plaintext)
    try:
        again = ScramSaslClient(ScramMechanism.SCRAM_SHA_256, "bob", "bob-secret",
                                nonce=nonce)
        _scram_first(replay, again)
        resp = replay.call(SaslAuthenticateRequest(auth_bytes=final), 1)
        assert resp.error_code == Errors.SASL_AUTHENTICATION_FAILED
    finally:
        replay.close()


def test_sasl_requests_where_none_is_expected_are_illegal_sasl_state(
        ports: Listeners) -> None:
    plain = Channel(ports.plaintext)
    try:
        assert plain.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == \
            Errors.ILLEGAL_SASL_STATE
        assert plain.call(ApiVersionsRequest(), 0).error_code == 0  # still open
    finally:
        plain.close()
    done = Channel(ports.sasl_plaintext)
    try:
        assert _plain_login(done, "alice", "alice-secret").error_code == 0
        again = done.call(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"), 1)
        assert again.error_code == Errors.ILLEGAL_SASL_STATE
    finally:
        done.close()


def test_unsupported_mechanism_lists_the_enabled_ones(ports: Listeners) -> None:
    channel = Channel(ports.sasl_plaintext)
    try:
        resp = channel.call(SaslHandshakeRequest(mechanism="GSSAPI"), 1)
        assert resp.error_code == Errors.UNSUPPORTED_SASL_MECHANISM
        assert sorted(resp.mechanisms) == ["PLAIN", "SCRAM-SHA-256"]
        assert channel.closed_without_answer()
    finally:
        channel.close()


# ---------------------------------------------------------------------------- TLS
def test_garbage_instead_of_a_client_hello_is_closed_and_logged(
        broker: BrokerProcess, ports: Listeners) -> None:
    start = len(broker.logs())
    with socket.create_connection(("127.0.0.1", ports.ssl), timeout=IO_TIMEOUT) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" * 4)
        try:
            while sock.recv(1 << 16):
                pass
        except ConnectionResetError:
            pass
    deadline = time.monotonic() + 5
    while "TLS handshake with" not in broker.logs()[start:] and time.monotonic() < deadline:
        time.sleep(0.05)
    logged = [line for line in broker.logs()[start:].splitlines()
              if "TLS handshake with" in line]
    assert len(logged) == 1, logged  # once, with the peer and the reason
    assert "127.0.0.1" in logged[0] and "listener SSL" in logged[0]


@pytest.mark.slow
def test_a_client_that_stops_mid_handshake_is_dropped_after_the_timeout(
        broker: BrokerProcess, ports: Listeners, pki: Path) -> None:
    with socket.create_connection(("127.0.0.1", ports.sasl_ssl), timeout=30) as stalled:
        stalled.sendall(b"\x16\x03\x01\x02\x00\x01")  # the start of a ClientHello
        # meanwhile another TLS client is served at once
        other = Channel(ports.ssl, tls=_tls_context(pki))
        try:
            assert other.call(ApiVersionsRequest(), 0).error_code == 0
        finally:
            other.close()
        started = time.monotonic()
        with contextlib.suppress(ConnectionResetError):
            assert stalled.recv(1024) == b""
        assert time.monotonic() - started < 25  # bounded (10 s handshake timeout)
    deadline = time.monotonic() + 5  # the broker logs it just after closing
    while "no handshake within the timeout" not in broker.logs() and \
            time.monotonic() < deadline:
        time.sleep(0.05)
    assert "no handshake within the timeout" in broker.logs()


def test_metadata_answers_with_the_listener_the_request_came_in_on(
        ports: Listeners, pki: Path) -> None:
    tls = Channel(ports.ssl, tls=_tls_context(pki))
    try:
        meta = tls.call(MetadataRequest(topics=None), 9)
        assert [(b.host, b.port) for b in meta.brokers] == [("127.0.0.1", ports.ssl)]
    finally:
        tls.close()
    plain = Channel(ports.plaintext)
    try:
        meta = plain.call(MetadataRequest(topics=None), 9)
        assert [b.port for b in meta.brokers] == [ports.plaintext]
    finally:
        plain.close()


def test_describe_configs_never_shows_secrets(ports: Listeners) -> None:
    """sasl.jaas.config holds the PLAIN users' passwords: sensitive, value null (Kafka)."""
    channel = Channel(ports.plaintext)
    try:
        resp = channel.call(DescribeConfigsRequest(resources=[
            DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=4, resource_name="0", configuration_keys=None)]), 1)
    finally:
        channel.close()
    (result,) = resp.results
    entries = {c.name: c for c in result.configs}
    jaas = entries["sasl.jaas.config"]
    assert jaas.is_sensitive and jaas.value is None
    assert entries["ssl.keystore.password"].is_sensitive
    assert not entries["sasl.enabled.mechanisms"].is_sensitive
    assert all("alice-secret" not in (c.value or "") for c in result.configs)
