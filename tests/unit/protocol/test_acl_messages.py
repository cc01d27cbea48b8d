"""The ACL admin APIs (DescribeAcls 29, CreateAcls 30, DeleteAcls 31) byte for byte where
their versions differ: v0 has no pattern type (the broker reads LITERAL, 3), v1 adds it,
v2 is the first flexible version.  The installed JSON starts at v1 (Kafka 4.0 dropped
v0), so v0 is held here as well as by the field comparison in ``test_schemas``.  The
expected bytes are written by hand from Kafka 3.9's field order, never with our codec.
"""

from __future__ import annotations

import struct

import pytest

from millrace.protocol import API, ApiKey
from millrace.protocol.types import (
    CreateAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
)

LITERAL, PREFIXED = 3, 4
NO_TAGS = b"\x00"


def s16(text: str | None) -> bytes:
    return struct.pack(">h", -1) if text is None else \
        struct.pack(">h", len(text)) + text.encode()


def compact(text: str | None) -> bytes:
    return b"\x00" if text is None else bytes([len(text) + 1]) + text.encode()


def i8(*values: int) -> bytes:
    return struct.pack(f">{len(values)}b", *values)


DESCRIBE = DescribeAclsRequest(resource_type_filter=2, resource_name_filter="orders",
                               pattern_type_filter=PREFIXED, principal_filter=None,
                               host_filter="*", operation=3, permission_type=3)


def test_describe_acls_v0_has_no_pattern_type_and_decodes_as_literal() -> None:
    codec = API[ApiKey.DESCRIBE_ACLS].request
    data = codec.encode(DESCRIBE, 0)
    assert data == i8(2) + s16("orders") + s16(None) + s16("*") + i8(3, 3)
    assert codec.decode(data, 0).pattern_type_filter == LITERAL


def test_describe_acls_v1_carries_the_pattern_type_and_v2_is_flexible() -> None:
    codec = API[ApiKey.DESCRIBE_ACLS].request
    assert codec.encode(DESCRIBE, 1) == \
        i8(2) + s16("orders") + i8(PREFIXED) + s16(None) + s16("*") + i8(3, 3)
    assert codec.encode(DESCRIBE, 2) == \
        i8(2) + compact("orders") + i8(PREFIXED) + compact(None) + compact("*") + \
        i8(3, 3) + NO_TAGS


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_create_acls_request_layout(version: int) -> None:
    c = CreateAclsRequest.AclCreation(resource_type=2, resource_name="t",
                                      resource_pattern_type=LITERAL, principal="User:a",
                                      host="*", operation=4, permission_type=3)
    codec = API[ApiKey.CREATE_ACLS].request
    pattern = i8(LITERAL) if version >= 1 else b""
    if version < 2:
        expected = struct.pack(">i", 1) + i8(2) + s16("t") + pattern + s16("User:a") + \
            s16("*") + i8(4, 3)
    else:
        expected = b"\x02" + i8(2) + compact("t") + pattern + compact("User:a") + \
            compact("*") + i8(4, 3) + NO_TAGS + NO_TAGS
    assert codec.encode(CreateAclsRequest(creations=[c]), version) == expected


def test_delete_acls_response_v1_layout() -> None:
    cls = DeleteAclsResponse
    body = cls(throttle_time_ms=5, filter_results=[cls.DeleteAclsFilterResult(
        error_code=54, error_message="No Authorizer is configured.", matching_acls=[])])
    assert API[ApiKey.DELETE_ACLS].response.encode(body, 1) == \
        struct.pack(">iihh", 5, 1, 54, len("No Authorizer is configured.")) + \
        b"No Authorizer is configured." + struct.pack(">i", 0)
