"""``create_acls`` / ``describe_acls`` / ``delete_acls`` against scripted brokers (no
sockets) and against the broker's own handlers in process: the bindings and filters on
the wire at each version, the version a request needs (v1 for pattern types, v3 for USER),
requests refused before sending, per-binding and per-filter results with Kafka's
exceptions (SecurityDisabledError from a broker without an authorizer)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from millrace.client.admin import FilterResult, _acls
from millrace.common.errors import (
    Errors,
    InvalidRequestError,
    KafkaError,
    SecurityDisabledError,
    UnsupportedVersionError,
)
from millrace.protocol import (
    API,
    CreateAclsResponse,
    DeleteAclsResponse,
    DescribeAclsResponse,
)
from millrace.security.acl import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from tests.unit.client.admin.scripted_network import ScriptedNetwork

DEADLINE = 2_000_000_000_000
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LITERAL, PREFIXED, MATCH, ANY = (PatternType.LITERAL, PatternType.PREFIXED, PatternType.MATCH,
                                 PatternType.ANY)
C, D, X = CreateAclsResponse, DescribeAclsResponse, DeleteAclsResponse


def binding(name: str = "orders", pattern: PatternType = LITERAL,
            op: AclOperation = AclOperation.READ, permission: AclPermissionType = ALLOW,
            resource_type: ResourceType = ResourceType.TOPIC,
            principal: str = "User:alice") -> AclBinding:
    return AclBinding(ResourcePattern(resource_type, name, pattern),
                      AccessControlEntry(principal, "*", op, permission))


def topic_filter(name: str | None = "orders", pattern: PatternType = LITERAL,
                 resource_type: ResourceType = ResourceType.TOPIC,
                 op: AclOperation = AclOperation.ANY) -> AclBindingFilter:
    return AclBindingFilter(ResourcePatternFilter(resource_type, name, pattern),
                            AccessControlEntryFilter("User:alice", None, op,
                                                     AclPermissionType.ANY))


def created(*codes: tuple[int, str | None]) -> Any:
    return C(results=[C.AclCreationResult(error_code=c, error_message=m) for c, m in codes])


# ---------------------------------------------------------------------- create
def test_create_sends_each_distinct_binding_once_and_answers_each() -> None:
    seen: list[tuple[Any, int]] = []

    def handle(request: Any, version: int, node: Any) -> Any:
        seen.append((request, version))
        return created((0, None), (Errors.INVALID_REQUEST, "Invalid empty resource name"))

    net = ScriptedNetwork({"CreateAcls": handle})
    a, b = binding("orders"), binding("", op=AclOperation.WRITE, permission=DENY)
    result = _acls.create_acls(net, [a, b, a], DEADLINE)
    assert list(result) == [a, b]
    assert result[a].result() is None
    with pytest.raises(InvalidRequestError, match="Invalid empty resource name"):
        result[b].result()
    (request, version), = seen
    assert version == 3
    assert [(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
             c.operation, c.permission_type) for c in request.creations] == [
        (2, "orders", 3, "User:alice", "*", 3, 3), (2, "", 3, "User:alice", "*", 4, 2)]


def test_create_without_an_authorizer_fails_every_binding() -> None:
    net = ScriptedNetwork({"CreateAcls": lambda r, v, n: created(
        *[(Errors.SECURITY_DISABLED, "No Authorizer is configured.")] * len(r.creations))})
    result = _acls.create_acls(net, [binding("a"), binding("b")], DEADLINE)
    errors = result.errors()
    assert len(errors) == 2
    assert all(isinstance(e, SecurityDisabledError) and e.code == 54 for e in errors.values())
    assert "No Authorizer is configured." in str(errors[binding("a")])


def test_an_indefinite_binding_fails_before_sending() -> None:
    net = ScriptedNetwork({"CreateAcls": lambda r, v, n: created((0, None))})
    unknown = binding(op=AclOperation.UNKNOWN)
    result = _acls.create_acls(net, [unknown, binding("ok")], DEADLINE)
    with pytest.raises(InvalidRequestError, match="Invalid ACL creation: Operation is UNKNOWN"):
        result[unknown].result()
    assert result[binding("ok")].result() is None
    assert len(net.sent) == 1
    net.sent.clear()
    assert _acls.create_acls(net, [unknown], DEADLINE).errors().keys() == {unknown}
    assert net.sent == []  # nothing left to send


def test_a_result_the_broker_left_out_fails_its_binding() -> None:
    net = ScriptedNetwork({"CreateAcls": lambda r, v, n: created((0, None))})
    result = _acls.create_acls(net, [binding("a"), binding("b")], DEADLINE)
    assert result[binding("a")].result() is None
    with pytest.raises(KafkaError, match="no creation result"):
        result[binding("b")].result()


@pytest.mark.parametrize(("bindings", "needed"), [
    ([binding()], 0),
    ([binding(), binding("orders-", PREFIXED)], 1),
    ([binding("alice", resource_type=ResourceType.USER, op=AclOperation.CREATE_TOKENS)], 3),
])
def test_create_asks_for_the_version_its_bindings_need(bindings: list[AclBinding],
                                                       needed: int) -> None:
    for broker_max in range(4):
        net = ScriptedNetwork({"CreateAcls": lambda r, v, n: created(
            *[(0, None)] * len(r.creations))}, versions={"CreateAcls": broker_max})
        result = _acls.create_acls(net, bindings, DEADLINE)
        if broker_max < needed:
            with pytest.raises(UnsupportedVersionError):
                result.all()
        else:
            assert result.all() == dict.fromkeys(bindings)


# ---------------------------------------------------------------------- describe
def test_describe_returns_the_bindings_of_every_resource() -> None:
    seen: list[Any] = []

    def handle(request: Any, version: int, node: Any) -> Any:
        seen.append(request)
        acl = D.DescribeAclsResource.AclDescription
        return D(error_code=0, error_message=None, resources=[
            D.DescribeAclsResource(resource_type=2, resource_name="orders", pattern_type=3,
                                   acls=[acl(principal="User:alice", host="*", operation=3,
                                             permission_type=3),
                                         acl(principal="User:bob", host="10.0.0.1",
                                             operation=4, permission_type=2)]),
            D.DescribeAclsResource(resource_type=2, resource_name="ord", pattern_type=4,
                                   acls=[acl(principal="User:alice", host="*", operation=2,
                                             permission_type=3)])])

    net = ScriptedNetwork({"DescribeAcls": handle})
    got = _acls.describe_acls(net, topic_filter("orders", MATCH), DEADLINE)
    assert got == [
        binding("orders"),
        AclBinding(ResourcePattern(ResourceType.TOPIC, "orders", LITERAL),
                   AccessControlEntry("User:bob", "10.0.0.1", AclOperation.WRITE, DENY)),
        binding("ord", PREFIXED, AclOperation.ALL)]
    (request,) = seen
    assert (request.resource_type_filter, request.resource_name_filter,
            request.pattern_type_filter, request.principal_filter, request.host_filter,
            request.operation, request.permission_type) == (2, "orders", 2, "User:alice",
                                                             None, 1, 1)


def test_describe_raises_the_brokers_error() -> None:
    net = ScriptedNetwork({"DescribeAcls": lambda r, v, n: D(
        error_code=54, error_message="No Authorizer is configured on the broker",
        resources=[])})
    with pytest.raises(SecurityDisabledError, match="No Authorizer is configured on the broker"):
        _acls.describe_acls(net, AclBindingFilter.ANY, DEADLINE)


def test_describe_refuses_an_unknown_filter_before_sending() -> None:
    net = ScriptedNetwork({})
    with pytest.raises(InvalidRequestError, match="UNKNOWN"):
        _acls.describe_acls(net, topic_filter(op=AclOperation.UNKNOWN), DEADLINE)
    assert net.sent == []


@pytest.mark.parametrize(("flt", "needed"), [
    (AclBindingFilter.ANY, 0),  # ANY is LITERAL in v0
    (topic_filter(pattern=LITERAL), 0),
    (topic_filter(pattern=PREFIXED), 1),
    (topic_filter(pattern=MATCH), 1),
    (topic_filter("alice", resource_type=ResourceType.USER), 3),
])
def test_describe_asks_for_the_version_its_filter_needs(flt: AclBindingFilter,
                                                        needed: int) -> None:
    for broker_max in range(4):
        net = ScriptedNetwork({"DescribeAcls": lambda r, v, n: D(resources=[])},
                              versions={"DescribeAcls": broker_max})
        if broker_max < needed:
            with pytest.raises(UnsupportedVersionError):
                _acls.describe_acls(net, flt, DEADLINE)
        else:
            assert _acls.describe_acls(net, flt, DEADLINE) == []


def test_describe_v0_answers_literal_patterns() -> None:
    acl = D.DescribeAclsResource.AclDescription
    net = ScriptedNetwork({"DescribeAcls": lambda r, v, n: D(resources=[
        D.DescribeAclsResource(resource_type=3, resource_name="g", pattern_type=4, acls=[
            acl(principal="User:alice", host="*", operation=3, permission_type=3)])])},
        versions={"DescribeAcls": 0})
    got = _acls.describe_acls(net, AclBindingFilter.ANY, DEADLINE)
    assert [b.pattern for b in got] == [ResourcePattern(ResourceType.GROUP, "g", LITERAL)]


def test_an_acl_the_client_cannot_represent_is_an_error() -> None:
    acl = D.DescribeAclsResource.AclDescription
    net = ScriptedNetwork({"DescribeAcls": lambda r, v, n: D(resources=[
        D.DescribeAclsResource(resource_type=9, resource_name="x", pattern_type=3, acls=[
            acl(principal="User:a", host="*", operation=3, permission_type=3)])])})
    with pytest.raises(KafkaError, match="cannot read"):
        _acls.describe_acls(net, AclBindingFilter.ANY, DEADLINE)


# ---------------------------------------------------------------------- delete
def test_delete_answers_per_filter_with_the_matched_acls() -> None:
    seen: list[Any] = []

    def handle(request: Any, version: int, node: Any) -> Any:
        seen.append(request)
        m = X.DeleteAclsFilterResult.DeleteAclsMatchingAcl
        return X(filter_results=[
            X.DeleteAclsFilterResult(error_code=0, error_message=None, matching_acls=[
                m(error_code=0, error_message=None, resource_type=2, resource_name="orders",
                  pattern_type=3, principal="User:alice", host="*", operation=3,
                  permission_type=3),
                m(error_code=Errors.UNKNOWN_SERVER_ERROR, error_message="boom",
                  resource_type=2, resource_name="orders", pattern_type=3,
                  principal="User:alice", host="*", operation=4, permission_type=3)]),
            X.DeleteAclsFilterResult(error_code=Errors.CLUSTER_AUTHORIZATION_FAILED,
                                     error_message=None, matching_acls=[])])

    net = ScriptedNetwork({"DeleteAcls": handle})
    first, second = topic_filter("orders"), topic_filter(None, ANY, ResourceType.ANY)
    result = _acls.delete_acls(net, [first, second, first], DEADLINE)
    assert list(result) == [first, second]
    deleted, kept = result[first].result()
    assert deleted == FilterResult(binding("orders"), None)
    assert kept.binding == binding("orders", op=AclOperation.WRITE)
    assert isinstance(kept.error, KafkaError) and "boom" in str(kept.error)
    error = result[second].exception()
    assert isinstance(error, KafkaError) and error.code == Errors.CLUSTER_AUTHORIZATION_FAILED
    (request,) = seen
    assert [(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter,
             f.principal_filter, f.host_filter, f.operation, f.permission_type)
            for f in request.filters] == [(2, "orders", 3, "User:alice", None, 1, 1),
                                          (1, None, 1, "User:alice", None, 1, 1)]


def test_delete_refuses_unknown_filters_and_reports_missing_results() -> None:
    net = ScriptedNetwork({"DeleteAcls": lambda r, v, n: X(filter_results=[])},
                          versions={"DeleteAcls": 1})
    unknown = topic_filter(resource_type=ResourceType.UNKNOWN)
    result = _acls.delete_acls(net, [unknown, topic_filter()], DEADLINE)
    with pytest.raises(InvalidRequestError, match="UNKNOWN"):
        result[unknown].result()
    with pytest.raises(KafkaError, match="no deletion result"):
        result[topic_filter()].result()
    assert [len(net.sent)] == [1]


def test_delete_of_a_prefixed_filter_needs_v1() -> None:
    net = ScriptedNetwork({"DeleteAcls": lambda r, v, n: X(filter_results=[
        X.DeleteAclsFilterResult(error_code=0, error_message=None, matching_acls=[])
        for _ in r.filters])}, versions={"DeleteAcls": 0})
    result = _acls.delete_acls(net, [topic_filter(pattern=PREFIXED), topic_filter()], DEADLINE)
    assert [type(e) for e in result.errors().values()] == [UnsupportedVersionError] * 2
    assert net.sent == []
    any_pattern = topic_filter(None, ANY)  # ANY is LITERAL in v0
    assert _acls.delete_acls(net, [any_pattern], DEADLINE).all() == {any_pattern: []}
    assert [v for _, v, _ in net.sent] == [0]


# ---------------------------------------------------------------------- the broker's handlers
@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_against_the_brokers_handlers_without_an_authorizer(tmp_path: Path,
                                                            version: int) -> None:
    from tests.unit.broker.brokergen import Broker

    broker = Broker(str(tmp_path / "logs"))

    def serve(name: str) -> Any:
        key = next(k for k, api in API.items() if api.name == name)
        return lambda request, v, node: asyncio.run(broker.call(key, v, request))

    try:
        net = ScriptedNetwork({n: serve(n) for n in ("CreateAcls", "DescribeAcls",
                                                     "DeleteAcls")},
                              versions=dict.fromkeys(("CreateAcls", "DescribeAcls",
                                                      "DeleteAcls"), version))
        created_ = _acls.create_acls(net, [binding("a"), binding("b")], DEADLINE)
        assert [type(e) for e in created_.errors().values()] == [SecurityDisabledError] * 2
        with pytest.raises(SecurityDisabledError) as info:
            _acls.describe_acls(net, AclBindingFilter.ANY, DEADLINE)
        assert info.value.code == 54
        deleted = _acls.delete_acls(net, [AclBindingFilter.ANY, topic_filter()], DEADLINE)
        assert [type(e) for e in deleted.errors().values()] == [SecurityDisabledError] * 2
        assert [v for _, v, _ in net.sent] == [version] * 3
    finally:
        broker.close()
