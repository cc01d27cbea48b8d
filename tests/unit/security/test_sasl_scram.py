"""SCRAM-SHA-256/512: RFC 7677's test vector, the server's refusals, the client's checks."""

from __future__ import annotations

import base64
import random

import pytest

from millrace.security.errors import (
    AuthenticationException,
    IllegalSaslStateException,
    SaslAuthenticationException,
    SaslException,
    client_error_message,
    generic_failure_message,
)
from millrace.security.sasl.scram import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramCredential,
    ScramFormatter,
    ScramMechanism,
    ScramSaslClient,
    ScramSaslServer,
    escape_username,
    unescape_username,
)

SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512

# RFC 7677 section 3: user "user", password "pencil".
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
RFC_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="

_CREDENTIALS: dict[tuple[ScramMechanism, str, int], ScramCredential] = {}


def credential(mech: ScramMechanism, password: str, iterations: int = 4096) -> ScramCredential:
    """PBKDF2 is slow on purpose; derive each distinct credential once per session."""
    key = (mech, password, iterations)
    if key not in _CREDENTIALS:
        _CREDENTIALS[key] = ScramFormatter(mech).generate_credential(password, iterations)
    return _CREDENTIALS[key]


def rfc_server() -> ScramSaslServer:
    cred = ScramFormatter(SHA256).generate_credential("pencil", 4096, salt=RFC_SALT)
    return ScramSaslServer(SHA256, {"user": cred}.get, server_nonce=RFC_SERVER_NONCE)


def run_exchange(client: ScramSaslClient, server: ScramSaslServer) -> None:
    token = client.evaluate_challenge(b"")
    while token is not None:
        reply = server.evaluate_response(token)
        token = client.evaluate_challenge(reply)


def client_final(
    mech: ScramMechanism,
    password: str,
    client_first_bare: str,
    server_first: bytes,
    *,
    gs2_header: str = "n,,",
    nonce: str | None = None,
) -> bytes:
    """A client-final computed by hand, so single fields can be varied with a valid proof."""
    fmt = ScramFormatter(mech)
    fields = dict(f.split("=", 1) for f in server_first.decode().split(","))
    salted = fmt.salted_password(
        password.encode(), base64.b64decode(fields["s"]), int(fields["i"])
    )
    channel = base64.b64encode(gs2_header.encode()).decode()
    without_proof = f"c={channel},r={fields['r'] if nonce is None else nonce}"
    auth = ScramFormatter.auth_message(client_first_bare, server_first.decode(), without_proof)
    proof = base64.b64encode(fmt.client_proof(salted, auth)).decode()
    return f"{without_proof},p={proof}".encode()


# -- RFC 7677 vector ------------------------------------------------------------------------------


