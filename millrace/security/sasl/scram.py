"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka runs them.

Java: ``ScramMechanism``, ``ScramCredential``, ``ScramFormatter``, ``ScramSaslServer``,
``ScramSaslClient`` (``org.apache.kafka.common.security.scram``); the message parsers
(``ScramMessages``) live in ``scram_messages``.

Messages (no channel binding; ``[...]`` optional)::

    client-first   n,[a=<authzid>],[m=<v>,]n=<user>,r=<c-nonce>[,<ext>=<v>...]
    server-first   r=<c-nonce><s-nonce>,s=<base64 salt>,i=<iterations>
    client-final   c=<base64 gs2-header>,r=<c-nonce><s-nonce>[,<ext>=<v>...],p=<base64 proof>
    server-final   v=<base64 server signature>

The gs2 header is the client-first up to and including its second comma (``n,,`` ->
``c=biws``); everything after it is the *client-first-bare*.  User names are ``saslname``s:
``,`` is sent as ``=2C`` and ``=`` as ``=3D``; Kafka accepts only ASCII 0x01-0x7F in them.
Nonces are printable ASCII without ``,``.

Keys (H = SHA-256 or SHA-512, HMAC keyed by its first argument; no SASLprep, as in Kafka)::

    SaltedPassword  = PBKDF2-HMAC-H(UTF8(password), salt, iterations, dkLen = |H|)
    ClientKey       = HMAC(SaltedPassword, "Client Key")      StoredKey = H(ClientKey)
    ServerKey       = HMAC(SaltedPassword, "Server Key")
    AuthMessage     = client-first-bare + "," + server-first + "," + client-final-without-proof
    ClientProof     = ClientKey XOR HMAC(StoredKey, AuthMessage)
    ServerSignature = HMAC(ServerKey, AuthMessage)

The broker stores only (salt, StoredKey, ServerKey, iterations) -- ``ScramCredential``, kept in
ZooKeeper as ``salt=..,stored_key=..,server_key=..,iterations=..`` -- so it never runs PBKDF2
while authenticating.  It checks a proof by recovering ClientKey = proof XOR ClientSignature and
comparing H(ClientKey) with StoredKey in constant time.

Server state machine: RECEIVE_CLIENT_FIRST -> RECEIVE_CLIENT_FINAL -> COMPLETE, or FAILED from
any step.  Any message in COMPLETE or FAILED is an ``IllegalSaslStateException`` -- a replayed
client-final never gets a second answer.  Checks, in order:

1. client-first parses; gs2 flag ``n`` (channel binding unsupported); ``tokenauth`` (delegation
   tokens) is refused -- millrace has no token cache, and treating a token id as a user name
   would be wrong; other extensions are ignored;
2. the user has a credential for this mechanism, else ``SaslException`` (the client sees the
   generic message);
3. authzid empty or equal to the user (CVE-2017-12610) -- ``SaslAuthenticationException``;
4. stored iterations >= 4096;
5. client-final: its nonce ends with c-nonce + s-nonce (equality, or librdkafka < 2.6.1's doubled
   c-nonce ``r=<c><c><s>``; the check is the CVE-2024-56128 fix), ``c=`` decodes to the
   gs2 header of client-first, and the proof verifies.

The client escapes the user name, checks that the server nonce extends its own, refuses
iterations below the mechanism minimum, and verifies ServerSignature before it reports success.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from millrace.security.errors import (
    IllegalSaslStateException,
    SaslAuthenticationException,
    SaslException,
)
from millrace.security.sasl.scram_messages import (
    ClientFinalMessage,
    ClientFirstMessage,
    ServerFirstMessage,
    b64decode,
    b64encode,
    escape_username,
    is_valid_nonce,
    unescape_username,
)

MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384

AUTHZID_MISMATCH = (
    "Authentication failed: Client requested an authorization id that is different from username"
)


