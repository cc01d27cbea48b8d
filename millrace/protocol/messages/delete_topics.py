"""DeleteTopics: request and response layouts (api key 20)."""

from millrace.protocol.schema import F, request, response

REQUEST = request(
    'DeleteTopicsRequest', 20, '1-6', '4+',
    F('topics', '[]DeleteTopicState', '6+',
        F('name', 'string', '6+', nullable='6+', default=None),
        F('topic_id', 'uuid', '6+'),
    ),
    F('topic_names', '[]string', '0-5'),
    F('timeout_ms', 'int32', '0+'),
)

RESPONSE = response(
    'DeleteTopicsResponse', 20, '1-6', '4+',
    F('throttle_time_ms', 'int32', '1+'),
    F('responses', '[]DeletableTopicResult', '0+',
        F('name', 'string', '0+', nullable='6+'),
        F('topic_id', 'uuid', '6+'),
        F('error_code', 'int16', '0+'),
        F('error_message', 'string', '5+', nullable='5+', default=None),
    ),
)
