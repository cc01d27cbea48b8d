"""TLS over the non-blocking ``Selector`` (Java ``SslTransportLayer``).

``SslSelector`` is the ``Selector`` of clients whose ``security.protocol`` is SSL or
SASL_SSL.  Each connection gets an ``ssl.SSLObject`` between two ``ssl.MemoryBIO``s
(``SSLContext.wrap_bio``): the object never touches the socket, the selector moves the
ciphertext, so TLS runs on the same ``selectors`` loop as everything else.

Theory of operation, per connection::

    TCP connecting --(writable, SO_ERROR 0)--> HANDSHAKING --(do_handshake done)--> connected
                                                   |  on readable: socket -> incoming BIO
                                                   |  after each step: outgoing BIO -> socket
                                                   +--(SSLError)--> closed, handshake failure

* Handshake: ``do_handshake`` is called again on every readiness event until it stops
  asking for data (``SSLWantReadError``); whatever it wrote to the outgoing BIO (the
  ClientHello, the client's Finished and certificate) is written to the socket, keeping
  the part the socket did not take for the next writable event.  ``server_hostname`` is
  the node's host, so a context with ``check_hostname`` (``ssl.endpoint.identification
  .algorithm=https``) verifies the certificate names it.  Only when the handshake is done
  does the channel count as connected: the ``NetworkClient`` sends ApiVersions then.
* Sending: queued request frames are encrypted (``SSLObject.write`` into the outgoing
  BIO) while less than ``_CIPHER_HIGH_WATER`` bytes of ciphertext wait for the socket; a
  request is reported in ``completed_sends`` once the last byte of its ciphertext has
  been written to the socket.
* Receiving: the socket is read until it has nothing more, everything goes into the
  incoming BIO, and ``SSLObject.read`` hands out whatever plaintext whole TLS records make
  (one ``completed_receives`` entry per event; a partial record waits in the BIO).
* Failures: an ``SSLError`` during the handshake -- or as the first thing the broker
  says after it (TLS 1.3 brokers reject a missing or bad client certificate only once
  the client has finished: "tlsv13 alert certificate required") -- closes the connection
  and is reported in ``handshake_failures`` as well as ``disconnected``; the
  ``NetworkClient`` turns it into an ``SslAuthenticationError`` and logs it once.  Other
  errors (a reset, EOF) are ordinary disconnects.
* Closing sends close_notify when the socket takes it at once (never waits).

Owned by the network thread, like the ``Selector``.
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import socket
import ssl
from collections import deque
from typing import Any, cast

from millrace.client._selector import _READ_CHUNK, Selector, _Channel

_CIPHER_HIGH_WATER = 512 * 1024  # stop encrypting while this much waits for the socket
_SSL_LOCATION = re.compile(r"\s*\(_ssl\.c:\d+\)$")


class _SslChannel(_Channel):
    __slots__ = ("cipher_out", "encrypted_total", "handshake_done", "incoming", "outgoing",
                 "received_plaintext", "sent_total", "ssl", "tcp_connected", "unsent_tokens")

    def __init__(self, node_id: int, sock: socket.socket, context: ssl.SSLContext,
                 host: str) -> None:
        super().__init__(node_id, sock)
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        self.ssl = context.wrap_bio(self.incoming, self.outgoing, server_side=False,
                                    server_hostname=host)
        self.tcp_connected = False
        self.handshake_done = False
        self.received_plaintext = False
        self.cipher_out = bytearray()  # ciphertext not yet taken by the socket
        self.encrypted_total = 0  # ciphertext bytes ever put in cipher_out
        self.sent_total = 0  # ... and written to the socket
        self.unsent_tokens: deque[tuple[int, Any]] = deque()  # (encrypted_total at end, token)


def describe_ssl_error(error: ssl.SSLError) -> str:
    """``certificate verify failed: Hostname mismatch, ...`` rather than OpenSSL's
    ``[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: ... (_ssl.c:1006)``."""
    if isinstance(error, ssl.SSLCertVerificationError) and error.verify_message:
        return f"certificate verify failed: {error.verify_message}"
    text = error.args[1] if len(error.args) > 1 and isinstance(error.args[1], str) \
        else str(error)
    text = _SSL_LOCATION.sub("", text)
    return re.sub(r"^\[SSL: [A-Z0-9_]+\] ", "", text) or str(error)


class SslSelector(Selector):
    def __init__(self, context: ssl.SSLContext, send_buffer_bytes: int = 131072,
                 receive_buffer_bytes: int = 32768) -> None:
        super().__init__(send_buffer_bytes, receive_buffer_bytes)
        self._context = context
        # node -> why its TLS handshake failed, for the disconnects of the last poll
        self.handshake_failures: dict[int, str] = {}

    def poll(self, timeout_ms: float) -> None:
        # keep failures found outside a poll (in connect) for the disconnects it reports
        self.handshake_failures = {n: r for n, r in self.handshake_failures.items()
                                   if n in self._early_disconnected}
        super().poll(timeout_ms)

    # ------------------------------------------------------------------ connecting
    def _new_channel(self, node_id: int, sock: socket.socket, host: str) -> _Channel:
        return _SslChannel(node_id, sock, self._context, host)

    def _connected_at_once(self, channel: _Channel) -> None:
        ch = cast(_SslChannel, channel)
        ch.tcp_connected = True
        self._handshake(ch)

    def _finish_connect(self, channel: _Channel, mask: int) -> None:
        ch = cast(_SslChannel, channel)
        if not ch.tcp_connected:
            if not mask & selectors.EVENT_WRITE:
                return
            err = ch.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                self._fail(ch, os.strerror(err).lower())
                return
            ch.tcp_connected = True
        else:
            if mask & selectors.EVENT_WRITE and not self._write_ciphertext(ch):
                return
            if mask & selectors.EVENT_READ:
                eof = self._receive_ciphertext(ch)
                if eof is None:
                    return
                if eof:
                    self._fail(ch, "connection closed by the peer during the TLS handshake")
                    return
        self._handshake(ch)

    def _handshake(self, ch: _SslChannel) -> None:
        try:
            ch.ssl.do_handshake()
            done = True
        except ssl.SSLWantReadError:
            done = False
        except ssl.SSLError as e:
            self._handshake_failed(ch, e)
            return
        self._take_outgoing(ch)
        if not self._write_ciphertext(ch):
            return
        if done:
            ch.handshake_done = True
            ch.connected = True
            self.connected.append(ch.node_id)
        self._update_interest(ch)

    def _handshake_failed(self, ch: _SslChannel, error: ssl.SSLError) -> None:
        # Let the broker see our alert (it logs why), if the socket takes it at once.
        with contextlib.suppress(OSError):
            alert = ch.outgoing.read()
            if alert:
                ch.sock.send(alert)
        reason = f"SSL handshake failed: {describe_ssl_error(error)}"
        node_id = ch.node_id
        self._fail(ch, reason)
        self.handshake_failures[node_id] = reason

    # ------------------------------------------------------------------ ciphertext I/O
    def _write_ciphertext(self, ch: _SslChannel) -> bool:
        """Write pending ciphertext; False if the connection failed (and is closed)."""
        out = ch.cipher_out
        if not out:
            return True
        try:
            sent = ch.sock.send(out)
        except BlockingIOError:
            return True
        except OSError as e:
            alert = self._pending_alert(ch)
            if alert is not None:  # the broker said why before it closed
                self._handshake_failed(ch, alert)
            else:
                self._fail(ch, f"send failed: {e}")
            return False
        del out[:sent]
        ch.sent_total += sent
        tokens = ch.unsent_tokens
        while tokens and tokens[0][0] <= ch.sent_total:
            self.completed_sends.append(tokens.popleft()[1])
        return True

    @staticmethod
    def _take_outgoing(ch: _SslChannel) -> None:
        data = ch.outgoing.read()
        ch.cipher_out += data
        ch.encrypted_total += len(data)

    def _pending_alert(self, ch: _SslChannel) -> ssl.SSLError | None:
        """After a failed write on a connection that never carried a response: the TLS
        alert the broker sent before closing (TLS 1.3: "certificate required"), if it is
        still in the socket."""
        if ch.received_plaintext:
            return None
        with contextlib.suppress(OSError):
            while data := ch.sock.recv(_READ_CHUNK):
                ch.incoming.write(data)
        try:
            ch.ssl.read(_READ_CHUNK)
        except ssl.SSLWantReadError:
            return None
        except ssl.SSLError as e:
            return e
        return None

    def _receive_ciphertext(self, ch: _SslChannel) -> bool | None:
        """Move what the socket has into the incoming BIO: True at EOF, None if the
        connection failed (and is closed)."""
        sock = ch.sock
        while True:
            try:
                data = sock.recv(_READ_CHUNK)
            except BlockingIOError:
                return False
            except OSError as e:
                alert = self._pending_alert(ch)
                if alert is not None:  # e.g. a reset right after the broker's alert
                    self._handshake_failed(ch, alert)
                else:
                    self._fail(ch, f"receive failed: {e}")
                return None
            if not data:
                return True
            ch.incoming.write(data)
            if len(data) < _READ_CHUNK:
                return False

    def _update_interest(self, ch: _SslChannel) -> None:
        if ch.cipher_out or (ch.connected and ch.queue):
            self._register(ch, selectors.EVENT_READ | selectors.EVENT_WRITE)
        else:
            self._register(ch, selectors.EVENT_READ)

    # ------------------------------------------------------------------ connected
    def _flush(self, channel: _Channel) -> None:
        ch = cast(_SslChannel, channel)
        queue = ch.queue
        while queue and len(ch.cipher_out) < _CIPHER_HIGH_WATER:
            view, token = queue.popleft()
            try:
                ch.ssl.write(view)
            except ssl.SSLError as e:
                self._fail(ch, f"TLS send failed: {describe_ssl_error(e)}")
                return
            self._take_outgoing(ch)
            ch.unsent_tokens.append((ch.encrypted_total, token))
        if not self._write_ciphertext(ch):
            return
        self._update_interest(ch)

    def _read(self, channel: _Channel) -> None:
        ch = cast(_SslChannel, channel)
        eof = self._receive_ciphertext(ch)
        if eof is None:
            return
        chunks: list[bytes] = []
        while True:
            try:
                data = ch.ssl.read(_READ_CHUNK)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:
                eof = True  # close_notify
                break
            except ssl.SSLError as e:
                if chunks:
                    self.completed_receives.append((ch.node_id, b"".join(chunks)))
                if not ch.received_plaintext:
                    # the broker's verdict on our certificate (TLS 1.3): a handshake failure
                    self._handshake_failed(ch, e)
                else:
                    self._fail(ch, f"TLS receive failed: {describe_ssl_error(e)}")
                return
            if not data:  # the peer's close_notify (SSLObject reads it as b"")
                eof = True
                break
            chunks.append(data)
        if chunks:
            ch.received_plaintext = True
            self.completed_receives.append(
                (ch.node_id, chunks[0] if len(chunks) == 1 else b"".join(chunks)))
        if ch.outgoing.pending:  # e.g. a KeyUpdate answer
            self._take_outgoing(ch)
            if not self._write_ciphertext(ch):
                return
            self._update_interest(ch)
        if eof:
            self._fail(ch, "connection closed by the peer")

    # ------------------------------------------------------------------ closing
    def close(self, node_id: int) -> None:
        channel = self._channels.get(node_id)
        if isinstance(channel, _SslChannel) and channel.handshake_done:
            with contextlib.suppress(ssl.SSLError, OSError, ValueError):
                with contextlib.suppress(ssl.SSLWantReadError):
                    channel.ssl.unwrap()  # queues close_notify; the peer's never comes here
                notify = channel.outgoing.read()
                if notify and not channel.cipher_out:
                    channel.sock.send(notify)
        super().close(node_id)
