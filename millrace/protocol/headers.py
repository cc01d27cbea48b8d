"""Request and response headers, and which header version each message uses.

Layouts (after the int32 size prefix):

    request header v0: api_key int16, api_version int16, correlation_id int32
    request header v1: v0 + client_id NULLABLE_STRING (int16 length, even in v2)
    request header v2: v1 + tagged fields
    response header v0: correlation_id int32
    response header v1: v0 + tagged fields

A request in one of its API's flexible versions uses request header v2 and response
header v1, otherwise v1 / v0.  ApiVersions responses always use response header v0
(KIP-511) so that a client can read the error of a version it did not expect.
The one exception on the request side: ControlledShutdown v0 is sent with request
header v0, which has no client id (Kafka's generated ``ApiMessageType`` makes the same
exception); a server reading a frame of it must not take body bytes for a client id.
"""

from __future__ import annotations

from dataclasses import dataclass

from millrace.common.errors import ProtocolDecodeError
from millrace.protocol import primitives as p
from millrace.protocol.api import API, ApiKey


@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None


def request_header_version(api_key: int, api_version: int) -> int:
    if api_key == ApiKey.CONTROLLED_SHUTDOWN and api_version == 0:
        return 0
    api = API.get(api_key)
    if api is not None and api.is_flexible(api_version):
        return 2
    return 1


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == ApiKey.API_VERSIONS:
        return 0
    api = API.get(api_key)
    return 1 if api is not None and api.is_flexible(api_version) else 0


def write_request_header(out: bytearray, header: RequestHeader, version: int) -> None:
    out += p.INT16.pack(header.api_key)
    out += p.INT16.pack(header.api_version)
    out += p.INT32.pack(header.correlation_id)
    if version >= 1:
        p.write_nullable_string(out, header.client_id)
    if version >= 2:
        out.append(0)  # no tagged fields


def read_request_header(buf: p.Buf, known_version: int | None = None
                        ) -> tuple[RequestHeader, int]:
    """Decode a request header; returns (header, position of the body).

    The header version follows from the api key and version read first; pass
    ``known_version`` to force one (e.g. 1 to read only the common prefix of a request
    whose version we do not support).
    """
    if len(buf) < 8:
        raise ProtocolDecodeError(f"request header needs 8 bytes, frame has {len(buf)}")
    api_key, api_version, correlation_id = _HEAD.unpack_from(buf, 0)
    version = known_version if known_version is not None else (
        request_header_version(api_key, api_version))
    pos = 8
    client_id = None
    try:
        if version >= 1:
            client_id, pos = p.read_nullable_string(buf, pos)
        if version >= 2:
            n, pos = p.read_uvarint(buf, pos)
            for _ in range(n):
                _, _, pos = p.skip_tagged_field(buf, pos)
    except ProtocolDecodeError as e:
        raise ProtocolDecodeError(f"request header: {e}") from None
    except Exception as e:  # struct.error on a short buffer
        raise ProtocolDecodeError(f"request header truncated ({e})") from None
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos


_HEAD = p.struct.Struct(">hhi")


def write_response_header(out: bytearray, correlation_id: int, version: int) -> None:
    out += p.INT32.pack(correlation_id)
    if version >= 1:
        out.append(0)


def read_response_header(buf: p.Buf, version: int) -> tuple[int, int]:
    """Returns (correlation_id, position of the body)."""
    if len(buf) < 4:
        raise ProtocolDecodeError(f"response header needs 4 bytes, frame has {len(buf)}")
    correlation_id = p.INT32.unpack_from(buf, 0)[0]
    pos = 4
    if version >= 1:
        try:
            n, pos = p.read_uvarint(buf, pos)
            for _ in range(n):
                _, _, pos = p.skip_tagged_field(buf, pos)
        except ProtocolDecodeError as e:
            raise ProtocolDecodeError(f"response header: {e}") from None
    return correlation_id, pos
