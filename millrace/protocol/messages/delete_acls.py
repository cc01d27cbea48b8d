"""DeleteAcls: request and response layouts (api key 31, KIP-140; pattern types KIP-290).

The request carries filters of the DescribeAcls form (pattern type v1+; v0 knows only
LITERAL).  The response has one result per filter, in the request's order, each naming
the ACLs the filter matched and removed (with a per-ACL error).  v2 is the first flexible
version; v3 adds the USER resource type (no layout change).  Kafka 4.0 dropped v0, which
Kafka 3.9 still serves.
"""

from millrace.protocol.schema import F, request, response

REQUEST = request(
    'DeleteAclsRequest', 31, '0-3', '2+',
    F('filters', '[]DeleteAclsFilter', '0+',
        F('resource_type_filter', 'int8', '0+'),
        F('resource_name_filter', 'string', '0+', nullable='0+'),
        F('pattern_type_filter', 'int8', '1+', default=3),
        F('principal_filter', 'string', '0+', nullable='0+'),
        F('host_filter', 'string', '0+', nullable='0+'),
        F('operation', 'int8', '0+'),
        F('permission_type', 'int8', '0+'),
    ),
)

RESPONSE = response(
    'DeleteAclsResponse', 31, '0-3', '2+',
    F('throttle_time_ms', 'int32', '0+'),
    F('filter_results', '[]DeleteAclsFilterResult', '0+',
        F('error_code', 'int16', '0+'),
        F('error_message', 'string', '0+', nullable='0+'),
        F('matching_acls', '[]DeleteAclsMatchingAcl', '0+',
            F('error_code', 'int16', '0+'),
            F('error_message', 'string', '0+', nullable='0+'),
            F('resource_type', 'int8', '0+'),
            F('resource_name', 'string', '0+'),
            F('pattern_type', 'int8', '1+', default=3),
            F('principal', 'string', '0+'),
            F('host', 'string', '0+'),
            F('operation', 'int8', '0+'),
            F('permission_type', 'int8', '0+'),
        ),
    ),
)
