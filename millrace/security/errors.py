"""Authentication exceptions (Java: ``org.apache.kafka.common.errors`` / ``javax.security.sasl``).

One rule decides what a failing client is told, and it is the reason the hierarchy exists:

* ``SaslAuthenticationException`` -- the message was written for the client and is sent verbatim
  in SaslAuthenticateResponse (error 58), e.g. PLAIN's "Authentication failed: Invalid username or
  password".
* ``SaslException`` (and anything else raised by a mechanism) -- the message is for the broker's
  log only; the client receives the generic ``generic_failure_message(mechanism)`` so that a
  failure does not reveal whether a user exists or which check failed.

``IllegalSaslStateException`` means a message arrived that the exchange does not allow at this
point (a second client-final, a token after completion).  ``UnsupportedSaslMechanismException``
is the SaslHandshake-time failure (error 33).  ``SslAuthenticationException`` is a TLS handshake
or peer-certificate failure (no Kafka response is ever sent for those; the connection closes).

``error_code`` on each class is the Kafka error code the failure maps to when the broker answers
with a response; ``client_error_message`` applies the verbatim-vs-generic rule.
"""

from __future__ import annotations

from typing import ClassVar

from millrace.common.errors import Errors, MillraceError

GENERIC_FAILURE_TEMPLATE = (
    "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"
)


class AuthenticationException(MillraceError):
    """Base of every authentication failure (SASL or TLS)."""

    error_code: ClassVar[int] = int(Errors.SASL_AUTHENTICATION_FAILED)


class SaslAuthenticationException(AuthenticationException):
    """A SASL failure whose message is sent to the client verbatim."""


class IllegalSaslStateException(AuthenticationException):
    """A SASL message arrived that the exchange does not accept in its current state."""

    error_code: ClassVar[int] = int(Errors.ILLEGAL_SASL_STATE)


class UnsupportedSaslMechanismException(AuthenticationException):
    """The requested SASL mechanism is not enabled (or not implemented)."""

    error_code: ClassVar[int] = int(Errors.UNSUPPORTED_SASL_MECHANISM)


class SaslException(AuthenticationException):
    """Any other SASL failure; the client sees only the generic message (hides user existence)."""


class SslAuthenticationException(AuthenticationException):
    """TLS handshake or peer-certificate failure (e.g. no ``ssl.principal.mapping.rules`` match)."""


def generic_failure_message(mechanism: str) -> str:
    """The text Kafka sends for a ``SaslException``: names the mechanism, nothing else."""
    return GENERIC_FAILURE_TEMPLATE.format(mechanism)


def client_error_message(exc: BaseException, mechanism: str) -> str:
    """What the client may be told about ``exc``: its own message only if it was written for it."""
    if isinstance(exc, SaslAuthenticationException | IllegalSaslStateException):
        return str(exc)
    return generic_failure_message(mechanism)