def test_rfc7677_client_produces_the_rfc_messages() -> None:
    client = ScramSaslClient(SHA256, "user", "pencil", nonce=RFC_CLIENT_NONCE)
    assert client.has_initial_response()
    assert client.evaluate_challenge(b"") == RFC_CLIENT_FIRST
    assert client.evaluate_challenge(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    assert not client.is_complete()
    assert client.evaluate_challenge(RFC_SERVER_FINAL) is None
    assert client.is_complete()


def test_rfc7677_server_produces_the_rfc_messages() -> None:
    server = rfc_server()
    assert server.mechanism == "SCRAM-SHA-256"
    assert server.evaluate_response(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert not server.is_complete()
    assert server.evaluate_response(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert server.is_complete()
    assert server.authorization_id() == "user"


def test_rfc7677_client_against_server() -> None:
    client = ScramSaslClient(SHA256, "user", "pencil", nonce=RFC_CLIENT_NONCE)
    server = rfc_server()
    run_exchange(client, server)
    assert client.is_complete() and server.is_complete()
    assert server.authorization_id() == "user"


def test_rfc7677_formatter_keys() -> None:
    fmt = ScramFormatter(SHA256)
    salted = fmt.salted_password(b"pencil", RFC_SALT, 4096)
    assert len(salted) == 32
    cred = fmt.credential_from_salted_password(RFC_SALT, salted, 4096)
    assert cred == fmt.generate_credential("pencil", 4096, salt=RFC_SALT)
    assert cred.stored_key == fmt.stored_key(fmt.client_key(salted))
    auth = ScramFormatter.auth_message(
        "n=user,r=" + RFC_CLIENT_NONCE,
        RFC_SERVER_FIRST.decode(),
        RFC_CLIENT_FINAL.decode().rsplit(",p=", 1)[0],
    )
    proof = fmt.client_proof(salted, auth)
    assert base64.b64encode(proof) == RFC_CLIENT_FINAL.rsplit(b",p=", 1)[1]
    assert fmt.verify_client_proof(cred.stored_key, auth, proof)
    assert not fmt.verify_client_proof(cred.stored_key, auth, bytes(32))
    assert not fmt.verify_client_proof(cred.stored_key, auth, proof[:-1])
    assert b"v=" + base64.b64encode(fmt.server_signature(cred.server_key, auth)) == RFC_SERVER_FINAL


# -- round trips ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mech", [SHA256, SHA512])
def test_round_trip(mech: ScramMechanism) -> None:
    cred = credential(mech, "alice-secret")
    client = ScramSaslClient(mech, "alice", "alice-secret")
    server = ScramSaslServer(mech, {"alice": cred}.get)
    run_exchange(client, server)
    assert client.is_complete() and server.is_complete()
    assert server.authorization_id() == "alice"
    assert client.mechanism == server.mechanism == mech.mechanism_name


def test_sha512_keys_are_64_bytes_and_wrong_password_fails() -> None:
    cred = credential(SHA512, "alice-secret")
    assert len(cred.stored_key) == len(cred.server_key) == 64
    server = ScramSaslServer(SHA512, {"alice": cred}.get)
    client = ScramSaslClient(SHA512, "alice", "wrong")
    with pytest.raises(SaslException, match="Invalid client credentials"):
        run_exchange(client, server)
    assert not server.is_complete()


def test_sha256_credential_does_not_authenticate_sha512() -> None:
    server = ScramSaslServer(SHA512, {"alice": credential(SHA256, "pw")}.get)
    with pytest.raises(SaslException):
        run_exchange(ScramSaslClient(SHA512, "alice", "pw"), server)


def test_mechanism_table() -> None:
    assert SHA256.mechanism_name == "SCRAM-SHA-256" and SHA256.hash_name == "sha256"
    assert SHA512.mechanism_name == "SCRAM-SHA-512" and SHA512.hash_name == "sha512"
    assert (SHA256.type_id, SHA512.type_id) == (1, 2)
    assert SHA256.min_iterations == MIN_ITERATIONS == 4096
    assert MAX_ITERATIONS == 16384
    assert ScramMechanism.from_name("SCRAM-SHA-512") is SHA512
    assert ScramMechanism.from_name("scram-sha-512") is None
    assert ScramMechanism.from_name("PLAIN") is None
    assert ScramMechanism.from_type(1) is SHA256
    assert ScramMechanism.from_type(3) is None
    assert str(SHA256) == "SCRAM-SHA-256"


def test_mechanism_may_be_given_by_name() -> None:
    assert ScramSaslServer("SCRAM-SHA-512", lambda _: None).scram_mechanism is SHA512
    with pytest.raises(ValueError):
        ScramSaslClient("PLAIN", "a", "b")


# -- stored credential format ---------------------------------------------------------------------


def test_credential_kafka_string_round_trip() -> None:
    cred = ScramCredential(b"salt\x00\xff", b"k" * 32, b"s" * 32, 8192)
    text = cred.to_kafka_string()
    k64, s64 = base64.b64encode(b"k" * 32).decode(), base64.b64encode(b"s" * 32).decode()
    assert text == f"salt=c2FsdAD/,stored_key={k64},server_key={s64},iterations=8192"
    assert ScramCredential.from_kafka_string(text) == cred
    generated = credential(SHA256, "pw")
    assert ScramCredential.from_kafka_string(generated.to_kafka_string()) == generated


def test_credential_keys_in_any_order_are_accepted() -> None:
    text = "iterations=4096,server_key=c2s=,stored_key=c2s=,salt=c2FsdA=="
    cred = ScramCredential.from_kafka_string(text)
    assert (cred.salt, cred.stored_key, cred.iterations) == (b"salt", b"sk", 4096)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "salt=c2FsdA==,stored_key=c2s=,server_key=c2s=",  # a key missing
        "salt=c2FsdA==,stored_key=c2s=,server_key=c2s=,iterations=4096,extra=1",  # one too many
        "salt=c2FsdA==,stored_key=c2s=,stored_key=c2s=,iterations=4096",  # duplicated key
        "salt=c2FsdA==,stored_key=c2s=,server_key=c2s=,iterations=4096,",  # trailing comma
        "salt=c2FsdA==,stored_key=c2s=,server_key=c2s=,iterations=x",
        "salt=c2FsdA==,stored_key=c2s=,server_key=c2s=,iterations=-1",
        "salt=c2FsdA==,stored_key=c2s=,server_key=c2s=,iterations=0",
        "salt=c2FsdA,stored_key=c2s=,server_key=c2s=,iterations=4096",  # padding missing
        "salt=c2F*dA==,stored_key=c2s=,server_key=c2s=,iterations=4096",  # not base64
        "salt=,stored_key=c2s=,server_key=c2s=,iterations=4096",  # empty salt
        "salt c2FsdA==,stored_key=c2s=,server_key=c2s=,iterations=4096",  # no '='
        "SALT=c2FsdA==,stored_key=c2s=,server_key=c2s=,iterations=4096",  # keys are lower case
    ],
)
def test_malformed_credential_strings_are_rejected(text: str) -> None:
    with pytest.raises(ValueError, match="Invalid SCRAM credential"):
        ScramCredential.from_kafka_string(text)


def test_credential_repr_hides_keys() -> None:
    cred = ScramCredential(b"salt", b"STOREDKEY", b"SERVERKEY", 4096)
    assert "STOREDKEY" not in repr(cred) and "4096" in repr(cred)


def test_generate_credential_uses_a_fresh_salt() -> None:
    fmt = ScramFormatter(SHA256)
    a = fmt.generate_credential("pw", 4096)
    b = fmt.generate_credential("pw", 4096)
    assert a.salt != b.salt and len(a.salt) == 32
    assert a.stored_key != b.stored_key
    with pytest.raises(ValueError):
        fmt.generate_credential("pw", 0)


# -- server refusals ------------------------------------------------------------------------------


def test_unknown_user_is_a_generic_failure_before_server_first() -> None:
    seen: list[str] = []

    def lookup(name: str) -> ScramCredential | None:
        seen.append(name)
        return None

    server = ScramSaslServer(SHA256, lookup)
    with pytest.raises(SaslException) as info:
        server.evaluate_response(b"n,,n=nobody,r=abc")
    assert type(info.value) is SaslException
    assert seen == ["nobody"]
    assert client_error_message(info.value, "SCRAM-SHA-256") == (
        "Authentication failed during authentication due to invalid credentials with SASL "
        "mechanism SCRAM-SHA-256"
    )
    with pytest.raises(IllegalSaslStateException):
        server.evaluate_response(b"n,,n=nobody,r=abc")


def test_replayed_client_final_from_another_session_fails_on_the_nonce() -> None:
    """CVE-2024-56128: an eavesdropped client-final must not authenticate a new session."""
    cred = credential(SHA256, "pw")
    first = ScramSaslServer(SHA256, {"alice": cred}.get, server_nonce="S1")
    client = ScramSaslClient(SHA256, "alice", "pw", nonce="C1")
    client_first = client.evaluate_challenge(b"")
    assert client_first is not None
    final = client.evaluate_challenge(first.evaluate_response(client_first))
    assert final is not None
    first.evaluate_response(final)
    assert first.is_complete()

    second = ScramSaslServer(SHA256, {"alice": cred}.get, server_nonce="S2")
    second.evaluate_response(client_first)
    with pytest.raises(SaslException, match="nonce"):
        second.evaluate_response(final)
    assert not second.is_complete()


def test_foreign_nonce_with_a_valid_proof_is_rejected() -> None:
    cred = credential(SHA256, "pw")
    server = ScramSaslServer(SHA256, {"alice": cred}.get, server_nonce="SRV")
    server_first = server.evaluate_response(b"n,,n=alice,r=CLI")
    final = client_final(SHA256, "pw", "n=alice,r=CLI", server_first, nonce="CLIOTHER")
    with pytest.raises(SaslException, match="nonce"):
        server.evaluate_response(final)


def test_old_librdkafka_doubled_client_nonce_is_accepted() -> None:
    cred = credential(SHA256, "pw")
    server = ScramSaslServer(SHA256, {"alice": cred}.get, server_nonce="SRV")
    server_first = server.evaluate_response(b"n,,n=alice,r=CLI")
    assert server_first.startswith(b"r=CLISRV,")
    final = client_final(SHA256, "pw", "n=alice,r=CLI", server_first, nonce="CLICLISRV")
    reply = server.evaluate_response(final)
    assert reply.startswith(b"v=")
    assert server.is_complete() and server.authorization_id() == "alice"


@pytest.mark.parametrize("nonce", ["CLI", "CLISR", "CLISRVX", "SRVCLI"])
def test_client_final_nonce_must_end_with_the_combined_nonce(nonce: str) -> None:
    cred = credential(SHA256, "pw")
    server = ScramSaslServer(SHA256, {"alice": cred}.get, server_nonce="SRV")
    server_first = server.evaluate_response(b"n,,n=alice,r=CLI")
    final = client_final(SHA256, "pw", "n=alice,r=CLI", server_first, nonce=nonce)
    with pytest.raises(SaslException, match="nonce"):
        server.evaluate_response(final)


def test_second_client_final_is_an_illegal_state() -> None:
    server = rfc_server()
    server.evaluate_response(RFC_CLIENT_FIRST)
    server.evaluate_response(RFC_CLIENT_FINAL)
    with pytest.raises(IllegalSaslStateException) as info:
        server.evaluate_response(RFC_CLIENT_FINAL)
    assert server.is_complete()  # the finished exchange stands; only the extra message fails
    assert client_error_message(info.value, "SCRAM-SHA-256") == str(info.value)


def test_any_message_after_a_failure_is_an_illegal_state() -> None:
    server = rfc_server()
    server.evaluate_response(RFC_CLIENT_FIRST)
    with pytest.raises(SaslException):
        server.evaluate_response(RFC_CLIENT_FINAL.replace(b"p=dHzb", b"p=dHzc"))
    with pytest.raises(IllegalSaslStateException):
        server.evaluate_response(RFC_CLIENT_FINAL)
    with pytest.raises(IllegalSaslStateException):
        server.authorization_id()


def test_wrong_proof_is_rejected() -> None:
    server = rfc_server()
    server.evaluate_response(RFC_CLIENT_FIRST)
    final = client_final(SHA256, "pencil!", "n=user,r=" + RFC_CLIENT_NONCE, RFC_SERVER_FIRST)
    with pytest.raises(SaslException, match="Invalid client credentials") as info:
        server.evaluate_response(final)
    assert type(info.value) is SaslException
    assert not server.is_complete()


def test_proof_of_the_wrong_length_is_rejected() -> None:
    server = rfc_server()
    server.evaluate_response(RFC_CLIENT_FIRST)
    short = RFC_CLIENT_FINAL.rsplit(b",p=", 1)[0] + b",p=" + base64.b64encode(bytes(16))
    with pytest.raises(SaslException):
        server.evaluate_response(short)


def test_authzid_different_from_user_is_rejected_verbatim() -> None:
    cred = credential(SHA256, "pw")
    server = ScramSaslServer(SHA256, {"alice": cred, "admin": cred}.get)
    with pytest.raises(SaslAuthenticationException) as info:
        server.evaluate_response(b"n,a=admin,n=alice,r=abc")
    message = (
        "Authentication failed: Client requested an authorization id that is different from "
        "username"
    )
    assert str(info.value) == message
    assert client_error_message(info.value, "SCRAM-SHA-256") == message


def test_authzid_equal_to_user_is_accepted() -> None:
    cred = credential(SHA256, "pw")
    server = ScramSaslServer(SHA256, {"alice": cred}.get, server_nonce="SRV")
    server_first = server.evaluate_response(b"n,a=alice,n=alice,r=CLI")
    final = client_final(
        SHA256, "pw", "n=alice,r=CLI", server_first, gs2_header="n,a=alice,"
    )
    assert server.evaluate_response(final).startswith(b"v=")
    assert server.authorization_id() == "alice"


@pytest.mark.parametrize("iterations", [1, 4095])
def test_stored_iterations_below_the_minimum_are_rejected(iterations: int) -> None:
    cred = ScramFormatter(SHA256).generate_credential("pw", iterations)
    server = ScramSaslServer(SHA256, {"alice": cred}.get)
    with pytest.raises(SaslException, match="less than the minimum 4096"):
        server.evaluate_response(b"n,,n=alice,r=abc")


@pytest.mark.parametrize(
    "message",
    [b"y,,n=user,r=abc", b"p=tls-unique,,n=user,r=abc", b"x,,n=user,r=abc", b",,n=user,r=abc"],
)
def test_gs2_flag_other_than_n_is_rejected(message: bytes) -> None:
    server = rfc_server()
    with pytest.raises(SaslException, match="Invalid SCRAM client first message"):
        server.evaluate_response(message)


@pytest.mark.parametrize("gs2_header", ["y,,", "n,a=user,", "p=tls-unique,,"])
def test_channel_binding_that_does_not_match_the_gs2_header_is_rejected(gs2_header: str) -> None:
    server = rfc_server()
    server.evaluate_response(RFC_CLIENT_FIRST)
    final = client_final(
        SHA256,
        "pencil",
        "n=user,r=" + RFC_CLIENT_NONCE,
        RFC_SERVER_FIRST,
        gs2_header=gs2_header,
    )
    with pytest.raises(SaslException, match="channel binding"):
        server.evaluate_response(final)


def test_delegation_token_extension_is_refused() -> None:
    seen: list[str] = []

    def lookup(name: str) -> ScramCredential | None:
        seen.append(name)
        return credential(SHA256, "pw")

    server = ScramSaslServer(SHA256, lookup)
    with pytest.raises(SaslException, match="Delegation token"):
        server.evaluate_response(b"n,,n=tokenid,r=abc,tokenauth=true")
    assert seen == []


def test_unknown_extensions_and_reserved_m_are_ignored() -> None:
    server = ScramSaslServer(SHA256, {"alice": credential(SHA256, "pw")}.get, server_nonce="S")
    reply = server.evaluate_response(b"n,,m=ext,n=alice,r=abc,foo=bar,x=1=2")
    assert reply.startswith(b"r=abcS,s=")


# -- user name escaping ---------------------------------------------------------------------------


def test_username_escaping() -> None:
    assert escape_username("a,b=c") == "a=2Cb=3Dc"
    assert escape_username("=2C") == "=3D2C"
    assert unescape_username("a=2Cb=3Dc") == "a,b=c"
    assert unescape_username(escape_username("=2C,=")) == "=2C,="


@pytest.mark.parametrize("saslname", ["a=2Db", "a=", "a=2", "=3d", "a,b", "", "caf\u00e9"])
def test_invalid_saslnames(saslname: str) -> None:
    with pytest.raises(ValueError):
        unescape_username(saslname)


def test_escaped_username_round_trip_through_client_and_server() -> None:
    seen: list[str] = []
    cred = credential(SHA256, "pw")

    def lookup(name: str) -> ScramCredential | None:
        seen.append(name)
        return cred

    client = ScramSaslClient(SHA256, "a,b=c", "pw", nonce="NONCE")
    first = client.evaluate_challenge(b"")
    assert first == b"n,,n=a=2Cb=3Dc,r=NONCE"
    server = ScramSaslServer(SHA256, lookup)
    final = client.evaluate_challenge(server.evaluate_response(first))
    assert final is not None
    assert client.evaluate_challenge(server.evaluate_response(final)) is None
    assert seen == ["a,b=c"]
    assert server.authorization_id() == "a,b=c"


@pytest.mark.parametrize(
    "message", [b"n,,n=a=2Db,r=abc", b"n,,n=a=,r=abc", b"n,,n=a=2,r=abc", b"n,,n=,r=abc"]
)
def test_server_rejects_invalid_escapes_without_a_lookup(message: bytes) -> None:
    seen: list[str] = []

    def lookup(name: str) -> ScramCredential | None:
        seen.append(name)
        return None

    with pytest.raises(SaslException, match="Invalid SCRAM client first message"):
        ScramSaslServer(SHA256, lookup).evaluate_response(message)
    assert seen == []


def test_non_ascii_user_names_are_refused_like_kafka() -> None:
    server = ScramSaslServer(SHA256, lambda _: credential(SHA256, "pw"))
    with pytest.raises(SaslException):
        server.evaluate_response("n,,n=jos\u00e9,r=abc".encode())


# -- malformed input -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "message",
    [
        b"",
        b"n",
        b"n,",
        b"n,,",
        b"n,,n=user",
        b"n,,r=abc,n=user",
        b"n,,n=user,r=",
        b"n,,n=user,r=a b",  # space is not printable in the nonce grammar
        b"n,,n=user,r=abc,",
        b"n,,n=user,r=abc,=x",
        b"n,,n=user,r=abc,1x",
        b"n,user,n=user,r=abc",
        b"n,,n=user,r=abc\xff",
    ],
)
def test_malformed_client_first_is_a_sasl_exception(message: bytes) -> None:
    with pytest.raises(SaslException):
        rfc_server().evaluate_response(message)


