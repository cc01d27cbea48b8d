"""SASL/PLAIN: the three-token rule, CVE-2017-12610's authzid rule, and what the client is told."""

from __future__ import annotations

import pytest

from millrace.common.errors import ConfigError
from millrace.security.errors import (
    AuthenticationException,
    IllegalSaslStateException,
    SaslAuthenticationException,
    SaslException,
    client_error_message,
)
from millrace.security.sasl import SUPPORTED_MECHANISMS, create_sasl_client
from millrace.security.sasl.plain import PlainSaslClient, PlainSaslServer
from millrace.security.sasl.scram import ScramMechanism, ScramSaslClient

USERS = {"alice": "alice-secret", "bob": "b\u00f6b-p\u00e4ss"}
GENERIC = (
    "Authentication failed during authentication due to invalid credentials with SASL mechanism "
    "PLAIN"
)


def server() -> PlainSaslServer:
    return PlainSaslServer(USERS.get)


def failure(message: bytes) -> AuthenticationException:
    with pytest.raises(AuthenticationException) as info:
        server().evaluate_response(message)
    return info.value


@pytest.mark.parametrize(
    "message", [b"\x00alice\x00alice-secret", b"alice\x00alice\x00alice-secret"]
)
def test_empty_or_equal_authzid_is_accepted(message: bytes) -> None:
    srv = server()
    assert srv.mechanism == "PLAIN"
    assert not srv.is_complete()
    assert srv.evaluate_response(message) == b""
    assert srv.is_complete()
    assert srv.authorization_id() == "alice"


def test_utf8_credentials() -> None:
    srv = server()
    assert srv.evaluate_response("\0bob\0b\u00f6b-p\u00e4ss".encode()) == b""
    assert srv.authorization_id() == "bob"


def test_different_authzid_is_rejected_with_the_cve_message() -> None:
    exc = failure(b"admin\x00alice\x00alice-secret")
    assert type(exc) is SaslAuthenticationException
    message = (
        "Authentication failed: Client requested an authorization id that is different from "
        "username"
    )
    assert str(exc) == message
    assert client_error_message(exc, "PLAIN") == message


def test_authzid_is_checked_only_after_the_password() -> None:
    exc = failure(b"admin\x00alice\x00wrong")
    assert str(exc) == "Authentication failed: Invalid username or password"


@pytest.mark.parametrize("message", [b"\x00alice\x00wrong", b"\x00mallory\x00alice-secret"])
def test_wrong_password_and_unknown_user_look_the_same(message: bytes) -> None:
    exc = failure(message)
    assert type(exc) is SaslAuthenticationException
    assert str(exc) == "Authentication failed: Invalid username or password"
    assert client_error_message(exc, "PLAIN") == str(exc)


def test_password_prefix_or_extension_does_not_match() -> None:
    for password in (b"alice-secre", b"alice-secret ", b"ALICE-SECRET"):
        assert isinstance(failure(b"\x00alice\x00" + password), SaslAuthenticationException)


@pytest.mark.parametrize(
    ("message", "count"),
    [
        (b"", 1),
        (b"alice", 1),
        (b"alice\x00alice-secret", 2),
        (b"\x00alice\x00alice-secret\x00", 4),
        (b"\x00alice\x00alice-secret\x00extra", 4),
        (b"\x00\x00\x00\x00", 5),
    ],
)
def test_exactly_three_tokens(message: bytes, count: int) -> None:
    exc = failure(message)
    assert type(exc) is SaslException
    assert str(exc) == f"Invalid SASL/PLAIN response: expected 3 tokens, got {count}"
    assert client_error_message(exc, "PLAIN") == GENERIC


@pytest.mark.parametrize(
    ("message", "text"),
    [
        (b"\x00\x00alice-secret", "Authentication failed: username not specified"),
        (b"\x00alice\x00", "Authentication failed: password not specified"),
        (b"\x00\x00", "Authentication failed: username not specified"),
    ],
)
def test_empty_user_or_password(message: bytes, text: str) -> None:
    seen: list[str] = []

    def lookup(name: str) -> str | None:
        seen.append(name)
        return USERS.get(name)

    with pytest.raises(SaslException) as info:
        PlainSaslServer(lookup).evaluate_response(message)
    assert str(info.value) == text
    assert seen == []


