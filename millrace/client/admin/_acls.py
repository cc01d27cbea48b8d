"""ACL management (KIP-140, pattern types KIP-290): the bodies of
``KafkaAdminClient.create_acls``, ``describe_acls`` and ``delete_acls`` (Java
``createAcls`` / ``describeAcls`` / ``deleteAcls``), over the ``millrace.security.acl``
model.

Each call is one request to any broker (the least loaded), answered without retries but
for lost connections, as in Java:

* CreateAcls: one result per distinct binding, in the request's order.  A binding with an
  indefinite field (an UNKNOWN operation or permission) fails here with
  ``InvalidRequestError("Invalid ACL creation: ...")`` and is left out of the request.
* DescribeAcls: the bindings matching one filter, or the broker's error raised (a broker
  without an authorizer answers ``SecurityDisabledError``).  A filter with an UNKNOWN
  element is refused before sending.
* DeleteAcls: one result per distinct filter: the ACLs it matched (``FilterResult``, with
  a per-ACL error) or the filter's error.  A filter with an UNKNOWN element fails here
  (Java sends it, and the broker closes the connection on it).

Versions: v0 has no pattern type, so a request needing one asks for v1+ (a LITERAL
binding, a LITERAL or ANY filter -- ANY is LITERAL in v0, Kafka's rule -- go at any
version); the USER resource type needs v3.  A broker without the version needed raises
``UnsupportedVersionError`` -- for each binding or filter of create and delete, as any
error of the request itself (Java's ``completeAllExceptionally``); running out of time
raises ``KafkaTimeoutError`` from the call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from millrace.client.admin._admin_network import AdminNetwork
from millrace.client.admin.results import AdminResult
from millrace.client.admin.types import FilterResult
from millrace.common.errors import InvalidRequestError, KafkaError, for_code
from millrace.protocol import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)
from millrace.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

T = TypeVar("T")
V = TypeVar("V")

CREATING, DESCRIBING, DELETING = "creating ACLs", "describing ACLs", "deleting ACLs"
UNKNOWN_FILTER = "The AclBindingFilter must not contain UNKNOWN elements."


def _min_version(resource_types: Iterable[ResourceType],
                 pattern_types: Iterable[PatternType], v0_patterns: set[PatternType]
                 ) -> int | None:
    """The lowest version that can carry these resource and pattern types."""
    if ResourceType.USER in set(resource_types):
        return 3
    if not set(pattern_types) <= v0_patterns:
        return 1
    return None


def _error(code: int, message: str | None, what: str) -> KafkaError:
    return for_code(code)(message or what)


def _binding(resource_type: int, name: str, pattern_type: int, principal: str, host: str,
             operation: int, permission_type: int) -> AclBinding:
    """An ACL the broker answered; KafkaError for one this client cannot represent."""
    try:
        return AclBinding(
            ResourcePattern(ResourceType.from_code(resource_type), name,
                            PatternType.from_code(pattern_type)),
            AccessControlEntry(principal, host, AclOperation.from_code(operation),
                               AclPermissionType.from_code(permission_type)))
    except (ValueError, TypeError) as e:
        raise KafkaError(f"the broker answered an ACL this client cannot read: {e}") from None


def _send_items(net: AdminNetwork, body: Any, deadline_ms: int, min_version: int | None,
                sent: Sequence[T], results_of: Callable[[Any], list[Any]],
                outcome: dict[T, V | KafkaError], value_of: Callable[[Any], V],
                what: str, missing: Callable[[T], str]) -> None:
    """One request for the ``sent`` items, whose results come back in the same order:
    each item's ``value_of(result)`` or error into ``outcome``.  An error of the request
    itself (e.g. UnsupportedVersionError) fails every item sent; an item the answer left
    out fails with ``missing(item)``."""
    try:
        response, _ = net.send(body, deadline_ms, min_version=min_version)
        results = results_of(response)
    except KafkaError as e:
        outcome.update(dict.fromkeys(sent, e))
        return
    for i, item in enumerate(sent):
        if i >= len(results):
            outcome[item] = KafkaError(missing(item))
        elif results[i].error_code:
            outcome[item] = _error(results[i].error_code, results[i].error_message, what)
        else:
            try:
                outcome[item] = value_of(results[i])
            except KafkaError as error:
                outcome[item] = error


# ---------------------------------------------------------------------- create
def create_acls(net: AdminNetwork, bindings: Iterable[AclBinding], deadline_ms: int
                ) -> AdminResult[AclBinding, None]:
    order = list(dict.fromkeys(bindings))
    outcome: dict[AclBinding, KafkaError | None] = {}
    sent: list[AclBinding] = []
    for binding in order:
        indefinite = binding.to_filter().find_indefinite_field()
        if indefinite is not None:
            outcome[binding] = InvalidRequestError(f"Invalid ACL creation: {indefinite}")
        else:
            sent.append(binding)
    if sent:
        cls = CreateAclsRequest.AclCreation
        body = CreateAclsRequest(creations=[cls(
            resource_type=b.pattern.resource_type, resource_name=b.pattern.name,
            resource_pattern_type=b.pattern.pattern_type, principal=b.entry.principal,
            host=b.entry.host, operation=b.entry.operation,
            permission_type=b.entry.permission_type) for b in sent])
        min_version = _min_version((b.pattern.resource_type for b in sent),
                                   (b.pattern.pattern_type for b in sent),
                                   {PatternType.LITERAL})

        def results_of(response: CreateAclsResponse) -> list[Any]:
            return list(response.results)
        _send_items(net, body, deadline_ms, min_version, sent, results_of, outcome,
                    lambda _r: None, CREATING,
                    lambda b: f"The broker reported no creation result for the given ACL: "
                              f"{b}")
    result: AdminResult[AclBinding, None] = AdminResult()
    result.set_outcomes(order, outcome)
    return result


# ---------------------------------------------------------------------- describe
def describe_acls(net: AdminNetwork, flt: AclBindingFilter, deadline_ms: int
                  ) -> list[AclBinding]:
    if flt.is_unknown:
        raise InvalidRequestError(UNKNOWN_FILTER)
    p, e = flt.pattern_filter, flt.entry_filter
    body = DescribeAclsRequest(
        resource_type_filter=p.resource_type, resource_name_filter=p.name,
        pattern_type_filter=p.pattern_type, principal_filter=e.principal, host_filter=e.host,
        operation=e.operation, permission_type=e.permission_type)
    response: DescribeAclsResponse
    response, _ = net.send(body, deadline_ms, min_version=_min_version(
        [p.resource_type], [p.pattern_type], {PatternType.LITERAL, PatternType.ANY}))
    if response.error_code:
        raise _error(response.error_code, response.error_message, DESCRIBING)
    return [_binding(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host,
                     a.operation, a.permission_type)
            for r in response.resources for a in r.acls]


# ---------------------------------------------------------------------- delete
def delete_acls(net: AdminNetwork, filters: Iterable[AclBindingFilter], deadline_ms: int
                ) -> AdminResult[AclBindingFilter, list[FilterResult]]:
    order = list(dict.fromkeys(filters))
    outcome: dict[AclBindingFilter, list[FilterResult] | KafkaError] = {
        f: InvalidRequestError(UNKNOWN_FILTER) for f in order if f.is_unknown}
    sent = [f for f in order if f not in outcome]
    if sent:
        cls = DeleteAclsRequest.DeleteAclsFilter
        body = DeleteAclsRequest(filters=[cls(
            resource_type_filter=f.pattern_filter.resource_type,
            resource_name_filter=f.pattern_filter.name,
            pattern_type_filter=f.pattern_filter.pattern_type,
            principal_filter=f.entry_filter.principal, host_filter=f.entry_filter.host,
            operation=f.entry_filter.operation,
            permission_type=f.entry_filter.permission_type) for f in sent])
        min_version = _min_version((f.pattern_filter.resource_type for f in sent),
                                   (f.pattern_filter.pattern_type for f in sent),
                                   {PatternType.LITERAL, PatternType.ANY})

        def results_of(response: DeleteAclsResponse) -> list[Any]:
            return list(response.filter_results)

        def matched(result: Any) -> list[FilterResult]:
            return [FilterResult(
                _binding(m.resource_type, m.resource_name, m.pattern_type, m.principal,
                         m.host, m.operation, m.permission_type),
                _error(m.error_code, m.error_message, DELETING) if m.error_code else None)
                for m in result.matching_acls]
        _send_items(net, body, deadline_ms, min_version, sent, results_of, outcome, matched,
                    DELETING,
                    lambda _f: "The broker reported no deletion result for the given filter.")
    result: AdminResult[AclBindingFilter, list[FilterResult]] = AdminResult()
    result.set_outcomes(order, outcome)
    return result
