"""SyncGroup: request and response layouts (api key 14)."""

from millrace.protocol.schema import F, request, response

REQUEST = request(
    'SyncGroupRequest', 14, '0-5', '4+',
    F('group_id', 'string', '0+'),
    F('generation_id', 'int32', '0+'),
    F('member_id', 'string', '0+'),
    F('group_instance_id', 'string', '3+', nullable='3+', default=None),
    F('protocol_type', 'string', '5+', nullable='5+', default=None),
    F('protocol_name', 'string', '5+', nullable='5+', default=None),
    F('assignments', '[]SyncGroupRequestAssignment', '0+',
        F('member_id', 'string', '0+'),
        F('assignment', 'bytes', '0+'),
    ),
)

RESPONSE = response(
    'SyncGroupResponse', 14, '0-5', '4+',
    F('throttle_time_ms', 'int32', '1+'),
    F('error_code', 'int16', '0+'),
    F('protocol_type', 'string', '5+', nullable='5+', default=None),
    F('protocol_name', 'string', '5+', nullable='5+', default=None),
    F('assignment', 'bytes', '0+'),
)
