"""``SaslSslConnection``: one SASL_SSL socket to a broker, one request at a time, with
millrace's sans-I/O codec -- for the security scenario's hostile clients, which must send
exact requests (a forged ``replica_id``, a JoinGroup on a group that is not theirs) and
read the exact answer, where a client library would refuse, retry or hide it.

``connect`` opens TCP, does the TLS handshake (the server's certificate checked against
the development CA, host name included) and authenticates with SCRAM or PLAIN: a
SaslHandshake v1, then SaslAuthenticate rounds driven by ``millrace.security.sasl``'s
client state machine.  A refused authentication raises ``AuthenticationRefused`` with the
broker's error code (SASL_AUTHENTICATION_FAILED, 58, for a wrong password) and closes the
socket, as the broker does.
"""

from __future__ import annotations

import socket
import ssl
from typing import Any

from millrace.protocol import API, ApiKey, ClientConnection
from millrace.security.sasl import create_sasl_client
from millrace.testing.raw_connection import exchange

SASL_HANDSHAKE_VERSION = 1  # v1: the tokens travel in SaslAuthenticate requests
SASL_AUTHENTICATE_VERSION = 1


class AuthenticationRefused(Exception):
    def __init__(self, code: int, message: str | None) -> None:
        super().__init__(f"authentication refused (error {code}): {message}")
        self.code = code


class SaslSslConnection:
    def __init__(self, host: str, port: int, ca_path: str, user: str, password: str, *,
                 mechanism: str = "SCRAM-SHA-512", client_id: str = "hostile",
                 timeout_s: float = 15.0) -> None:
        self.host, self.port = host, port
        self.ca_path = ca_path
        self.user, self.password, self.mechanism = user, password, mechanism
        self.client_id = client_id
        self.timeout_s = timeout_s
        self.sock: ssl.SSLSocket | None = None
        self.conn = ClientConnection(client_id=client_id)

    def connect(self) -> SaslSslConnection:
        """TLS, then SASL; ``AuthenticationRefused`` when the broker says no."""
        context = ssl.create_default_context(cafile=self.ca_path)
        raw = socket.create_connection((self.host, self.port), timeout=self.timeout_s)
        try:
            self.sock = context.wrap_socket(raw, server_hostname=self.host)
            self._authenticate()
        except BaseException:
            self.close()
            raw.close()
            raise
        return self

    def _authenticate(self) -> None:
        handshake = self.call(API[ApiKey.SASL_HANDSHAKE].request.cls(
            mechanism=self.mechanism), SASL_HANDSHAKE_VERSION)
        if handshake.error_code:
            raise AuthenticationRefused(handshake.error_code,
                                        f"mechanisms {list(handshake.mechanisms)}")
        client = create_sasl_client(self.mechanism, self.user, self.password)
        token: bytes | None = client.evaluate_challenge(b"") if client.has_initial_response() \
            else b""
        while token is not None:
            reply = self.call(API[ApiKey.SASL_AUTHENTICATE].request.cls(auth_bytes=token),
                              SASL_AUTHENTICATE_VERSION)
            if reply.error_code:
                raise AuthenticationRefused(reply.error_code, reply.error_message)
            if client.is_complete():
                break
            token = client.evaluate_challenge(reply.auth_bytes or b"")
        if not client.is_complete():
            raise AuthenticationRefused(-1, "the mechanism did not complete")

    def call(self, body: Any, version: int) -> Any:
        """Send ``body`` at ``version`` and return the response body; ConnectionError
        when the broker closes the connection or does not answer in time."""
        if self.sock is None:
            raise ConnectionError("not connected")
        return exchange(self.sock, self.conn, body, version, self.timeout_s, ConnectionError)

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            finally:
                self.sock = None

    def __enter__(self) -> SaslSslConnection:
        return self.connect()

    def __exit__(self, *exc: object) -> None:
        self.close()
