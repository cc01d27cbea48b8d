"""SASL/PLAIN (RFC 4616) as Kafka runs it.

Java: ``PlainSaslServer``, ``PlainServerCallbackHandler`` (``...security.plain.internals``).

One message, client to server: ``[authzid] NUL authcid NUL password`` in UTF-8.  The server:

1. splits on NUL and requires exactly three tokens;
2. requires a non-empty user name (authcid) and password;
3. compares the password with the expected one in constant time (CVE-2021-38153); an unknown
   user and a wrong password fail alike;
4. requires the authzid to be empty or equal to the user name -- a client may not ask to act as
   someone else (CVE-2017-12610).  librdkafka sends an empty authzid, kafka-python and aiokafka
   send the user name, so both are accepted.

Failures of 1-2 (and bytes that are not UTF-8) are ``SaslException``: the client gets the generic
message.  Failures of 3-4 are ``SaslAuthenticationException`` and their messages go to the client
verbatim -- the same split Kafka makes.  Success answers with empty bytes and the authorization id
is the user name (principal ``User:<name>``).

The expected password comes from ``lookup(username)`` -- for the built-in handler, the
``user_<name>`` options of the listener's ``sasl.jaas.config`` (``jaas.plain_users``).
"""

from __future__ import annotations

import hmac
from collections.abc import Callable

from millrace.common.errors import ConfigError
from millrace.security.errors import (
    IllegalSaslStateException,
    SaslAuthenticationException,
    SaslException,
)

MECHANISM = "PLAIN"

INVALID_CREDENTIALS = "Authentication failed: Invalid username or password"
AUTHZID_MISMATCH = (
    "Authentication failed: Client requested an authorization id that is different from username"
)
USERNAME_NOT_SPECIFIED = "Authentication failed: username not specified"
PASSWORD_NOT_SPECIFIED = "Authentication failed: password not specified"
CANNOT_VERIFY = "Authentication failed: credentials for user could not be verified"


class PlainSaslServer:
    """Server side of one PLAIN exchange; owned by one connection."""

    mechanism = MECHANISM

    def __init__(self, lookup: Callable[[str], str | None]) -> None:
        self._lookup = lookup
        self._complete = False
        self._failed = False
        self._authorization_id: str | None = None

    def evaluate_response(self, response: bytes) -> bytes:
        if self._complete or self._failed:
            raise IllegalSaslStateException(
                "Unexpected SASL/PLAIN message: the exchange is already over"
            )
        try:
            return self._evaluate(response)
        except BaseException:
            self._failed = True
            raise

    def _evaluate(self, response: bytes) -> bytes:
        try:
            text = bytes(response).decode("utf-8")
        except UnicodeDecodeError:
            raise SaslException("Invalid SASL/PLAIN response: not valid UTF-8") from None
        tokens = text.split("\0")
        if len(tokens) != 3:
            raise SaslException(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}"
            )
        authzid, username, password = tokens
        if not username:
            raise SaslException(USERNAME_NOT_SPECIFIED)
        if not password:
            raise SaslException(PASSWORD_NOT_SPECIFIED)
        try:
            expected = self._lookup(username)
        except Exception as exc:
            raise SaslAuthenticationException(CANNOT_VERIFY) from exc
        given = password.encode("utf-8")
        # Compare even for an unknown user so both failures cost the same.
        reference = given if expected is None else expected.encode("utf-8")
        matches = hmac.compare_digest(reference, given)
        if expected is None or not matches:
            raise SaslAuthenticationException(INVALID_CREDENTIALS)
        if authzid and authzid != username:
            raise SaslAuthenticationException(AUTHZID_MISMATCH)
        self._authorization_id = username
        self._complete = True
        return b""

    def is_complete(self) -> bool:
        return self._complete

    def authorization_id(self) -> str:
        if self._authorization_id is None:
            raise IllegalSaslStateException("SASL/PLAIN authentication has not completed")
        return self._authorization_id


class PlainSaslClient:
    """Client side: sends ``NUL user NUL password`` (empty authzid, as librdkafka does)."""

    mechanism = MECHANISM

    def __init__(self, username: str, password: str) -> None:
        if "\0" in username or "\0" in password:
            raise ConfigError("SASL/PLAIN username and password must not contain NUL characters")
        self._message = b"\0" + username.encode("utf-8") + b"\0" + password.encode("utf-8")
        self._complete = False

    def has_initial_response(self) -> bool:
        return True

    def evaluate_challenge(self, challenge: bytes) -> bytes | None:
        """First call (``b""``): the PLAIN message.  After it only the server's empty reply fits."""
        if not self._complete:
            if challenge:
                raise IllegalSaslStateException(
                    "SASL/PLAIN: unexpected challenge before the response"
                )
            self._complete = True
            return self._message
        if challenge:
            raise IllegalSaslStateException("SASL/PLAIN: unexpected data after authentication")
        return None

    def is_complete(self) -> bool:
        return self._complete