def test_every_prefix_and_trailing_garbage_of_the_rfc_messages() -> None:
    """Truncated or extended tokens fail cleanly (only AuthenticationException, never a crash)."""
    nonce_at = len(b"n,,n=user,r=")
    for end in range(nonce_at + 1):
        with pytest.raises(AuthenticationException):
            rfc_server().evaluate_response(RFC_CLIENT_FIRST[:end])
    # Cut inside the nonce (or extended) it is a valid message with another nonce.
    for message in (RFC_CLIENT_FIRST[: nonce_at + 1], RFC_CLIENT_FIRST + b"x"):
        nonce = message[nonce_at:]
        assert rfc_server().evaluate_response(message).startswith(
            b"r=" + nonce + RFC_SERVER_NONCE.encode() + b",s="
        )
    for end in range(len(RFC_CLIENT_FINAL)):
        server = rfc_server()
        server.evaluate_response(RFC_CLIENT_FIRST)
        with pytest.raises(AuthenticationException):
            server.evaluate_response(RFC_CLIENT_FINAL[:end])
        assert not server.is_complete()
    for garbage in (b"x", b",", b"=", b"\x00", b",p=AAAA"):
        server = rfc_server()
        server.evaluate_response(RFC_CLIENT_FIRST)
        with pytest.raises(SaslException):
            server.evaluate_response(RFC_CLIENT_FINAL + garbage)


