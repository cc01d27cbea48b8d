"""The client half of SASL authentication (Java ``SaslClientAuthenticator``), sans-I/O.

One ``SaslClientAuthenticator`` per connection of a SASL_PLAINTEXT / SASL_SSL client.  The
``NetworkClient`` starts it once the broker has answered ApiVersions (the connection is
then AUTHENTICATING), sends each request body it hands out at the version it names, and
feeds it each response; it answers the next request, or ``None`` when the exchange is
complete and the connection may become READY.  Every failure is raised as the Kafka error
a Java client would throw, carrying the broker's message where there is one.

Sequence (KIP-152 framing; the legacy raw-token framing of Kafka < 1.0 is not spoken)::

    ApiVersions (done) -> SaslHandshake v1 (mechanism)
                       -> SaslAuthenticate (initial response)
                       -> SaslAuthenticate (next token) ... until the mechanism is complete

* SaslHandshake is sent at v1: "use SaslAuthenticate".  A broker whose ApiVersions lacks
  SaslHandshake v1 or SaslAuthenticate cannot authenticate us: ``UnsupportedVersionError``.
* Handshake error UNSUPPORTED_SASL_MECHANISM -> ``UnsupportedSaslMechanismError`` naming
  the broker's enabled mechanisms (Java's wording); any other error code -> its class.
* SaslAuthenticate goes at the highest version both sides have (0-2).  An error code
  (SASL_AUTHENTICATION_FAILED: a wrong password, an unknown user) -> its class with the
  broker's ``error_message`` verbatim.  A mechanism that rejects what the broker says
  (SCRAM: a server signature that does not verify, a nonce that does not extend ours) ->
  ``SaslAuthenticationError`` with the mechanism's message.
* Complete when the mechanism says so after the broker's last successful answer (PLAIN:
  after the first answer; SCRAM: after verifying server-final).
* ``session_lifetime_ms`` (SaslAuthenticate v1+, KIP-368) is kept: the ``NetworkClient``
  renews the session before the broker would close the connection (see there).

Owned by the network thread.
"""

from __future__ import annotations

from typing import Any

from millrace.client._client_security import SaslCredentials
from millrace.common.errors import (
    Errors,
    KafkaError,
    SaslAuthenticationError,
    UnsupportedSaslMechanismError,
    UnsupportedVersionError,
    for_code,
)
from millrace.protocol import API, ApiKey
from millrace.security.sasl import SaslClient

HANDSHAKE_VERSION = 1  # v1: the tokens travel in SaslAuthenticate requests


class SaslClientAuthenticator:
    __slots__ = ("_authenticate_version", "_client", "_credentials", "session_lifetime_ms")

    def __init__(self, credentials: SaslCredentials) -> None:
        self._credentials = credentials
        self._client: SaslClient | None = None
        self._authenticate_version = 0
        self.session_lifetime_ms = 0

    @property
    def mechanism(self) -> str:
        return self._credentials.mechanism

    @property
    def authenticate_version(self) -> int:
        return self._authenticate_version

    def handshake_request(self, api_versions: dict[int, tuple[int, int]]) -> tuple[Any, int]:
        """The SaslHandshake request (body, version), given the broker's ApiVersions."""
        handshake = api_versions.get(ApiKey.SASL_HANDSHAKE)
        authenticate = api_versions.get(ApiKey.SASL_AUTHENTICATE)
        if handshake is None or handshake[1] < HANDSHAKE_VERSION or authenticate is None:
            raise UnsupportedVersionError(
                "the broker does not support SaslHandshake v1 and SaslAuthenticate "
                "(Kafka 1.0+): SASL authentication with raw tokens is not supported")
        ours = API[ApiKey.SASL_AUTHENTICATE].versions
        version = min(authenticate[1], ours.high)
        if version < max(authenticate[0], ours.low):
            raise UnsupportedVersionError(
                f"SaslAuthenticate: the broker supports versions {authenticate[0]}-"
                f"{authenticate[1]}, this client {ours.low}-{ours.high}")
        self._authenticate_version = version
        body = API[ApiKey.SASL_HANDSHAKE].request.cls(mechanism=self.mechanism)
        return body, HANDSHAKE_VERSION

    def handle_handshake_response(self, body: Any) -> tuple[Any, int]:
        """The first SaslAuthenticate request (body, version)."""
        code = body.error_code
        if code == Errors.UNSUPPORTED_SASL_MECHANISM:
            raise UnsupportedSaslMechanismError(
                f"Client SASL mechanism '{self.mechanism}' not enabled in the server, "
                f"enabled mechanisms are {list(body.mechanisms)}")
        if code:
            cls = for_code(code)
            raise cls(f"SaslHandshake with mechanism {self.mechanism} failed: {cls.name}")
        self._client = self._credentials.create_client()
        token = b""
        if self._client.has_initial_response():
            token = self._evaluate(b"") or b""
        return self._authenticate(token)

    def handle_authenticate_response(self, body: Any) -> tuple[Any, int] | None:
        """The next SaslAuthenticate request, or None once authentication is complete."""
        client = self._client
        assert client is not None, "SaslAuthenticate answered before the handshake"
        if body.error_code:
            cls = for_code(body.error_code)
            raise cls(body.error_message or f"SASL {self.mechanism} authentication failed")
        self.session_lifetime_ms = max(getattr(body, "session_lifetime_ms", 0) or 0, 0)
        if client.is_complete():
            return None
        token = self._evaluate(body.auth_bytes or b"")
        if client.is_complete() and not token:
            return None
        return self._authenticate(token or b"")

    def _evaluate(self, challenge: bytes) -> bytes | None:
        assert self._client is not None
        try:
            return self._client.evaluate_challenge(challenge)
        except KafkaError:
            raise
        except Exception as e:  # the mechanism rejected the broker's answer
            raise SaslAuthenticationError(
                f"SASL {self.mechanism} authentication failed: {e}") from e

    def _authenticate(self, token: bytes) -> tuple[Any, int]:
        body = API[ApiKey.SASL_AUTHENTICATE].request.cls(auth_bytes=token)
        return body, self._authenticate_version
