"""The client half of one Kafka connection, sans-I/O (requests out, responses in).

Like ``millrace.protocol.ClientConnection`` -- framing, correlation ids, the header
versions, ApiVersions' v0 fallback -- with one difference Kafka's Java client shares:
bytes after a well-formed response body are ignored rather than fatal.  librdkafka's
mock cluster (2.16) appends a stray byte to every flexible Metadata response, and a
client must not drop its connection over data it does not need.  Built only from the
protocol package's public pieces.

Owned by the network thread.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from millrace.common.errors import ProtocolDecodeError
from millrace.protocol import NEED_DATA, Api, ApiKey, CorrelationError, FrameDecoder, Response
from millrace.protocol import primitives as p
from millrace.protocol.api import REQUEST_CLASS_TO_API
from millrace.protocol.framing import DEFAULT_MAX_FRAME, _NeedData
from millrace.protocol.headers import (
    RequestHeader,
    read_response_header,
    request_header_version,
    response_header_version,
    write_request_header,
)


class ClientConnection:
    def __init__(self, client_id: str | None = "millrace",
                 max_frame_size: int = DEFAULT_MAX_FRAME) -> None:
        self.client_id = client_id
        self._frames = FrameDecoder(max_frame_size)
        self._next_correlation_id = 0
        self._pending: deque[tuple[int, Api, int]] = deque()

    @property
    def in_flight(self) -> int:
        """Requests sent that still expect a response."""
        return len(self._pending)

    def send_request(self, body: Any, version: int, expect_response: bool = True
                     ) -> tuple[int, bytes]:
        """Encode ``body`` at ``version``; returns (correlation id, bytes to write)."""
        api = REQUEST_CLASS_TO_API[type(body)]
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF
        out = bytearray(b"\0\0\0\0")
        write_request_header(out, RequestHeader(api.key, version, correlation_id,
                                                self.client_id),
                             request_header_version(api.key, version))
        splices: list[tuple[int, Any]] = []
        api.request.encode_into(body, version, out, splices)
        if splices:
            raise TypeError("client requests carry bytes-like records only")
        out[0:4] = p.INT32.pack(len(out) - 4)
        if expect_response:
            self._pending.append((correlation_id, api, version))
        return correlation_id, bytes(out)

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        self._frames.receive_data(data)

    def next_event(self) -> Response | _NeedData:
        """The next decoded response, or ``NEED_DATA``.

        Raises ``CorrelationError`` for a response out of order (the connection is then
        unusable) and ``ProtocolDecodeError`` for a body that does not decode -- the
        frame is consumed, so the connection stays in step.
        """
        frame = self._frames.next_frame()
        if frame is NEED_DATA:
            return NEED_DATA
        assert isinstance(frame, bytes)
        if not self._pending:
            raise CorrelationError("received a response but no request is in flight")
        correlation_id, api, version = self._pending[0]
        got, pos = read_response_header(frame, response_header_version(api.key, version))
        if got != correlation_id:
            raise CorrelationError(
                f"expected the response to correlation id {correlation_id} "
                f"({api.name} v{version}) but got {got}")
        self._pending.popleft()
        try:
            body = api.response.decode(frame, version, pos, allow_trailing=True)
        except ProtocolDecodeError:
            if api.key != ApiKey.API_VERSIONS or version == 0:
                raise
            # A broker that does not know our version answers in the v0 layout.
            body = api.response.decode(frame, 0, pos, allow_trailing=True)
            version = 0
        return Response(correlation_id, api, version, body)
