"""``RawConnection``: one socket to a broker, one request at a time, millrace's sans-I/O
protocol codec on top -- for tests that must send exact requests (a chosen API version,
a hand-built batch, an EndTxn held back) where a client library would decide for them."""

from __future__ import annotations

import socket
import time
from typing import Any

from millrace.protocol import NEED_DATA, ClientConnection, Response


class RawConnection:
    def __init__(self, port: int, *, host: str = "127.0.0.1", client_id: str = "raw-test",
                 timeout_s: float = 15.0) -> None:
        self.timeout_s = timeout_s
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.conn = ClientConnection(client_id=client_id)

    def call(self, body: Any, version: int) -> Any:
        """Send ``body`` at ``version`` and return the response body."""
        _, data = self.conn.send_request(body, version)
        self.sock.sendall(data)
        deadline = time.monotonic() + self.timeout_s
        while True:
            event = self.conn.next_event()
            if event is not NEED_DATA:
                if not isinstance(event, Response):
                    raise AssertionError(f"unexpected event {event!r}")
                return event.body
            if time.monotonic() >= deadline:
                raise AssertionError(f"no response within {self.timeout_s} s")
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise AssertionError("connection closed")
            self.conn.receive_data(chunk)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
