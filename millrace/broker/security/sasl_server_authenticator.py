"""``SaslServerAuthenticator``: a SASL connection's way to its first ordinary request
(Kafka's ``SaslServerAuthenticator``; reference security.md 3.1-3.3).

Theory of operation.  Until authentication completes, every frame the client sends is
given to ``receive`` *before* it is decoded as a request, because what a frame is depends
on the state the previous frame left:

    INITIAL ──ApiVersions──▶ HANDSHAKE ──SaslHandshake v1──▶ AUTHENTICATE ──▶ COMPLETE
       │                         │                              (SaslAuthenticate v0-2,
       └──────SaslHandshake──────┤                               rounds until the
                                 └──SaslHandshake v0──▶ AUTHENTICATE_RAW   mechanism is done)
                                                        (raw size-prefixed tokens, no header)

* INITIAL accepts ApiVersions (answered as usual; an ApiVersions at a version we do not
  know gets the usual error answer and leaves the state alone, so the client can retry
  lower) and SaslHandshake.  HANDSHAKE accepts only SaslHandshake.  Anything else --
  another API, bytes that are not a request header (a GSSAPI token: not supported) -- is
  an authentication failure and closes the connection without an answer.
* SaslHandshake names a mechanism; one not enabled on the listener is answered
  UNSUPPORTED_SASL_MECHANISM with the enabled list, then the connection closes.
* A failed exchange is answered SASL_AUTHENTICATION_FAILED (v1: SaslAuthenticate with
  the mechanism's message -- or a generic one that does not tell whether the user
  exists; v0: no answer) and the connection is closed only after
  ``connection.failed.authentication.delay.ms``, so a password guesser pays for each try.
* COMPLETE: the principal is ``User:<authorization id>``.  With
  ``connections.max.reauth.ms`` the session has a lifetime (sent as SessionLifetimeMs,
  SaslAuthenticate v1+); a SaslHandshake on a complete connection whose session expires
  starts a re-authentication (KIP-368) that must keep the mechanism and the principal;
  any other request after expiry closes the connection (``session_expired``).

The caller (``BrokerConnection``) bounds pre-authentication frames by
``sasl.server.max.receive.size`` and does the I/O: this class only decides.

Owned by the connection's event-loop thread.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass

from millrace.broker.security.listener_security import ListenerSecurity
from millrace.common.errors import Errors, ProtocolDecodeError
from millrace.protocol import ApiKey, ApiVersionsFallback, Request, ServerConnection
from millrace.protocol.framing import frame as frame_bytes
from millrace.protocol.types import (
    SaslAuthenticateResponse,
    SaslHandshakeResponse,
)
from millrace.security.errors import (
    AuthenticationException,
    IllegalSaslStateException,
    SaslAuthenticationException,
    UnsupportedSaslMechanismException,
    generic_failure_message,
)
from millrace.security.kafka_principal import KafkaPrincipal
from millrace.security.sasl import SaslServer

log = logging.getLogger(__name__)

REAUTH_MIN_INTERVAL_MS = 1000  # Kafka starts a re-authentication at most once a second


class AuthState(enum.Enum):
    INITIAL = "INITIAL"
    HANDSHAKE = "HANDSHAKE"
    AUTHENTICATE = "AUTHENTICATE"
    AUTHENTICATE_RAW = "AUTHENTICATE_RAW"
    COMPLETE = "COMPLETE"
    REAUTHENTICATE = "REAUTHENTICATE"
    FAILED = "FAILED"


class Action(enum.Enum):
    SERVE = "serve"    # serve ``request`` as an ordinary request (ApiVersions)
    REPLY = "reply"    # write ``data``
    FAIL = "fail"      # authentication failed: write ``data`` (if any) after the delay, close
    CLOSE = "close"    # close now, no answer


@dataclass(slots=True)
class AuthStep:
    action: Action
    data: bytes | None = None
    request: Request | ApiVersionsFallback | None = None
    reason: str = ""


class SaslServerAuthenticator:
    def __init__(self, security: ListenerSecurity,
                 decode: Callable[[bytes], Request | ApiVersionsFallback]) -> None:
        self.security = security
        self._decode = decode
        self.state = AuthState.INITIAL
        self.mechanism: str | None = None
        self.principal: KafkaPrincipal | None = None
        self._server: SaslServer | None = None
        self._session_expiry_ms: int | None = None
        self._auth_started_ms = 0

    @property
    def complete(self) -> bool:
        return self.state in (AuthState.COMPLETE, AuthState.REAUTHENTICATE)

    @property
    def reauthenticating(self) -> bool:
        return self.state is AuthState.REAUTHENTICATE

    def session_expired(self, now_ms: int) -> bool:
        return self._session_expiry_ms is not None and now_ms >= self._session_expiry_ms

    # ------------------------------------------------------------------ before COMPLETE
    def receive(self, frame: bytes, now_ms: int) -> AuthStep:
        """The next frame of a connection that is not yet authenticated."""
        try:
            if self.state is AuthState.AUTHENTICATE_RAW:
                return self._raw_token(frame, now_ms)
            try:
                request = self._decode(frame)
            except ProtocolDecodeError as e:
                # not a Kafka request: a raw GSSAPI token, or garbage
                return self._fail(None, f"unexpected bytes before authentication ({e}); "
                                        f"enabled mechanisms: {', '.join(self.security.mechanisms)}")
            if isinstance(request, ApiVersionsFallback):
                if self.state is AuthState.INITIAL:
                    return AuthStep(Action.SERVE, request=request)
                return self._fail(None, "ApiVersions after ApiVersions before authentication")
            key = request.api.key
            if self.state is AuthState.AUTHENTICATE:
                if key != ApiKey.SASL_AUTHENTICATE:
                    return self._fail(None, f"{request.api.name} received while "
                                            "authenticating (expected SaslAuthenticate)")
                return self._authenticate(request, now_ms)
            if key == ApiKey.API_VERSIONS and self.state is AuthState.INITIAL:
                self.state = AuthState.HANDSHAKE
                return AuthStep(Action.SERVE, request=request)
            if key == ApiKey.SASL_HANDSHAKE:
                return self._handshake(request, now_ms)
            return self._fail(None, f"{request.api.name} received before authentication "
                                    f"(state {self.state.value}); closing without an answer")
        except ProtocolDecodeError as e:
            return self._fail(None, f"malformed request before authentication: {e}")

    def _handshake(self, request: Request, now_ms: int) -> AuthStep:
        mechanism = request.body.mechanism
        enabled = list(self.security.mechanisms)
        if mechanism not in enabled:
            body = SaslHandshakeResponse(error_code=Errors.UNSUPPORTED_SASL_MECHANISM,
                                         mechanisms=enabled)
            return self._fail(ServerConnection.encode_response(request, body),
                              f"unsupported SASL mechanism {mechanism!r} requested "
                              f"(enabled: {', '.join(enabled)})")
        self.mechanism = mechanism
        self._server = self.security.sasl_server(mechanism)
        self._auth_started_ms = now_ms
        self.state = (AuthState.AUTHENTICATE if request.version >= 1
                      else AuthState.AUTHENTICATE_RAW)
        body = SaslHandshakeResponse(error_code=Errors.NONE, mechanisms=enabled)
        return AuthStep(Action.REPLY, ServerConnection.encode_response(request, body))

    def _raw_token(self, token: bytes, now_ms: int) -> AuthStep:
        assert self._server is not None and self.mechanism is not None
        try:
            challenge = self._server.evaluate_response(token)
        except AuthenticationException as e:
            return self._fail(None, f"SASL/{self.mechanism} authentication failed: {e}")
        if self._server.is_complete():
            self._completed(now_ms)
        return AuthStep(Action.REPLY, frame_bytes(challenge or b""))

    def _authenticate(self, request: Request, now_ms: int) -> AuthStep:
        assert self._server is not None and self.mechanism is not None
        try:
            challenge = self._server.evaluate_response(bytes(request.body.auth_bytes))
        except AuthenticationException as e:
            code, message = self._error_of(e)
            body = SaslAuthenticateResponse(error_code=code, error_message=message,
                                            auth_bytes=b"", session_lifetime_ms=0)
            return self._fail(ServerConnection.encode_response(request, body),
                              f"SASL/{self.mechanism} authentication failed: {e}")
        lifetime = 0
        if self._server.is_complete():
            previous = self.principal
            principal = KafkaPrincipal("User", self._server.authorization_id())
            if previous is not None and principal != previous:
                body = SaslAuthenticateResponse(
                    error_code=Errors.SASL_AUTHENTICATION_FAILED,
                    error_message=(f"Cannot change principals during re-authentication "
                                   f"from {previous}: {principal}"),
                    auth_bytes=b"", session_lifetime_ms=0)
                return self._fail(ServerConnection.encode_response(request, body),
                                  f"re-authentication as {principal} instead of {previous}")
            lifetime = self._completed(now_ms)
        body = SaslAuthenticateResponse(error_code=Errors.NONE, error_message=None,
                                        auth_bytes=challenge or b"",
                                        session_lifetime_ms=lifetime)
        return AuthStep(Action.REPLY, ServerConnection.encode_response(request, body))

    def _error_of(self, e: AuthenticationException) -> tuple[int, str]:
        assert self.mechanism is not None
        if isinstance(e, IllegalSaslStateException):
            return Errors.ILLEGAL_SASL_STATE, str(e)
        if isinstance(e, UnsupportedSaslMechanismException):
            return Errors.UNSUPPORTED_SASL_MECHANISM, str(e)
        if isinstance(e, SaslAuthenticationException):
            return Errors.SASL_AUTHENTICATION_FAILED, str(e)
        # anything else would tell too much (e.g. whether the user exists)
        return Errors.SASL_AUTHENTICATION_FAILED, generic_failure_message(self.mechanism)

    def _completed(self, now_ms: int) -> int:
        assert self._server is not None and self.mechanism is not None
        self.principal = KafkaPrincipal("User", self._server.authorization_id())
        lifetime = self.security.session_lifetime_ms(self.mechanism)
        self._session_expiry_ms = now_ms + lifetime if lifetime > 0 else None
        self.state = AuthState.COMPLETE
        self._server = None
        return lifetime

    def _fail(self, data: bytes | None, reason: str) -> AuthStep:
        self.state = AuthState.FAILED
        self._server = None
        return AuthStep(Action.FAIL, data, reason=reason)

    # ------------------------------------------------------------------ re-authentication
    def maybe_reauthenticate(self, request: Request, now_ms: int) -> AuthStep | None:
        """A SaslHandshake on a complete connection: the start of a re-authentication if
        the session expires and none began in the last second; else None (the ordinary
        handler answers ILLEGAL_SASL_STATE)."""
        if (self.state is not AuthState.COMPLETE or self._session_expiry_ms is None
                or now_ms - self._auth_started_ms < REAUTH_MIN_INTERVAL_MS):
            return None
        mechanism = request.body.mechanism
        if mechanism != self.mechanism or request.version < 1:
            body = SaslHandshakeResponse(error_code=Errors.UNSUPPORTED_SASL_MECHANISM,
                                         mechanisms=[self.mechanism or ""])
            return self._fail(ServerConnection.encode_response(request, body),
                              f"SASL mechanism '{mechanism}' requested by client is not "
                              "supported for re-authentication of mechanism "
                              f"'{self.mechanism}'")
        self._server = self.security.sasl_server(mechanism)
        self._auth_started_ms = now_ms
        self.state = AuthState.REAUTHENTICATE
        body = SaslHandshakeResponse(error_code=Errors.NONE,
                                     mechanisms=list(self.security.mechanisms))
        return AuthStep(Action.REPLY, ServerConnection.encode_response(request, body))

    def reauthenticate(self, request: Request, now_ms: int) -> AuthStep:
        """A SaslAuthenticate during a re-authentication."""
        return self._authenticate(request, now_ms)