def test_random_bytes_only_raise_authentication_exceptions() -> None:
    rng = random.Random(7677)
    alphabet = b"nr=,cpsvia2CD3\x00\xff" + RFC_CLIENT_FIRST
    for _ in range(500):
        data = bytes(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))
        server = rfc_server()
        try:
            server.evaluate_response(data)
        except AuthenticationException:
            continue
        with pytest.raises(AuthenticationException):
            server.evaluate_response(bytes(rng.choice(alphabet) for _ in range(30)))


def test_authorization_id_before_completion_is_an_illegal_state() -> None:
    server = rfc_server()
    server.evaluate_response(RFC_CLIENT_FIRST)
    with pytest.raises(IllegalSaslStateException):
        server.authorization_id()


def test_generic_message_names_the_mechanism() -> None:
    assert generic_failure_message("SCRAM-SHA-512").endswith("with SASL mechanism SCRAM-SHA-512")
    assert client_error_message(SaslException("user x has no credential"), "PLAIN") == (
        generic_failure_message("PLAIN")
    )


# -- client checks ------------------------------------------------------------------------------


def started_client() -> ScramSaslClient:
    client = ScramSaslClient(SHA256, "user", "pencil", nonce=RFC_CLIENT_NONCE)
    client.evaluate_challenge(b"")
    return client


