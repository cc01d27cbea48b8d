"""The broker's SASL state machine, driven frame by frame with a sans-I/O client
connection (no sockets): Kafka's sequence, the v0 raw-token and v1 SaslAuthenticate
framings, what is refused before authentication, and re-authentication (KIP-368)."""

from __future__ import annotations

from typing import Any

import pytest

from millrace.broker.security.listener_security import ListenerSecurity
from millrace.broker.security.sasl_server_authenticator import (
    Action,
    AuthState,
    AuthStep,
    SaslServerAuthenticator,
)
from millrace.common.errors import Errors
from millrace.protocol import ApiVersionsFallback, ClientConnection, Request, Response
from millrace.protocol.connection import ServerConnection
from millrace.protocol.framing import frame
from millrace.protocol.types import (
    ApiVersionsRequest,
    MetadataRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from millrace.security.kafka_principal import KafkaPrincipal
from millrace.security.sasl import create_sasl_client
from millrace.security.sasl.scram import ScramFormatter, ScramMechanism

SCRAM = ScramFormatter(ScramMechanism.SCRAM_SHA_256).generate_credential("bob-secret", 4096)


def security(reauth_ms: int = 0) -> ListenerSecurity:
    mechs = ("PLAIN", "SCRAM-SHA-256")
    return ListenerSecurity(
        listener="SASL_PLAINTEXT", protocol="SASL_PLAINTEXT", mechanisms=mechs,
        plain_users={"alice": "alice-secret"}, reauth_ms=dict.fromkeys(mechs, reauth_ms),
        scram_lookup=lambda mech, user: SCRAM if (mech, user) == ("SCRAM-SHA-256", "bob")
        else None)


class Pair:
    """A client connection and the authenticator of its broker side."""

    def __init__(self, sec: ListenerSecurity | None = None) -> None:
        self.client = ClientConnection("test-client")
        self.server = ServerConnection()
        self.auth = SaslServerAuthenticator(sec or security(), self.server.decode_request)
        self.now = 1_000

    def send(self, body: Any, version: int) -> AuthStep:
        _, data = self.client.send_request(body, version)
        return self.auth.receive(data[4:], self.now)

    def send_unanswered(self, body: Any, version: int) -> AuthStep:
        """A request the test does not read an answer to (the broker serves it)."""
        _, data = ClientConnection("test-client").send_request(body, version)
        return self.auth.receive(data[4:], self.now)

    def response(self, step: AuthStep) -> Any:
        assert step.data is not None
        self.client.receive_data(step.data)
        event = self.client.next_event()
        assert isinstance(event, Response)
        return event.body

    def handshake(self, mechanism: str, version: int = 1) -> Any:
        step = self.send(SaslHandshakeRequest(mechanism=mechanism), version)
        assert step.action is Action.REPLY
        return self.response(step)

    def authenticate(self, token: bytes, version: int = 2) -> tuple[AuthStep, Any]:
        step = self.send(SaslAuthenticateRequest(auth_bytes=token), version)
        return step, self.response(step)


def test_api_versions_then_plain_over_sasl_authenticate() -> None:
    pair = Pair()
    step = pair.send_unanswered(ApiVersionsRequest(client_software_name="t",
                                                   client_software_version="1"), 3)
    assert step.action is Action.SERVE and isinstance(step.request, Request)
    assert pair.auth.state is AuthState.HANDSHAKE
    hs = pair.handshake("PLAIN")
    assert hs.error_code == Errors.NONE and hs.mechanisms == ["PLAIN", "SCRAM-SHA-256"]
    step, resp = pair.authenticate(b"\0alice\0alice-secret")
    assert resp.error_code == Errors.NONE and resp.auth_bytes == b""
    assert pair.auth.complete
    assert pair.auth.principal == KafkaPrincipal("User", "alice")


def test_scram_over_sasl_authenticate() -> None:
    pair = Pair()
    pair.handshake("SCRAM-SHA-256")
    client = create_sasl_client("SCRAM-SHA-256", "bob", "bob-secret")
    token = client.evaluate_challenge(b"")
    assert token is not None
    _, first = pair.authenticate(token)
    assert first.error_code == Errors.NONE and not pair.auth.complete
    final = client.evaluate_challenge(first.auth_bytes)
    assert final is not None
    _, last = pair.authenticate(final)
    assert last.error_code == Errors.NONE
    assert client.evaluate_challenge(last.auth_bytes) is None and client.is_complete()
    assert pair.auth.principal == KafkaPrincipal("User", "bob")


def test_handshake_v0_uses_raw_tokens() -> None:
    pair = Pair()
    pair.handshake("PLAIN", version=0)
    assert pair.auth.state is AuthState.AUTHENTICATE_RAW
    step = pair.auth.receive(b"\0alice\0alice-secret", pair.now)
    assert step.action is Action.REPLY and step.data == frame(b"")
    assert pair.auth.principal == KafkaPrincipal("User", "alice")


def test_wrong_password_answers_sasl_authentication_failed_then_closes() -> None:
    pair = Pair()
    pair.handshake("PLAIN")
    step, resp = pair.authenticate(b"\0alice\0guess")
    assert step.action is Action.FAIL
    assert resp.error_code == Errors.SASL_AUTHENTICATION_FAILED
    assert resp.error_message == "Authentication failed: Invalid username or password"
    assert not pair.auth.complete


def test_unknown_scram_user_gets_the_generic_message() -> None:
    pair = Pair()
    pair.handshake("SCRAM-SHA-256")
    client = create_sasl_client("SCRAM-SHA-256", "mallory", "x")
    token = client.evaluate_challenge(b"")
    assert token is not None
    step, resp = pair.authenticate(token)
    assert step.action is Action.FAIL
    assert resp.error_code == Errors.SASL_AUTHENTICATION_FAILED
    assert "mallory" not in (resp.error_message or "")
    assert "SCRAM-SHA-256" in (resp.error_message or "")


def test_plain_authzid_other_than_the_user_is_refused() -> None:
    pair = Pair()
    pair.handshake("PLAIN")
    step, resp = pair.authenticate(b"admin\0alice\0alice-secret")
    assert step.action is Action.FAIL
    assert resp.error_code == Errors.SASL_AUTHENTICATION_FAILED
    assert "authorization id" in (resp.error_message or "")


def test_raw_v0_failure_closes_without_an_answer() -> None:
    pair = Pair()
    pair.handshake("PLAIN", version=0)
    step = pair.auth.receive(b"\0alice\0guess", pair.now)
    assert step.action is Action.FAIL and step.data is None


def test_unsupported_mechanism_lists_the_enabled_ones_then_fails() -> None:
    pair = Pair()
    step = pair.send(SaslHandshakeRequest(mechanism="GSSAPI"), 1)
    assert step.action is Action.FAIL
    resp = pair.response(step)
    assert resp.error_code == Errors.UNSUPPORTED_SASL_MECHANISM
    assert resp.mechanisms == ["PLAIN", "SCRAM-SHA-256"]


@pytest.mark.parametrize("state_after_versions", [False, True])
def test_other_requests_before_authentication_close_without_an_answer(
        state_after_versions: bool) -> None:
    pair = Pair()
    if state_after_versions:
        pair.send_unanswered(ApiVersionsRequest(client_software_name="t",
                                                client_software_version="1"), 3)
    step = pair.send_unanswered(MetadataRequest(topics=None), 9)
    assert step.action is Action.FAIL and step.data is None


def test_second_api_versions_before_the_handshake_fails() -> None:
    pair = Pair()
    versions = ApiVersionsRequest(client_software_name="t", client_software_version="1")
    pair.send_unanswered(versions, 3)
    step = pair.send_unanswered(versions, 3)
    assert step.action is Action.FAIL


def test_api_versions_at_an_unknown_version_keeps_the_state() -> None:
    pair = Pair()
    _, data = pair.client.send_request(
        ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
    raw = bytearray(data[4:])
    raw[2:4] = (99).to_bytes(2, "big")  # api_version 99
    step = pair.auth.receive(bytes(raw), pair.now)
    assert step.action is Action.SERVE and isinstance(step.request, ApiVersionsFallback)
    assert pair.auth.state is AuthState.INITIAL


def test_garbage_instead_of_a_request_fails() -> None:
    pair = Pair()
    step = pair.auth.receive(b"\x01\x02", pair.now)
    assert step.action is Action.FAIL and step.data is None


def test_other_api_during_authenticate_fails() -> None:
    pair = Pair()
    pair.handshake("PLAIN")
    step = pair.send_unanswered(MetadataRequest(topics=None), 9)
    assert step.action is Action.FAIL


def _authenticated(reauth_ms: int) -> Pair:
    pair = Pair(security(reauth_ms))
    pair.handshake("PLAIN")
    _, resp = pair.authenticate(b"\0alice\0alice-secret")
    assert resp.session_lifetime_ms == reauth_ms
    return pair


def _request(pair: Pair, body: Any, version: int) -> Request:
    _, data = pair.client.send_request(body, version)
    event = pair.server.decode_request(data[4:])
    assert isinstance(event, Request)
    return event


def test_session_expiry_and_reauthentication() -> None:
    pair = _authenticated(reauth_ms=5_000)
    assert not pair.auth.session_expired(pair.now + 4_999)
    assert pair.auth.session_expired(pair.now + 5_000)
    pair.now += 4_000
    step = pair.auth.maybe_reauthenticate(
        _request(pair, SaslHandshakeRequest(mechanism="PLAIN"), 1), pair.now)
    assert step is not None and step.action is Action.REPLY
    assert pair.response(step).error_code == Errors.NONE
    assert pair.auth.reauthenticating
    step = pair.auth.reauthenticate(
        _request(pair, SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"), 2),
        pair.now)
    resp = pair.response(step)
    assert resp.error_code == Errors.NONE and resp.session_lifetime_ms == 5_000
    assert not pair.auth.session_expired(pair.now + 4_999)


def test_reauthentication_may_not_change_the_principal() -> None:
    sec = security(5_000)
    sec.plain_users["carol"] = "carol-secret"
    pair = Pair(sec)
    pair.handshake("PLAIN")
    pair.authenticate(b"\0alice\0alice-secret")
    pair.now += 2_000
    started = pair.auth.maybe_reauthenticate(
        _request(pair, SaslHandshakeRequest(mechanism="PLAIN"), 1), pair.now)
    assert started is not None and pair.response(started).error_code == Errors.NONE
    step = pair.auth.reauthenticate(
        _request(pair, SaslAuthenticateRequest(auth_bytes=b"\0carol\0carol-secret"), 2),
        pair.now)
    assert step.action is Action.FAIL
    resp = pair.response(step)
    assert resp.error_code == Errors.SASL_AUTHENTICATION_FAILED
    assert "Cannot change principals" in (resp.error_message or "")


def test_reauthentication_may_not_change_the_mechanism() -> None:
    pair = _authenticated(reauth_ms=5_000)
    pair.now += 2_000
    step = pair.auth.maybe_reauthenticate(
        _request(pair, SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), 1), pair.now)
    assert step is not None and step.action is Action.FAIL
    assert pair.response(step).error_code == Errors.UNSUPPORTED_SASL_MECHANISM


def test_no_reauthentication_without_a_session_lifetime_or_within_a_second() -> None:
    pair = _authenticated(reauth_ms=0)
    pair.now += 10_000
    assert pair.auth.maybe_reauthenticate(
        _request(pair, SaslHandshakeRequest(mechanism="PLAIN"), 1), pair.now) is None
    assert not pair.auth.session_expired(pair.now + 10**9)
    quick = _authenticated(reauth_ms=60_000)
    quick.now += 500
    assert quick.auth.maybe_reauthenticate(
        _request(quick, SaslHandshakeRequest(mechanism="PLAIN"), 1), quick.now) is None
