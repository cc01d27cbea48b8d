"""CreateAcls: request and response layouts (api key 30, KIP-140; pattern types KIP-290).

Each creation is one ACL binding flattened: resource type, name and pattern type (v1+;
v0 knows only LITERAL), principal, host, operation and permission type.  The response has
one result per creation, in the request's order.  v2 is the first flexible version; v3
adds the USER resource type (no layout change).  Kafka 4.0 dropped v0, which Kafka 3.9
still serves.
"""

from millrace.protocol.schema import F, request, response

REQUEST = request(
    'CreateAclsRequest', 30, '0-3', '2+',
    F('creations', '[]AclCreation', '0+',
        F('resource_type', 'int8', '0+'),
        F('resource_name', 'string', '0+'),
        F('resource_pattern_type', 'int8', '1+', default=3),
        F('principal', 'string', '0+'),
        F('host', 'string', '0+'),
        F('operation', 'int8', '0+'),
        F('permission_type', 'int8', '0+'),
    ),
)

RESPONSE = response(
    'CreateAclsResponse', 30, '0-3', '2+',
    F('throttle_time_ms', 'int32', '0+'),
    F('results', '[]AclCreationResult', '0+',
        F('error_code', 'int16', '0+'),
        F('error_message', 'string', '0+', nullable='0+'),
    ),
)
