"""CreatePartitions: request and response layouts (api key 37)."""

from millrace.protocol.schema import F, request, response

REQUEST = request(
    'CreatePartitionsRequest', 37, '0-3', '2+',
    F('topics', '[]CreatePartitionsTopic', '0+',
        F('name', 'string', '0+'),
        F('count', 'int32', '0+'),
        F('assignments', '[]CreatePartitionsAssignment', '0+',
            F('broker_ids', '[]int32', '0+'),
            nullable='0+'),
    ),
    F('timeout_ms', 'int32', '0+'),
    F('validate_only', 'bool', '0+'),
)

RESPONSE = response(
    'CreatePartitionsResponse', 37, '0-3', '2+',
    F('throttle_time_ms', 'int32', '0+'),
    F('results', '[]CreatePartitionsTopicResult', '0+',
        F('name', 'string', '0+'),
        F('error_code', 'int16', '0+'),
        F('error_message', 'string', '0+', nullable='0+', default=None),
    ),
)
