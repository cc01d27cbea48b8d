"""DescribeAcls: request and response layouts (api key 29, KIP-140; pattern types KIP-290).

The request is one ACL filter (Kafka's ``AclBindingFilter`` flattened): a resource type,
an optional resource name, a pattern type (v1+; absent in v0, which knows only LITERAL),
an optional principal and host, an operation and a permission type -- ANY (1) and null
match everything.  The response groups the matching ACLs by resource pattern.  v2 is the
first flexible version; v3 adds the USER resource type (no layout change).  Kafka 4.0
dropped v0, which Kafka 3.9 still serves.
"""

from millrace.protocol.schema import F, request, response

REQUEST = request(
    'DescribeAclsRequest', 29, '0-3', '2+',
    F('resource_type_filter', 'int8', '0+'),
    F('resource_name_filter', 'string', '0+', nullable='0+'),
    F('pattern_type_filter', 'int8', '1+', default=3),
    F('principal_filter', 'string', '0+', nullable='0+'),
    F('host_filter', 'string', '0+', nullable='0+'),
    F('operation', 'int8', '0+'),
    F('permission_type', 'int8', '0+'),
)

RESPONSE = response(
    'DescribeAclsResponse', 29, '0-3', '2+',
    F('throttle_time_ms', 'int32', '0+'),
    F('error_code', 'int16', '0+'),
    F('error_message', 'string', '0+', nullable='0+'),
    F('resources', '[]DescribeAclsResource', '0+',
        F('resource_type', 'int8', '0+'),
        F('resource_name', 'string', '0+'),
        F('pattern_type', 'int8', '1+', default=3),
        F('acls', '[]AclDescription', '0+',
            F('principal', 'string', '0+'),
            F('host', 'string', '0+'),
            F('operation', 'int8', '0+'),
            F('permission_type', 'int8', '0+'),
        ),
    ),
)
