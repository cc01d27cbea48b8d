"""ListGroups: request and response layouts (api key 16)."""

from millrace.protocol.schema import F, request, response

REQUEST = request(
    'ListGroupsRequest', 16, '0-5', '3+',
    F('states_filter', '[]string', '4+'),
    F('types_filter', '[]string', '5+'),
)

RESPONSE = response(
    'ListGroupsResponse', 16, '0-5', '3+',
    F('throttle_time_ms', 'int32', '1+'),
    F('error_code', 'int16', '0+'),
    F('groups', '[]ListedGroup', '0+',
        F('group_id', 'string', '0+'),
        F('protocol_type', 'string', '0+'),
        F('group_state', 'string', '4+'),
        F('group_type', 'string', '5+'),
    ),
)