def test_client_rejects_a_wrong_server_signature() -> None:
    client = started_client()
    client.evaluate_challenge(RFC_SERVER_FIRST)
    bad = b"v=" + base64.b64encode(bytes(32))
    with pytest.raises(SaslAuthenticationException, match="server signature"):
        client.evaluate_challenge(bad)
    assert not client.is_complete()
    with pytest.raises(IllegalSaslStateException):
        client.evaluate_challenge(RFC_SERVER_FINAL)


@pytest.mark.parametrize(
    "server_first",
    [
        b"r=XXXXNGfwEbeRWgbNEkqO%hvYD,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",  # not our prefix
        b"r=rOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",  # nothing appended
    ],
)
def test_client_rejects_a_server_nonce_that_does_not_extend_its_own(server_first: bytes) -> None:
    with pytest.raises(SaslAuthenticationException, match="nonce"):
        started_client().evaluate_challenge(server_first)


def test_client_rejects_too_few_iterations() -> None:
    low = RFC_SERVER_FIRST.replace(b"i=4096", b"i=4095")
    with pytest.raises(SaslAuthenticationException, match="minimum 4096"):
        started_client().evaluate_challenge(low)


@pytest.mark.parametrize(
    "server_first",
    [b"", b"r=x", b"s=abc,r=x,i=1", RFC_SERVER_FIRST.replace(b"==", b""), b"\xff"],
)
def test_client_rejects_malformed_server_first(server_first: bytes) -> None:
    with pytest.raises(SaslAuthenticationException):
        started_client().evaluate_challenge(server_first)


