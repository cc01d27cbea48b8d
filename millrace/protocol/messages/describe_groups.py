"""DescribeGroups: request and response layouts (api key 15)."""

from millrace.protocol.schema import F, request, response

REQUEST = request(
    'DescribeGroupsRequest', 15, '0-6', '5+',
    F('groups', '[]string', '0+'),
    F('include_authorized_operations', 'bool', '3+'),
)

RESPONSE = response(
    'DescribeGroupsResponse', 15, '0-6', '5+',
    F('throttle_time_ms', 'int32', '1+'),
    F('groups', '[]DescribedGroup', '0+',
        F('error_code', 'int16', '0+'),
        F('error_message', 'string', '6+', nullable='6+', default=None),
        F('group_id', 'string', '0+'),
        F('group_state', 'string', '0+'),
        F('protocol_type', 'string', '0+'),
        F('protocol_data', 'string', '0+'),
        F('members', '[]DescribedGroupMember', '0+',
            F('member_id', 'string', '0+'),
            F('group_instance_id', 'string', '4+', nullable='4+', default=None),
            F('client_id', 'string', '0+'),
            F('client_host', 'string', '0+'),
            F('member_metadata', 'bytes', '0+'),
            F('member_assignment', 'bytes', '0+'),
        ),
        F('authorized_operations', 'int32', '3+', default=-2147483648),
    ),
)
