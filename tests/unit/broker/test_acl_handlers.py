"""DescribeAcls, CreateAcls and DeleteAcls through the handlers of one in-process node
without an authorizer (Kafka's ``AclApis`` with ``authorizer = None``): SECURITY_DISABLED
in every error slot of every version, with Kafka 3.9's messages; the request is read
first as Kafka parses it (v0 is LITERAL; an UNKNOWN element fails the request, which
closes the connection)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from millrace.broker.handlers.acls import (
    NO_AUTHORIZER_ALTER,
    NO_AUTHORIZER_DESCRIBE,
    acl_binding_filter,
)
from millrace.common.errors import Errors, InvalidRequestError
from millrace.protocol import (
    API,
    ApiKey,
    CreateAclsRequest,
    DeleteAclsRequest,
    DescribeAclsRequest,
)
from millrace.security.acl import (
    AccessControlEntryFilter,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePatternFilter,
    ResourceType,
)
from tests.unit.broker.brokergen import Broker

DESCRIBE, CREATE, DELETE = ApiKey.DESCRIBE_ACLS, ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS
VERSIONS = [0, 1, 2, 3]
SECURITY_DISABLED = Errors.SECURITY_DISABLED
TOPIC, GROUP, CLUSTER = 2, 3, 4
READ, WRITE, ALTER, ANY = 3, 4, 7, 1
ALLOW, DENY = 3, 2
LITERAL, PREFIXED, MATCH = 3, 4, 2


def describe_req(resource_type: int = ANY, name: str | None = None, pattern: int = ANY,
                 operation: int = ANY, permission: int = ANY) -> Any:
    return DescribeAclsRequest(resource_type_filter=resource_type, resource_name_filter=name,
                               pattern_type_filter=pattern, principal_filter=None,
                               host_filter=None, operation=operation,
                               permission_type=permission)


def creation(resource_type: int = TOPIC, name: str = "orders", pattern: int = LITERAL,
             operation: int = READ, permission: int = ALLOW) -> Any:
    return CreateAclsRequest.AclCreation(
        resource_type=resource_type, resource_name=name, resource_pattern_type=pattern,
        principal="User:alice", host="*", operation=operation, permission_type=permission)


def delete_filter(resource_type: int = ANY, name: str | None = None, pattern: int = ANY,
                  operation: int = ANY) -> Any:
    return DeleteAclsRequest.DeleteAclsFilter(
        resource_type_filter=resource_type, resource_name_filter=name,
        pattern_type_filter=pattern, principal_filter="User:alice", host_filter=None,
        operation=operation, permission_type=ANY)


def call(broker: Broker, key: int, version: int, body: Any) -> Any:
    return asyncio.run(broker.call(key, version, body))


# ---------------------------------------------------------------------- no authorizer
@pytest.mark.parametrize("version", VERSIONS)
def test_describe_answers_security_disabled(broker: Broker, version: int) -> None:
    got = call(broker, DESCRIBE, version, describe_req(TOPIC, "orders", LITERAL))
    assert (got.error_code, got.error_message, got.resources) == (
        SECURITY_DISABLED, "No Authorizer is configured on the broker", [])
    assert NO_AUTHORIZER_DESCRIBE == "No Authorizer is configured on the broker"


@pytest.mark.parametrize("version", VERSIONS)
def test_create_answers_security_disabled_for_each_creation(broker: Broker,
                                                            version: int) -> None:
    body = CreateAclsRequest(creations=[
        creation(), creation(GROUP, "g", operation=READ, permission=DENY),
        creation(CLUSTER, "kafka-cluster", operation=ALTER)])
    got = call(broker, CREATE, version, body)
    assert [(r.error_code, r.error_message) for r in got.results] == \
        [(SECURITY_DISABLED, "No Authorizer is configured.")] * 3
    assert NO_AUTHORIZER_ALTER == "No Authorizer is configured."
    # bindings Kafka's authorizer would refuse are not judged without one
    got = call(broker, CREATE, version, CreateAclsRequest(creations=[
        creation(CLUSTER, "not-the-cluster"), creation(name="")]))
    assert [r.error_code for r in got.results] == [SECURITY_DISABLED] * 2


@pytest.mark.parametrize("version", VERSIONS)
def test_delete_answers_security_disabled_for_each_filter(broker: Broker,
                                                          version: int) -> None:
    body = DeleteAclsRequest(filters=[delete_filter(), delete_filter(TOPIC, "orders")])
    got = call(broker, DELETE, version, body)
    assert [(r.error_code, r.error_message, r.matching_acls) for r in got.filter_results] \
        == [(SECURITY_DISABLED, "No Authorizer is configured.", [])] * 2


def test_empty_requests_get_empty_results(broker: Broker) -> None:
    assert call(broker, CREATE, 3, CreateAclsRequest(creations=[])).results == []
    assert call(broker, DELETE, 3, DeleteAclsRequest(filters=[])).filter_results == []


def test_all_three_are_advertised_v0_to_v3(broker: Broker) -> None:
    advertised = broker.services.api_versions.advertised
    assert [advertised[k] for k in (DESCRIBE, CREATE, DELETE)] == [(0, 3)] * 3


# ---------------------------------------------------------------------- reading the request
def decoded(key: int, version: int, body: Any) -> Any:
    codec = API[key].request
    return codec.decode(codec.encode(body, version), version)


def test_a_filter_reads_as_kafka_reads_it() -> None:
    body = describe_req(TOPIC, "orders-", PREFIXED, READ, ALLOW)
    assert acl_binding_filter(decoded(DESCRIBE, 1, body), 1) == AclBindingFilter(
        ResourcePatternFilter(ResourceType.TOPIC, "orders-", PatternType.PREFIXED),
        AccessControlEntryFilter(None, None, AclOperation.READ, AclPermissionType.ALLOW))
    match = acl_binding_filter(decoded(DESCRIBE, 3, describe_req(TOPIC, "x", MATCH)), 3)
    assert match.pattern_filter.pattern_type is PatternType.MATCH
    assert acl_binding_filter(decoded(DESCRIBE, 2, describe_req()), 2) == AclBindingFilter.ANY


@pytest.mark.parametrize("pattern", [ANY, MATCH, PREFIXED, LITERAL])
def test_v0_has_no_pattern_type_and_reads_as_literal(pattern: int) -> None:
    for key, body in ((DESCRIBE, describe_req(TOPIC, "t", pattern)),
                      (DELETE, DeleteAclsRequest(filters=[delete_filter(TOPIC, "t", pattern)]))):
        wire = decoded(key, 0, body)
        f = wire if key == DESCRIBE else wire.filters[0]
        assert acl_binding_filter(f, 0).pattern_filter.pattern_type is PatternType.LITERAL
    # even a value that never crossed the wire: v0 is LITERAL
    assert acl_binding_filter(describe_req(TOPIC, "t", PREFIXED), 0) \
        .pattern_filter.pattern_type is PatternType.LITERAL


@pytest.mark.parametrize(("key", "body"), [
    (DESCRIBE, describe_req(resource_type=0)),
    (DESCRIBE, describe_req(pattern=0)),
    (DESCRIBE, describe_req(operation=0)),
    (DESCRIBE, describe_req(permission=99)),  # a code this version does not know
    (CREATE, CreateAclsRequest(creations=[creation(), creation(resource_type=0)])),
    (CREATE, CreateAclsRequest(creations=[creation(pattern=0)])),
    (CREATE, CreateAclsRequest(creations=[creation(operation=15)])),
    (CREATE, CreateAclsRequest(creations=[creation(permission=0)])),
    (DELETE, DeleteAclsRequest(filters=[delete_filter(), delete_filter(operation=0)])),
    (DELETE, DeleteAclsRequest(filters=[delete_filter(pattern=5)])),
], ids=["describe-resource-type", "describe-pattern-type", "describe-operation",
        "describe-permission-99", "create-resource-type", "create-pattern-type",
        "create-operation-15", "create-permission", "delete-operation",
        "delete-pattern-type-5"])
def test_an_unknown_element_fails_the_request(broker: Broker, key: int, body: Any) -> None:
    # Kafka fails the request while parsing it and closes the connection; a handler that
    # raises closes it here.
    with pytest.raises(InvalidRequestError, match="UNKNOWN elements"):
        call(broker, key, 1, body)


def test_an_unknown_pattern_type_cannot_reach_a_v0_request(broker: Broker) -> None:
    got = call(broker, CREATE, 0, CreateAclsRequest(creations=[creation(pattern=0)]))
    assert [r.error_code for r in got.results] == [SECURITY_DISABLED]