def test_client_reports_a_server_error_field() -> None:
    client = started_client()
    client.evaluate_challenge(RFC_SERVER_FIRST)
    with pytest.raises(SaslAuthenticationException, match="invalid-proof"):
        client.evaluate_challenge(b"e=invalid-proof")


def test_client_refuses_a_challenge_before_its_first_message() -> None:
    client = ScramSaslClient(SHA256, "user", "pencil")
    with pytest.raises(IllegalSaslStateException):
        client.evaluate_challenge(b"r=abc")


def test_client_default_nonce_is_random_and_printable() -> None:
    a = ScramSaslClient(SHA256, "u", "p").evaluate_challenge(b"")
    b = ScramSaslClient(SHA256, "u", "p").evaluate_challenge(b"")
    assert a is not None and b is not None and a != b
    nonce = a.split(b",r=", 1)[1].decode()
    assert len(nonce) >= 24 and "," not in nonce and nonce.isprintable()


def test_client_and_server_reject_invalid_fixed_nonces() -> None:
    with pytest.raises(ValueError):
        ScramSaslClient(SHA256, "u", "p", nonce="a,b")
    with pytest.raises(ValueError):
        ScramSaslServer(SHA256, lambda _: None, server_nonce="")


def test_a_failing_lookup_is_a_generic_failure() -> None:
    def lookup(name: str) -> ScramCredential | None:
        raise RuntimeError("credential cache not loaded")

    with pytest.raises(SaslException) as info:
        ScramSaslServer(SHA256, lookup).evaluate_response(RFC_CLIENT_FIRST)
    assert type(info.value) is SaslException
    assert isinstance(info.value.__cause__, RuntimeError)
