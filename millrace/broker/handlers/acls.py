"""DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), v0-3 (Kafka's ``AclApis``).

Without an authorizer (``authorizer.class.name`` empty) Kafka answers every ACL request with SECURITY_DISABLED (54) in each of its
error slots: DescribeAcls's one top-level error (message "No Authorizer is configured on
the broker", no resources), one result per creation for CreateAcls and one per filter for
DeleteAcls (message "No Authorizer is configured." -- Kafka 3.9's two wordings).  Nothing
is stored or removed.

Before that answer, a request is read as Kafka's request classes read it while parsing:
v0 has no pattern type, so every v0 filter and creation is LITERAL (Kafka's ANY -> LITERAL
rule for v0 filters is the client's; on the wire v0 can only say LITERAL); a wire code
this version does not know reads as UNKNOWN, and an UNKNOWN resource type, pattern type,
operation or permission type makes the request invalid.  Kafka fails such a request while
parsing it and closes the connection; so does this broker, by raising
``InvalidRequestError`` from the handler.

With an authorizer, DescribeAcls needs Describe on the Cluster and Create/DeleteAcls
need Alter on it; without, every error slot holds CLUSTER_AUTHORIZATION_FAILED (31).  Then
``AclService`` lists, adds or removes (an invalid binding: INVALID_REQUEST with the reason,
per creation).
"""

from __future__ import annotations

from millrace.broker.context import RequestContext
from millrace.broker.handlers import handles
from millrace.common.errors import Errors, InvalidRequestError
from millrace.protocol import ApiKey
from millrace.protocol.types import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
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

CLUSTER_DENIED = "Cluster authorization failed."

NO_AUTHORIZER_DESCRIBE = "No Authorizer is configured on the broker"
NO_AUTHORIZER_ALTER = "No Authorizer is configured."


def acl_binding_filter(f: DescribeAclsRequest | DeleteAclsRequest.DeleteAclsFilter,
                       version: int) -> AclBindingFilter:
    """The filter a DescribeAcls request or a DeleteAcls filter entry carries (Kafka's
    ``DescribeAclsRequest.filter`` / ``DeleteAclsRequest.filters``); v0 is LITERAL.
    ``InvalidRequestError`` when an element is UNKNOWN."""
    pattern_type = (PatternType.LITERAL if version == 0
                    else PatternType.from_code(f.pattern_type_filter))
    flt = AclBindingFilter(
        ResourcePatternFilter(ResourceType.from_code(f.resource_type_filter),
                              f.resource_name_filter, pattern_type),
        AccessControlEntryFilter(f.principal_filter, f.host_filter,
                                 AclOperation.from_code(f.operation),
                                 AclPermissionType.from_code(f.permission_type)))
    if flt.is_unknown:
        raise InvalidRequestError(f"The ACL filter contains UNKNOWN elements: {flt}")
    return flt


def check_creation(c: CreateAclsRequest.AclCreation, version: int) -> None:
    """Kafka's ``CreateAclsRequest.validate`` for one creation: ``InvalidRequestError``
    when its resource type, pattern type (LITERAL in v0), operation or permission type is
    UNKNOWN.  Whether the binding is a valid ACL is the authorizer's question."""
    pattern_type = (PatternType.LITERAL if version == 0
                    else PatternType.from_code(c.resource_pattern_type))
    if (ResourceType.from_code(c.resource_type) is ResourceType.UNKNOWN
            or pattern_type is PatternType.UNKNOWN
            or AclOperation.from_code(c.operation) is AclOperation.UNKNOWN
            or AclPermissionType.from_code(c.permission_type) is AclPermissionType.UNKNOWN):
        raise InvalidRequestError(f"The ACL creation contains UNKNOWN elements: {c}")
    try:  # ANY / MATCH are filter values: Java's ResourcePattern and entry refuse them
        creation_binding(c, version)
    except ValueError as e:
        raise InvalidRequestError(f"Invalid ACL creation {c}: {e}") from None


