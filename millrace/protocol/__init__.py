"""The Kafka wire protocol, sans-I/O: declarations, codec, headers, framing, connections.

Value classes are attributes of this package by message name::

    from millrace.protocol import MetadataRequest, ApiKey, API
    body = MetadataRequest(topics=None)
    data = API[ApiKey.METADATA].request.encode(body, version=12)
"""

from __future__ import annotations

from typing import Any

from millrace.protocol.api import API, CLASSES, Api, ApiKey, api_for
from millrace.protocol.connection import (
    ApiVersionsFallback,
    ClientConnection,
    CorrelationError,
    Request,
    RequestDecodeError,
    Response,
    ServerConnection,
    UnsupportedRequestError,
    api_versions_fallback_response,
)
from millrace.protocol.framing import NEED_DATA, FrameDecoder
from millrace.protocol.headers import RequestHeader
from millrace.protocol.struct import Struct

__all__ = [
    "API", "CLASSES", "NEED_DATA", "Api", "ApiKey", "ApiVersionsFallback", "ClientConnection",
    "CorrelationError", "FrameDecoder", "Request", "RequestDecodeError", "RequestHeader",
    "Response", "ServerConnection", "Struct", "UnsupportedRequestError", "api_for",
    "api_versions_fallback_response",
]


def __getattr__(name: str) -> Any:
    try:
        return CLASSES[name]
    except KeyError:
        raise AttributeError(f"module 'millrace.protocol' has no attribute {name!r}") from None
