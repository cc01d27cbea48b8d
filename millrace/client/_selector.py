"""Non-blocking TCP sockets multiplexed with ``selectors`` (Java ``Selector``/``KafkaChannel``).

The selector moves bytes and nothing else: ``connect`` starts a non-blocking connect,
``send`` queues one framed request, ``poll`` writes every connection's queue with one
``sendmsg`` (several requests, one system call), waits for readiness and collects what
happened -- connections completed, sends
finished, bytes received, connections lost -- into lists the ``NetworkClient`` reads
after each poll.  Framing, correlation and decoding happen above, in the sans-I/O
``ClientConnection``.

A socketpair is registered too, so another thread can ``wakeup()`` a blocked ``poll``
(the producer does this when a batch becomes sendable).

This class is the PLAINTEXT transport, and its loop is the benchmarked hot path: TLS
lives in the subclass ``SslSelector`` (``_ssl_selector``), which overrides the channel
hooks (``_new_channel``, ``_connected_at_once``, ``_finish_connect``, ``_read``,
``_flush``, ``close``) instead of adding branches here.  A channel counts as
``connected`` -- reported in ``connected``, able to ``send`` -- once it can carry
requests: after the TCP connect here, after the TLS handshake there.

Owned by the network thread, except ``wakeup`` which any thread may call.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import logging
import os
import selectors
import socket
from collections import deque
from typing import Any

log = logging.getLogger(__name__)

_IN_PROGRESS = {errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EAGAIN, errno.EALREADY}
_READ_CHUNK = 256 * 1024
_MAX_IOV = 64  # buffers per sendmsg (far below any system's IOV_MAX)


class _Channel:
    __slots__ = ("connected", "events", "node_id", "queue", "sock")

    def __init__(self, node_id: int, sock: socket.socket) -> None:
        self.node_id = node_id
        self.sock = sock
        self.connected = False
        self.queue: deque[tuple[memoryview, Any]] = deque()
        self.events = 0


class Selector:
    def __init__(self, send_buffer_bytes: int = 131072, receive_buffer_bytes: int = 32768
                 ) -> None:
        self._sel = selectors.DefaultSelector()
        self._send_buffer = send_buffer_bytes
        self._receive_buffer = receive_buffer_bytes
        self._channels: dict[int, _Channel] = {}
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._sel.register(self._wake_r, selectors.EVENT_READ, None)
        self._wakeup_pending = False
        # results of the last poll (and of sends since), read by the NetworkClient
        self.completed_sends: list[Any] = []
        self.completed_receives: list[tuple[int, bytes]] = []
        self.connected: list[int] = []
        self.disconnected: dict[int, str] = {}
        self._early_connected: list[int] = []
        self._dirty: set[_Channel] = set()  # channels with queued, unwritten requests
        self._early_disconnected: dict[int, str] = {}

    # ------------------------------------------------------------------ channels
    def connect(self, node_id: int, host: str, port: int) -> None:
        """Start connecting; raises OSError when that fails at once (e.g. DNS)."""
        if node_id in self._channels:
            raise ValueError(f"there is already a connection for node {node_id}")
        family, type_, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, type_, proto)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._send_buffer > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._send_buffer)
            if self._receive_buffer > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._receive_buffer)
            err = sock.connect_ex(address)
        except OSError:
            sock.close()
            raise
        if err != 0 and err not in _IN_PROGRESS:
            sock.close()
            raise OSError(err, os.strerror(err).lower())
        channel = self._new_channel(node_id, sock, host)
        self._channels[node_id] = channel
        if err == 0:
            self._connected_at_once(channel)
        else:
            self._register(channel, selectors.EVENT_WRITE)

    def register_connected(self, node_id: int, sock: socket.socket, host: str) -> None:
        """Adopt a socket that is already connected (Java ``Selector.register``), e.g. one
        end of a socketpair in a test; ``host`` is the name its peer is known by.  It is
        reported in ``connected`` by the next ``poll`` (with TLS: after the handshake)."""
        if node_id in self._channels:
            raise ValueError(f"there is already a connection for node {node_id}")
        sock.setblocking(False)
        channel = self._new_channel(node_id, sock, host)
        self._channels[node_id] = channel
        self._connected_at_once(channel)

    def _new_channel(self, node_id: int, sock: socket.socket, host: str) -> _Channel:
        """The channel of a new connection (``SslSelector`` makes TLS ones)."""
        return _Channel(node_id, sock)

    def _connected_at_once(self, channel: _Channel) -> None:
        """``connect_ex`` succeeded without waiting (a local peer)."""
        channel.connected = True
        self._early_connected.append(channel.node_id)
        self._register(channel, selectors.EVENT_READ)

    def _register(self, channel: _Channel, events: int) -> None:
        if channel.events == events:
            return
        if channel.events == 0:
            self._sel.register(channel.sock, events, channel)
        else:
            self._sel.modify(channel.sock, events, channel)
        channel.events = events

    def is_connected(self, node_id: int) -> bool:
        channel = self._channels.get(node_id)
        return channel is not None and channel.connected

    def has_channel(self, node_id: int) -> bool:
        return node_id in self._channels

    def close(self, node_id: int) -> None:
        """Close a connection quietly (no disconnect is reported)."""
        channel = self._channels.pop(node_id, None)
        self._early_disconnected.pop(node_id, None)
        if channel is None:
            return
        self._dirty.discard(channel)
        if channel.events:
            self._sel.unregister(channel.sock)
        channel.sock.close()
        channel.queue.clear()

    def _fail(self, channel: _Channel, reason: str) -> None:
        self.close(channel.node_id)
        self._early_disconnected[channel.node_id] = reason

    # ------------------------------------------------------------------ sending
    def send(self, node_id: int, data: bytes, token: Any) -> bool:
        """Queue ``data`` for ``node_id``; it is written by the next ``poll``, together with
        everything else queued for that connection (one ``sendmsg`` for many requests).
        ``token`` is reported in ``completed_sends`` once written.  Returns False (kept
        for callers that handle an immediate write)."""
        channel = self._channels.get(node_id)
        if channel is None or not channel.connected:
            raise ValueError(f"node {node_id} is not connected")
        channel.queue.append((memoryview(data), token))
        self._dirty.add(channel)
        return False

    def _flush(self, channel: _Channel) -> None:
        """Write as much of the queue as the socket takes, in one system call."""
        queue = channel.queue
        if queue:
            buffers = [view for view, _ in itertools.islice(queue, _MAX_IOV)]
            try:
                sent = channel.sock.sendmsg(buffers) if len(buffers) > 1 else \
                    channel.sock.send(buffers[0])
            except BlockingIOError:
                sent = 0
            except OSError as e:
                self._fail(channel, f"send failed: {e}")
                return
            while queue and sent:
                view, token = queue[0]
                if sent < len(view):
                    queue[0] = (view[sent:], token)
                    break
                sent -= len(view)
                queue.popleft()
                self.completed_sends.append(token)
        if queue:
            self._register(channel, selectors.EVENT_READ | selectors.EVENT_WRITE)
        else:
            self._register(channel, selectors.EVENT_READ)

    # ------------------------------------------------------------------ polling
    def wakeup(self) -> None:
        if self._wakeup_pending:
            return
        self._wakeup_pending = True
        with contextlib.suppress(OSError):  # full (a wakeup is pending anyway) or closed
            self._wake_w.send(b"\0")

    def poll(self, timeout_ms: float) -> None:
        self.completed_sends = []
        self.completed_receives = []
        self.connected, self._early_connected = self._early_connected, []
        self.disconnected, self._early_disconnected = self._early_disconnected, {}
        if self._dirty:
            dirty, self._dirty = self._dirty, set()
            for channel in dirty:
                if self._channels.get(channel.node_id) is channel:
                    self._flush(channel)
        if self.connected or self.disconnected or self.completed_sends or \
                self._early_disconnected:
            timeout_ms = 0
        events = self._sel.select(max(timeout_ms, 0) / 1000.0)
        for key, mask in events:
            channel = key.data
            if channel is None:
                self._drain_wakeup()
                continue
            if channel.node_id not in self._channels:
                continue  # closed while handling an earlier event
            if not channel.connected:
                self._finish_connect(channel, mask)
                continue
            if mask & selectors.EVENT_READ:
                self._read(channel)
            if mask & selectors.EVENT_WRITE and channel.node_id in self._channels:
                self._flush(channel)
        if self._early_disconnected:
            self.disconnected.update(self._early_disconnected)
            self._early_disconnected = {}

    def _drain_wakeup(self) -> None:
        # Drain first, then clear: a wakeup() that finds the flag still set while we are
        # here skips its write, which is safe because this thread is awake and looks at
        # everything again before it next sleeps.  (Clearing first could leave the flag
        # set with no byte pending, and every later wakeup would be lost.)
        with contextlib.suppress(OSError):
            while self._wake_r.recv(4096):
                pass
        self._wakeup_pending = False

    def _finish_connect(self, channel: _Channel, mask: int) -> None:
        """An event on a connection that is not usable yet (here: the TCP connect)."""
        if not mask & selectors.EVENT_WRITE:
            return
        err = channel.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            self._fail(channel, os.strerror(err).lower())
            return
        channel.connected = True
        self.connected.append(channel.node_id)
        events = selectors.EVENT_READ
        if channel.queue:
            events |= selectors.EVENT_WRITE
        self._register(channel, events)

    def _read(self, channel: _Channel) -> None:
        sock = channel.sock
        while True:
            try:
                data = sock.recv(_READ_CHUNK)
            except BlockingIOError:
                return
            except OSError as e:
                self._fail(channel, f"receive failed: {e}")
                return
            if not data:
                self._fail(channel, "connection closed by the peer")
                return
            self.completed_receives.append((channel.node_id, data))
            if len(data) < _READ_CHUNK:
                return

    def close_all(self) -> None:
        for node_id in list(self._channels):
            self.close(node_id)
        self._sel.unregister(self._wake_r)
        self._sel.close()
        self._wake_r.close()
        self._wake_w.close()