class ScramMechanism(enum.Enum):
    """The two SCRAM mechanisms; ``type_id`` is the int8 used by the SCRAM admin APIs (50/51)."""

    SCRAM_SHA_256 = ("SCRAM-SHA-256", "sha256", 1)
    SCRAM_SHA_512 = ("SCRAM-SHA-512", "sha512", 2)

    def __init__(self, mechanism_name: str, hash_name: str, type_id: int) -> None:
        self.mechanism_name = mechanism_name
        self.hash_name = hash_name
        self.type_id = type_id

    @property
    def min_iterations(self) -> int:
        return MIN_ITERATIONS

    @property
    def max_iterations(self) -> int:
        return MAX_ITERATIONS

    @property
    def digest_size(self) -> int:
        return hashlib.new(self.hash_name).digest_size

    @classmethod
    def from_name(cls, name: str) -> ScramMechanism | None:
        for mech in cls:
            if mech.mechanism_name == name:
                return mech
        return None

    @classmethod
    def from_type(cls, type_id: int) -> ScramMechanism | None:
        for mech in cls:
            if mech.type_id == type_id:
                return mech
        return None

    def __str__(self) -> str:
        return self.mechanism_name


# -- stored credential ---------------------------------------------------------------------------

_CREDENTIAL_KEYS = ("salt", "stored_key", "server_key", "iterations")


@dataclass(frozen=True)
class ScramCredential:
    """What the broker stores per user and mechanism (never the password)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:  # keys stay out of logs
        return f"ScramCredential(iterations={self.iterations}, salt=<{len(self.salt)} bytes>)"

    def to_kafka_string(self) -> str:
        return (
            f"salt={b64encode(self.salt)},stored_key={b64encode(self.stored_key)},"
            f"server_key={b64encode(self.server_key)},iterations={self.iterations}"
        )

    @classmethod
    def from_kafka_string(cls, text: str) -> ScramCredential:
        """Parse Kafka's ZooKeeper form: exactly the four keys, standard padded base64."""
        fields: dict[str, str] = {}
        for part in text.split(","):
            key, sep, value = part.partition("=")
            if not sep or key in fields:
                raise ValueError(
                    "Invalid SCRAM credential: expected salt=,stored_key=,server_key=,iterations="
                )
            fields[key] = value
        if sorted(fields) != sorted(_CREDENTIAL_KEYS):
            raise ValueError(
                "Invalid SCRAM credential: expected exactly the keys "
                "salt, stored_key, server_key, iterations"
            )
        iterations_text = fields["iterations"]
        if not iterations_text.isascii() or not iterations_text.isdigit():
            raise ValueError("Invalid SCRAM credential: iterations is not a number")
        try:
            salt = b64decode(fields["salt"])
            stored_key = b64decode(fields["stored_key"])
            server_key = b64decode(fields["server_key"])
        except ValueError:
            raise ValueError("Invalid SCRAM credential: a value is not valid base64") from None
        iterations = int(iterations_text)
        if iterations <= 0 or not salt or not stored_key or not server_key:
            raise ValueError("Invalid SCRAM credential: empty value or iterations not positive")
        return cls(salt, stored_key, server_key, iterations)


# -- computations ------------------------------------------------------------------------------


def _xor(a: bytes, b: bytes) -> bytes:
    if len(a) != len(b):
        raise ValueError("xor of values of different lengths")
    return bytes(x ^ y for x, y in zip(a, b))


