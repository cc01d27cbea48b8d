"""Sans-I/O Kafka connections: bytes in, events out; events in, bytes out.

``ClientConnection`` is what a client's network layer wraps around a socket: it frames
and numbers requests (correlation ids), remembers what it is waiting for, and turns
response bytes back into decoded ``Response`` events, checking that each response's
correlation id is the next one expected (Kafka answers in order on one connection).

``ServerConnection`` is the broker's: it turns request bytes into ``Request`` events
(header + decoded body) and encodes responses with the right header version.  A
request the broker cannot serve becomes a specific event or error, never a crash:

* unknown api key, or a version outside the broker's enabled range (any API but
  ApiVersions): ``UnsupportedRequestError``; the broker closes the connection, as Kafka
  does;
* ApiVersions at a version above the broker's: an ``ApiVersionsFallback`` event; answer
  it with ``api_versions_fallback_response`` (v0 body, v0 header, UNSUPPORTED_VERSION);
* a body that does not decode: ``ProtocolDecodeError`` carrying the correlation id.
  Bytes *after* a complete body are ignored, as Kafka's broker ignores them.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from millrace.common.errors import Errors, ProtocolDecodeError
from millrace.protocol import primitives as p
from millrace.protocol.api import API, REQUEST_CLASS_TO_API, Api, ApiKey
from millrace.protocol.codec import chunks_from
from millrace.protocol.framing import (
    DEFAULT_MAX_FRAME,
    NEED_DATA,
    FrameDecoder,
    FrameReader,
    _NeedData,
)
from millrace.protocol.headers import (
    RequestHeader,
    read_request_header,
    read_response_header,
    request_header_version,
    response_header_version,
    write_request_header,
    write_response_header,
)


@dataclass(slots=True)
class Request:
    header: RequestHeader
    api: Api
    body: Any

    @property
    def version(self) -> int:
        return self.header.api_version

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id


@dataclass(slots=True)
class ApiVersionsFallback:
    """An ApiVersions request at a version the broker does not know."""

    header: RequestHeader


@dataclass(slots=True)
class Response:
    correlation_id: int
    api: Api
    version: int
    body: Any


class UnsupportedRequestError(ProtocolDecodeError):
    """Unknown api key or a disabled version: Kafka closes the connection."""

    def __init__(self, message: str, header: RequestHeader) -> None:
        super().__init__(message)
        self.header = header


class RequestDecodeError(ProtocolDecodeError):
    """The body of a request did not decode; ``header`` says which request it was."""

    def __init__(self, message: str, header: RequestHeader) -> None:
        super().__init__(message)
        self.header = header


class CorrelationError(ProtocolDecodeError):
    """A response arrived whose correlation id is not the one expected next."""


def _frame_parts(head: bytearray, out: bytearray, splices: list[tuple[int, Any]]) -> list[Any]:
    size = len(head) + len(out) + sum(len(r) for _, r in splices)
    first = bytearray(p.INT32.pack(size))
    first += head
    parts = chunks_from(out, splices)
    if parts and isinstance(parts[0], bytes):
        first += parts[0]
        parts = parts[1:]
    return [bytes(first), *parts]


class ClientConnection:
    """The client half: ``send_request`` -> bytes; ``receive_data`` + ``next_event``.

    ``allow_trailing`` ignores bytes after a well-formed response body, as Kafka's Java
    client does (librdkafka's mock cluster appends a stray byte to flexible Metadata
    responses); by default they are an error, which is what a codec test wants.
    """

    def __init__(self, client_id: str | None = "millrace",
                 max_frame_size: int = DEFAULT_MAX_FRAME, allow_trailing: bool = False) -> None:
        self.client_id = client_id
        self.allow_trailing = allow_trailing
        self._frames = FrameDecoder(max_frame_size)
        self._next_correlation_id = 0
        self._pending: deque[tuple[int, Api, int]] = deque()

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    def send_request(self, body: Any, version: int, expect_response: bool = True
                     ) -> tuple[int, bytes]:
        """Encode ``body`` at ``version``; returns (correlation_id, bytes to write)."""
        api = REQUEST_CLASS_TO_API[type(body)]
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF
        header = RequestHeader(api.key, version, correlation_id, self.client_id)
        out = bytearray(b"\0\0\0\0")
        write_request_header(out, header, request_header_version(api.key, version))
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
        frame = self._frames.next_frame()
        if frame is NEED_DATA:
            return NEED_DATA
        assert isinstance(frame, bytes)
        return self.decode_response(frame)

    @property
    def max_frame_size(self) -> int:
        return self._frames.max_frame_size

    @property
    def buffered(self) -> int:
        """Bytes received and not yet part of a whole frame."""
        return self._frames.buffered

    def decode_response(self, frame: bytes | memoryview) -> Response:
        """One whole response frame (read by the caller, without its size prefix) -> the
        response to the oldest request in flight.  From a ``memoryview`` the ``records``
        come out as views of it (a follower appends them uncopied)."""
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
            body = api.response.decode(frame, version, pos, self.allow_trailing)
        except ProtocolDecodeError:
            if api.key != ApiKey.API_VERSIONS or version == 0:
                raise
            # A broker that does not know our version answers in the v0 layout.
            body = api.response.decode(frame, 0, pos, self.allow_trailing)
            version = 0
        return Response(correlation_id, api, version, body)


class ServerConnection:
    """The broker half: ``receive_data`` + ``next_event`` -> requests; responses -> bytes.

    ``enabled`` maps api key -> (min, max) version the broker serves; requests outside
    it are refused as Kafka refuses them.
    """

    def __init__(self, enabled: dict[int, tuple[int, int]] | None = None,
                 max_frame_size: int = DEFAULT_MAX_FRAME) -> None:
        self.enabled = enabled if enabled is not None else {
            k: (a.versions.low, a.versions.high) for k, a in API.items()}
        self._frames = FrameReader(max_frame_size)

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        self._frames.receive_data(data)

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        """Where the next read goes (``asyncio.BufferedProtocol``): no copy on the way in."""
        return self._frames.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        self._frames.buffer_updated(nbytes)

    def trim(self) -> None:
        """Give the receive buffers back while the connection is idle."""
        self._frames.trim()

    @property
    def max_frame_size(self) -> int:
        return self._frames.max_frame_size

    @max_frame_size.setter
    def max_frame_size(self, size: int) -> None:
        """Change the limit for frames not yet begun (SASL bounds frames by
        ``sasl.server.max.receive.size`` until authentication completes)."""
        self._frames.max_frame_size = size

    def next_frame(self) -> memoryview | _NeedData:
        """The next whole frame, undecoded: SASL v0 tokens are raw frames, and a broker
        authenticating a connection decides how to read each frame only when it gets to
        it.  A view of the receive buffer (``FrameReader``)."""
        return self._frames.next_frame()

    def next_event(self) -> Request | ApiVersionsFallback | _NeedData:
        frame = self._frames.next_frame()
        if frame is NEED_DATA:
            return NEED_DATA
        assert isinstance(frame, memoryview)
        return self.decode_request(frame)

    def decode_request(self, frame: bytes | memoryview) -> Request | ApiVersionsFallback:
        """One frame (as ``next_frame`` gave it) -> a request event, with the errors of
        ``next_event``.  Decoded from a ``memoryview``, a request's ``records`` are views
        of the frame (Produce's record batches reach the log without a copy); every other
        field is copied out into its own object."""
        # Read the version-independent prefix first: it decides everything else.
        prefix, _ = read_request_header(frame, known_version=0)
        api = API.get(prefix.api_key)
        enabled = self.enabled.get(prefix.api_key)
        # Past the prefix, an unserved request is read only up to its client id (header
        # v1, or v0 for ControlledShutdown v0): enough to answer it.
        common = min(1, request_header_version(prefix.api_key, prefix.api_version))
        if api is None or enabled is None:
            header, _ = read_request_header(frame, known_version=common)
            raise UnsupportedRequestError(f"unknown api key {prefix.api_key}", header)
        low, high = enabled
        if not low <= prefix.api_version <= high or prefix.api_version not in api.versions:
            header, _ = read_request_header(frame, known_version=common)
            if api.key == ApiKey.API_VERSIONS and prefix.api_version > high:
                return ApiVersionsFallback(header)
            raise UnsupportedRequestError(
                f"{api.name} v{prefix.api_version} is not supported (enabled: {low}-{high})",
                header)
        header, pos = read_request_header(frame)
        try:
            # Like Kafka's broker, ignore bytes after a well-formed body: librdkafka 2.x
            # sends three extra bytes after a Metadata v13 request for all topics.
            body = api.request.decode(frame, header.api_version, pos, allow_trailing=True)
        except ProtocolDecodeError as e:
            raise RequestDecodeError(str(e), header) from None
        return Request(header, api, body)

    @staticmethod
    def encode_response(request: Request, body: Any) -> bytes:
        parts = ServerConnection.encode_response_chunks(request, body)
        if len(parts) != 1:
            raise TypeError("response holds file regions; use encode_response_chunks")
        result: bytes = parts[0]
        return result

    @staticmethod
    def encode_response_chunks(request: Request, body: Any) -> list[Any]:
        """Frame a response: [bytes, region, bytes, ...] (regions for zero-copy sends)."""
        head = bytearray()
        write_response_header(head, request.correlation_id,
                              response_header_version(request.api.key, request.version))
        out = bytearray()
        splices: list[tuple[int, Any]] = []
        request.api.response.encode_into(body, request.version, out, splices)
        return _frame_parts(head, out, splices)


def api_versions_fallback_response(correlation_id: int, max_version: int) -> bytes:
    """Kafka's answer to an ApiVersions version it does not know.

    v0 header, v0 body: error UNSUPPORTED_VERSION and a single entry for ApiVersions
    itself with our maximum, so the client retries with that version.
    """
    body = bytearray()
    body += p.INT32.pack(correlation_id)
    body += p.INT16.pack(Errors.UNSUPPORTED_VERSION)
    body += p.INT32.pack(1)
    body += p.INT16.pack(ApiKey.API_VERSIONS) + p.INT16.pack(0) + p.INT16.pack(max_version)
    return p.INT32.pack(len(body)) + bytes(body)