def test_invalid_utf8_is_a_generic_failure() -> None:
    exc = failure(b"\x00alice\x00\xff\xfe")
    assert type(exc) is SaslException


def test_every_proper_prefix_of_a_valid_message_fails() -> None:
    message = b"alice\x00alice\x00alice-secret"
    for end in range(len(message)):
        assert isinstance(failure(message[:end]), AuthenticationException)


def test_lookup_receives_the_user_name() -> None:
    seen: list[str] = []

    def lookup(name: str) -> str | None:
        seen.append(name)
        return USERS.get(name)

    PlainSaslServer(lookup).evaluate_response(b"alice\x00alice\x00alice-secret")
    assert seen == ["alice"]


def test_messages_after_completion_or_failure_are_illegal() -> None:
    srv = server()
    srv.evaluate_response(b"\x00alice\x00alice-secret")
    with pytest.raises(IllegalSaslStateException):
        srv.evaluate_response(b"\x00alice\x00alice-secret")
    assert srv.authorization_id() == "alice"

    failed = server()
    with pytest.raises(SaslAuthenticationException):
        failed.evaluate_response(b"\x00alice\x00wrong")
    with pytest.raises(IllegalSaslStateException):
        failed.evaluate_response(b"\x00alice\x00alice-secret")
    assert not failed.is_complete()
    with pytest.raises(IllegalSaslStateException):
        failed.authorization_id()


# -- client ------------------------------------------------------------------------------------


def test_client_sends_an_empty_authzid_and_completes() -> None:
    client = PlainSaslClient("alice", "alice-secret")
    assert client.mechanism == "PLAIN"
    assert client.has_initial_response()
    assert not client.is_complete()
    token = client.evaluate_challenge(b"")
    assert token == b"\x00alice\x00alice-secret"
    assert client.is_complete()
    assert client.evaluate_challenge(b"") is None  # the server's empty success reply
    with pytest.raises(IllegalSaslStateException):
        client.evaluate_challenge(b"unexpected")


def test_client_against_server() -> None:
    client = PlainSaslClient("bob", USERS["bob"])
    srv = server()
    token = client.evaluate_challenge(b"")
    assert token is not None
    assert srv.evaluate_response(token) == b""
    assert client.is_complete() and srv.authorization_id() == "bob"


def test_client_refuses_nul_in_credentials() -> None:
    with pytest.raises(ConfigError):
        PlainSaslClient("al\x00ice", "x")
    with pytest.raises(ConfigError):
        PlainSaslClient("alice", "x\x00y")


def test_client_refuses_a_challenge_before_its_message() -> None:
    with pytest.raises(IllegalSaslStateException):
        PlainSaslClient("alice", "x").evaluate_challenge(b"hello")


# -- factory ------------------------------------------------------------------------------------


def test_create_sasl_client() -> None:
    assert SUPPORTED_MECHANISMS == ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
    plain = create_sasl_client("PLAIN", "alice", "pw")
    assert isinstance(plain, PlainSaslClient)
    for name, mech in (
        ("SCRAM-SHA-256", ScramMechanism.SCRAM_SHA_256),
        ("SCRAM-SHA-512", ScramMechanism.SCRAM_SHA_512),
    ):
        client = create_sasl_client(name, "alice", "pw")
        assert isinstance(client, ScramSaslClient)
        assert client.scram_mechanism is mech and client.mechanism == name


@pytest.mark.parametrize("name", ["GSSAPI", "OAUTHBEARER", "plain", "SCRAM-SHA-1", ""])
def test_create_sasl_client_rejects_other_mechanisms(name: str) -> None:
    with pytest.raises(ConfigError, match="Unsupported SASL mechanism"):
        create_sasl_client(name, "alice", "pw")


def test_a_failing_lookup_is_an_authentication_failure() -> None:
    def lookup(name: str) -> str | None:
        raise KeyError(name)

    with pytest.raises(SaslAuthenticationException) as info:
        PlainSaslServer(lookup).evaluate_response(b"\x00alice\x00pw")
    assert str(info.value) == "Authentication failed: credentials for user could not be verified"
    assert isinstance(info.value.__cause__, KeyError)