class ScramFormatter:
    """The SCRAM key derivations for one mechanism (stateless)."""

    def __init__(self, mechanism: ScramMechanism) -> None:
        self.mechanism = mechanism
        self._hash_name = mechanism.hash_name

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self._hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self._hash_name).digest()

    def salted_password(self, password: bytes, salt: bytes, iterations: int) -> bytes:
        """RFC 5802 ``Hi()``: PBKDF2-HMAC with the digest size as the output length."""
        return hashlib.pbkdf2_hmac(self._hash_name, password, salt, iterations)

    def client_key(self, salted_password: bytes) -> bytes:
        return self.hmac(salted_password, b"Client Key")

    def stored_key(self, client_key: bytes) -> bytes:
        return self.hash(client_key)

    def server_key(self, salted_password: bytes) -> bytes:
        return self.hmac(salted_password, b"Server Key")

    def client_signature(self, stored_key: bytes, auth_message: bytes) -> bytes:
        return self.hmac(stored_key, auth_message)

    def client_proof(self, salted_password: bytes, auth_message: bytes) -> bytes:
        client_key = self.client_key(salted_password)
        signature = self.client_signature(self.stored_key(client_key), auth_message)
        return _xor(client_key, signature)

    def server_signature(self, server_key: bytes, auth_message: bytes) -> bytes:
        return self.hmac(server_key, auth_message)

    def verify_client_proof(self, stored_key: bytes, auth_message: bytes, proof: bytes) -> bool:
        """True when H(proof XOR ClientSignature) == StoredKey (constant-time compare)."""
        if len(proof) != self.mechanism.digest_size:
            return False
        client_key = _xor(proof, self.client_signature(stored_key, auth_message))
        return hmac.compare_digest(self.stored_key(client_key), stored_key)

    @staticmethod
    def auth_message(
        client_first_bare: str, server_first: str, client_final_without_proof: str
    ) -> bytes:
        return f"{client_first_bare},{server_first},{client_final_without_proof}".encode()

    def credential_from_salted_password(
        self, salt: bytes, salted_password: bytes, iterations: int
    ) -> ScramCredential:
        """What AlterUserScramCredentials upserts carry (salt + SaltedPassword) -> stored form."""
        return ScramCredential(
            salt=salt,
            stored_key=self.stored_key(self.client_key(salted_password)),
            server_key=self.server_key(salted_password),
            iterations=iterations,
        )

    def generate_credential(
        self, password: str, iterations: int, salt: bytes | None = None
    ) -> ScramCredential:
        """A new credential; a random 32-byte salt unless one is given."""
        if iterations < 1:
            raise ValueError(f"SCRAM iterations must be positive, got {iterations}")
        if salt is None:
            salt = secrets.token_bytes(32)
        salted = self.salted_password(password.encode("utf-8"), salt, iterations)
        return self.credential_from_salted_password(salt, salted, iterations)


# -- server ------------------------------------------------------------------------------------


class _State(enum.Enum):
    RECEIVE_CLIENT_FIRST = "RECEIVE_CLIENT_FIRST"
    RECEIVE_CLIENT_FINAL = "RECEIVE_CLIENT_FINAL"
    RECEIVE_SERVER_FIRST = "RECEIVE_SERVER_FIRST"
    RECEIVE_SERVER_FINAL = "RECEIVE_SERVER_FINAL"
    SEND_CLIENT_FIRST = "SEND_CLIENT_FIRST"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"


def _as_mechanism(mechanism: ScramMechanism | str) -> ScramMechanism:
    if isinstance(mechanism, ScramMechanism):
        return mechanism
    found = ScramMechanism.from_name(mechanism)
    if found is None:
        raise ValueError(f"Not a SCRAM mechanism: {mechanism!r}")
    return found


def new_nonce() -> str:
    """A random nonce: 32 URL-safe base64 characters (192 bits; never contains ',')."""
    return secrets.token_urlsafe(24)


