"""``RawConnection``: one socket to a broker, one request at a time, millrace's sans-I/O
protocol codec on top -- for tests that must send exact requests (a chosen API version,
a hand-built batch, an EndTxn held back) where a client library would decide for them."""

from __future__ import annotations

import socket
import time
from typing import Any

from millrace.protocol import NEED_DATA, ClientConnection, Response


def exchange(sock: socket.socket, conn: ClientConnection, body: Any, version: int,
             timeout_s: float, failure: type[Exception] = AssertionError) -> Any:
    """Send ``body`` at ``version`` over ``sock`` and return the response body; ``failure``
    (a test's AssertionError, a harness's ConnectionError) when the broker answers
    something else, closes the connection or does not answer within ``timeout_s``."""
    _, data = conn.send_request(body, version)
    sock.sendall(data)
    deadline = time.monotonic() + timeout_s
    while True:
        event = conn.next_event()
        if event is not NEED_DATA:
            if not isinstance(event, Response):
                raise failure(f"unexpected event {event!r}")
            return event.body
        if time.monotonic() >= deadline:
            raise failure(f"no response within {timeout_s} s")
        chunk = sock.recv(1 << 20)
        if not chunk:
            raise failure("connection closed by the broker")
        conn.receive_data(chunk)


class RawConnection:
    def __init__(self, port: int, *, host: str = "127.0.0.1", client_id: str = "raw-test",
                 timeout_s: float = 15.0) -> None:
        self.timeout_s = timeout_s
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.conn = ClientConnection(client_id=client_id)

    def call(self, body: Any, version: int) -> Any:
        """Send ``body`` at ``version`` and return the response body."""
        return exchange(self.sock, self.conn, body, version, self.timeout_s)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