def creation_binding(c: CreateAclsRequest.AclCreation, version: int) -> AclBinding:
    """The binding a (checked) creation asks for."""
    pattern_type = (PatternType.LITERAL if version == 0
                    else PatternType.from_code(c.resource_pattern_type))
    return AclBinding(
        ResourcePattern(ResourceType.from_code(c.resource_type), c.resource_name, pattern_type),
        AccessControlEntry(c.principal, c.host, AclOperation.from_code(c.operation),
                           AclPermissionType.from_code(c.permission_type)))


@handles(ApiKey.DESCRIBE_ACLS)
async def handle_describe_acls(ctx: RequestContext, body: DescribeAclsRequest
                               ) -> DescribeAclsResponse:
    flt = acl_binding_filter(body, ctx.version)
    acls = ctx.services.acls
    if acls is None:
        return DescribeAclsResponse(throttle_time_ms=0, error_code=Errors.SECURITY_DISABLED,
                                    error_message=NO_AUTHORIZER_DESCRIBE, resources=[])
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        return DescribeAclsResponse(throttle_time_ms=0,
                                    error_code=Errors.CLUSTER_AUTHORIZATION_FAILED,
                                    error_message=CLUSTER_DENIED, resources=[])
    resource_cls = DescribeAclsResponse.DescribeAclsResource
    description = resource_cls.AclDescription
    grouped: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for binding in acls.describe_acls(flt):
        grouped.setdefault(binding.pattern, []).append(binding.entry)
    return DescribeAclsResponse(throttle_time_ms=0, error_code=Errors.NONE, error_message=None,
                                resources=[resource_cls(
                                    resource_type=p.resource_type, resource_name=p.name,
                                    pattern_type=p.pattern_type, acls=[description(
                                        principal=e.principal, host=e.host,
                                        operation=e.operation,
                                        permission_type=e.permission_type) for e in entries])
                                    for p, entries in grouped.items()])


@handles(ApiKey.CREATE_ACLS)
async def handle_create_acls(ctx: RequestContext, body: CreateAclsRequest
                             ) -> CreateAclsResponse:
    for creation in body.creations:
        check_creation(creation, ctx.version)
    result = CreateAclsResponse.AclCreationResult
    acls = ctx.services.acls
    if acls is None or not ctx.authorize_cluster(AclOperation.ALTER):
        error, message = ((Errors.SECURITY_DISABLED, NO_AUTHORIZER_ALTER) if acls is None
                          else (Errors.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_DENIED))
        return CreateAclsResponse(throttle_time_ms=0, results=[
            result(error_code=error, error_message=message) for _ in body.creations])
    outcomes = await acls.create_acls([creation_binding(c, ctx.version)
                                       for c in body.creations])
    return CreateAclsResponse(throttle_time_ms=0, results=[
        result(error_code=o.error, error_message=o.message) for o in outcomes])


@handles(ApiKey.DELETE_ACLS)
async def handle_delete_acls(ctx: RequestContext, body: DeleteAclsRequest
                             ) -> DeleteAclsResponse:
    filters = [acl_binding_filter(f, ctx.version) for f in body.filters]
    result = DeleteAclsResponse.DeleteAclsFilterResult
    acls = ctx.services.acls
    if acls is None or not ctx.authorize_cluster(AclOperation.ALTER):
        error, message = ((Errors.SECURITY_DISABLED, NO_AUTHORIZER_ALTER) if acls is None
                          else (Errors.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_DENIED))
        return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
            result(error_code=error, error_message=message, matching_acls=[])
            for _ in body.filters])
    matching = result.DeleteAclsMatchingAcl
    outcomes = await acls.delete_acls(filters)
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
        result(error_code=o.error, error_message=o.message, matching_acls=[
            matching(error_code=Errors.NONE, error_message=None,
                     resource_type=b.pattern.resource_type, resource_name=b.pattern.name,
                     pattern_type=b.pattern.pattern_type, principal=b.entry.principal,
                     host=b.entry.host, operation=b.entry.operation,
                     permission_type=b.entry.permission_type) for b in o.deleted])
        for o in outcomes])
