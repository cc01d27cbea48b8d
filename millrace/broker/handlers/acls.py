"""DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), v0-3 (Kafka's ``AclApis``).

Without an authorizer -- the only broker there is until ``authorizer.class.name`` becomes
a known key -- Kafka answers every ACL request with SECURITY_DISABLED (54) in each of its
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

Authorization of the ACL APIs themselves (Describe / Alter on the Cluster) and the
answers of a broker with an authorizer come with the authorizer.
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
    AccessControlEntryFilter,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePatternFilter,
    ResourceType,
)

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


@handles(ApiKey.DESCRIBE_ACLS)
async def handle_describe_acls(ctx: RequestContext, body: DescribeAclsRequest
                               ) -> DescribeAclsResponse:
    acl_binding_filter(body, ctx.version)
    return DescribeAclsResponse(throttle_time_ms=0, error_code=Errors.SECURITY_DISABLED,
                                error_message=NO_AUTHORIZER_DESCRIBE, resources=[])


@handles(ApiKey.CREATE_ACLS)
async def handle_create_acls(ctx: RequestContext, body: CreateAclsRequest
                             ) -> CreateAclsResponse:
    for creation in body.creations:
        check_creation(creation, ctx.version)
    result = CreateAclsResponse.AclCreationResult
    return CreateAclsResponse(throttle_time_ms=0, results=[
        result(error_code=Errors.SECURITY_DISABLED, error_message=NO_AUTHORIZER_ALTER)
        for _ in body.creations])


@handles(ApiKey.DELETE_ACLS)
async def handle_delete_acls(ctx: RequestContext, body: DeleteAclsRequest
                             ) -> DeleteAclsResponse:
    for f in body.filters:
        acl_binding_filter(f, ctx.version)
    result = DeleteAclsResponse.DeleteAclsFilterResult
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
        result(error_code=Errors.SECURITY_DISABLED, error_message=NO_AUTHORIZER_ALTER,
               matching_acls=[])
        for _ in body.filters])