class ScramSaslServer:
    """Server side of one SCRAM exchange; owned by one connection.

    ``lookup(username)`` returns the stored credential for this mechanism or None.
    ``server_nonce`` fixes the s-nonce (tests only; default: fresh random).
    """

    def __init__(
        self,
        mechanism: ScramMechanism | str,
        lookup: Callable[[str], ScramCredential | None],
        *,
        server_nonce: str | None = None,
    ) -> None:
        self.scram_mechanism = _as_mechanism(mechanism)
        self.mechanism = self.scram_mechanism.mechanism_name
        self._formatter = ScramFormatter(self.scram_mechanism)
        self._lookup = lookup
        if server_nonce is not None and not is_valid_nonce(server_nonce):
            raise ValueError("server nonce must be printable ASCII without ','")
        self._server_nonce = server_nonce
        self._state = _State.RECEIVE_CLIENT_FIRST
        self._client_first: ClientFirstMessage | None = None
        self._server_first: ServerFirstMessage | None = None
        self._credential: ScramCredential | None = None
        self._authorization_id: str | None = None

    def evaluate_response(self, response: bytes) -> bytes:
        try:
            if self._state is _State.RECEIVE_CLIENT_FIRST:
                return self._receive_client_first(response)
            if self._state is _State.RECEIVE_CLIENT_FINAL:
                return self._receive_client_final(response)
        except BaseException:
            self._state = _State.FAILED
            self._credential = None
            raise
        raise IllegalSaslStateException(
            f"Unexpected SCRAM message in server state {self._state.value}"
        )

    def _receive_client_first(self, response: bytes) -> bytes:
        first = ClientFirstMessage.parse(response)
        if first.extensions.get("tokenauth", "").lower() == "true":
            raise SaslException("Delegation token authentication is not supported")
        try:
            credential = self._lookup(first.username)
        except Exception as exc:
            raise SaslException("Authentication failed: Credentials could not be obtained") from exc
        if credential is None:
            raise SaslException("Authentication failed: Invalid user credentials")
        if first.authzid and first.authzid != first.username:
            raise SaslAuthenticationException(AUTHZID_MISMATCH)
        minimum = self.scram_mechanism.min_iterations
        if credential.iterations < minimum:
            raise SaslException(
                f"Iterations {credential.iterations} is less than the minimum {minimum} "
                f"for {self.mechanism}"
            )
        server_nonce = self._server_nonce if self._server_nonce is not None else new_nonce()
        server_first = ServerFirstMessage.build(
            first.nonce + server_nonce, credential.salt, credential.iterations
        )
        self._client_first = first
        self._server_first = server_first
        self._credential = credential
        self._state = _State.RECEIVE_CLIENT_FINAL
        return server_first.text.encode("ascii")

    def _receive_client_final(self, response: bytes) -> bytes:
        first, server_first, credential = self._client_first, self._server_first, self._credential
        assert first is not None and server_first is not None and credential is not None
        final = ClientFinalMessage.parse(response)
        if not final.nonce.endswith(server_first.nonce):
            raise SaslException("Invalid client nonce in the final client message")
        if not hmac.compare_digest(final.channel_binding, first.gs2_header.encode("utf-8")):
            raise SaslException("Invalid channel binding in the final client message")
        auth_message = ScramFormatter.auth_message(
            first.bare, server_first.text, final.without_proof
        )
        formatter = self._formatter
        if not formatter.verify_client_proof(credential.stored_key, auth_message, final.proof):
            raise SaslException("Invalid client credentials")
        signature = self._formatter.server_signature(credential.server_key, auth_message)
        self._authorization_id = first.username
        self._credential = None
        self._state = _State.COMPLETE
        return f"v={b64encode(signature)}".encode("ascii")

    def is_complete(self) -> bool:
        return self._state is _State.COMPLETE

    def authorization_id(self) -> str:
        if self._authorization_id is None or self._state is not _State.COMPLETE:
            raise IllegalSaslStateException("SCRAM authentication has not completed")
        return self._authorization_id


# -- client ------------------------------------------------------------------------------------


