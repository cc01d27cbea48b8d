"""SASL mechanisms as sans-I/O state machines (Java: ``javax.security.sasl.SaslServer/SaslClient``).

A mechanism object holds one exchange.  The broker's authenticator feeds each token the client
sent (SaslAuthenticate ``AuthBytes`` or a raw v0 frame) to ``SaslServer.evaluate_response`` and
sends back what it returns -- empty bytes when there is nothing to say (PLAIN's success); once
``is_complete()``, ``authorization_id()`` is the user name (principal ``User:<name>``).  Failures
are the exceptions of ``millrace.security.errors``; ``errors.client_error_message`` says what the
client may be told.  A message after completion or failure is ``IllegalSaslStateException``.

The client side runs the mirror image.  Driving loop for any ``SaslClient``::

    token = client.evaluate_challenge(b"")          # the initial response
    while token is not None:
        reply = send_and_receive(token)             # SaslAuthenticate round trip
        if client.is_complete():                    # PLAIN: done once sent; reply is b""
            break
        token = client.evaluate_challenge(reply)    # SCRAM: client-final, then None after
                                                    # verifying the server signature
    assert client.is_complete()

Mechanisms: PLAIN (``plain``) and SCRAM-SHA-256/512 (``scram``).  GSSAPI and OAUTHBEARER are not
implemented.
"""

from __future__ import annotations

from typing import Protocol

from millrace.common.errors import ConfigError
from millrace.security.sasl.plain import PlainSaslClient
from millrace.security.sasl.scram import ScramMechanism, ScramSaslClient

SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class SaslServer(Protocol):
    mechanism: str

    def evaluate_response(self, response: bytes) -> bytes: ...

    def is_complete(self) -> bool: ...

    def authorization_id(self) -> str: ...


class SaslClient(Protocol):
    mechanism: str

    def has_initial_response(self) -> bool: ...

    def evaluate_challenge(self, challenge: bytes) -> bytes | None: ...

    def is_complete(self) -> bool: ...


def create_sasl_client(mechanism: str, username: str, password: str) -> SaslClient:
    """A client for ``mechanism`` (exact Kafka name); ConfigError for any other name."""
    if mechanism == "PLAIN":
        return PlainSaslClient(username, password)
    scram = ScramMechanism.from_name(mechanism)
    if scram is not None:
        return ScramSaslClient(scram, username, password)
    raise ConfigError(
        f"Unsupported SASL mechanism {mechanism!r} (sasl.mechanism); "
        f"supported: {', '.join(SUPPORTED_MECHANISMS)}"
    )


__all__ = [
    "SUPPORTED_MECHANISMS",
    "SaslClient",
    "SaslServer",
    "create_sasl_client",
]
