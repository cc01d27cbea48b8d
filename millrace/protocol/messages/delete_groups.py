"""DeleteGroups: request and response layouts (api key 42)."""

from millrace.protocol.schema import F, request, response

REQUEST = request(
    'DeleteGroupsRequest', 42, '0-2', '2+',
    F('groups_names', '[]string', '0+'),
)

RESPONSE = response(
    'DeleteGroupsResponse', 42, '0-2', '2+',
    F('throttle_time_ms', 'int32', '0+'),
    F('results', '[]DeletableGroupResult', '0+',
        F('group_id', 'string', '0+'),
        F('error_code', 'int16', '0+'),
    ),
)