class ScramSaslClient:
    """Client side of one SCRAM exchange; ``nonce`` fixes the c-nonce (tests only)."""

    def __init__(
        self,
        mechanism: ScramMechanism | str,
        username: str,
        password: str,
        nonce: str | None = None,
    ) -> None:
        self.scram_mechanism = _as_mechanism(mechanism)
        self.mechanism = self.scram_mechanism.mechanism_name
        self._formatter = ScramFormatter(self.scram_mechanism)
        if nonce is not None and not is_valid_nonce(nonce):
            raise ValueError("client nonce must be printable ASCII without ','")
        self._nonce = nonce if nonce is not None else new_nonce()
        self._username = username
        self._password = password
        self._client_first_bare = f"n={escape_username(username)},r={self._nonce}"
        self._expected_server_signature: bytes | None = None
        self._state = _State.SEND_CLIENT_FIRST

    def has_initial_response(self) -> bool:
        return True

    def evaluate_challenge(self, challenge: bytes) -> bytes | None:
        try:
            if self._state is _State.SEND_CLIENT_FIRST:
                if challenge:
                    raise IllegalSaslStateException(
                        "SCRAM: unexpected challenge before client-first"
                    )
                self._state = _State.RECEIVE_SERVER_FIRST
                return f"n,,{self._client_first_bare}".encode()
            if self._state is _State.RECEIVE_SERVER_FIRST:
                return self._receive_server_first(challenge)
            if self._state is _State.RECEIVE_SERVER_FINAL:
                self._receive_server_final(challenge)
                return None
        except BaseException:
            self._state = _State.FAILED
            self._password = ""
            raise
        raise IllegalSaslStateException(
            f"Unexpected SCRAM challenge in client state {self._state.value}"
        )

    def _receive_server_first(self, challenge: bytes) -> bytes:
        server_first = ServerFirstMessage.parse(challenge)
        if not server_first.nonce.startswith(self._nonce) or server_first.nonce == self._nonce:
            raise SaslAuthenticationException(
                "Invalid SCRAM server nonce: it does not extend the client nonce"
            )
        minimum = self.scram_mechanism.min_iterations
        if server_first.iterations < minimum:
            raise SaslAuthenticationException(
                f"Requested iterations {server_first.iterations} is less than the minimum "
                f"{minimum} for {self.mechanism}"
            )
        salted = self._formatter.salted_password(
            self._password.encode("utf-8"), server_first.salt, server_first.iterations
        )
        self._password = ""
        without_proof = f"c=biws,r={server_first.nonce}"
        auth_message = ScramFormatter.auth_message(
            self._client_first_bare, server_first.text, without_proof
        )
        proof = self._formatter.client_proof(salted, auth_message)
        self._expected_server_signature = self._formatter.server_signature(
            self._formatter.server_key(salted), auth_message
        )
        self._state = _State.RECEIVE_SERVER_FINAL
        return f"{without_proof},p={b64encode(proof)}".encode("ascii")

    def _receive_server_final(self, challenge: bytes) -> None:
        try:
            text = bytes(challenge).decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationException("Invalid SCRAM server final message") from None
        field = text.split(",", 1)[0]
        if field.startswith("e="):
            raise SaslAuthenticationException(f"SCRAM authentication failed: {field[2:]}")
        if not field.startswith("v="):
            raise SaslAuthenticationException("Invalid SCRAM server final message")
        try:
            signature = b64decode(field[2:])
        except ValueError:
            raise SaslAuthenticationException("Invalid SCRAM server final message") from None
        expected = self._expected_server_signature
        assert expected is not None
        if not hmac.compare_digest(signature, expected):
            raise SaslAuthenticationException("Invalid SCRAM server signature")
        self._state = _State.COMPLETE

    def is_complete(self) -> bool:
        return self._state is _State.COMPLETE


__all__ = [
    "MAX_ITERATIONS",
    "MIN_ITERATIONS",
    "ScramCredential",
    "ScramFormatter",
    "ScramMechanism",
    "ScramSaslClient",
    "ScramSaslServer",
    "escape_username",
    "unescape_username",
]
