"""Produce: request and response layouts (api key 0)."""

from millrace.protocol.schema import F, request, response

REQUEST = request(
    'ProduceRequest', 0, '3-13', '9+',
    F('transactional_id', 'string', '3+', nullable='3+', default=None),
    F('acks', 'int16', '0+'),
    F('timeout_ms', 'int32', '0+'),
    F('topic_data', '[]TopicProduceData', '0+',
        F('name', 'string', '0-12'),
        F('topic_id', 'uuid', '13+'),
        F('partition_data', '[]PartitionProduceData', '0+',
            F('index', 'int32', '0+'),
            F('records', 'records', '0+', nullable='0+'),
        ),
    ),
)

RESPONSE = response(
    'ProduceResponse', 0, '3-13', '9+',
    F('responses', '[]TopicProduceResponse', '0+',
        F('name', 'string', '0-12'),
        F('topic_id', 'uuid', '13+'),
        F('partition_responses', '[]PartitionProduceResponse', '0+',
            F('index', 'int32', '0+'),
            F('error_code', 'int16', '0+'),
            F('base_offset', 'int64', '0+'),
            F('log_append_time_ms', 'int64', '2+', default=-1),
            F('log_start_offset', 'int64', '5+', default=-1),
            F('record_errors', '[]BatchIndexAndErrorMessage', '8+',
                F('batch_index', 'int32', '8+'),
                F('batch_index_error_message', 'string', '8+', nullable='8+', default=None),
            ),
            F('error_message', 'string', '8+', nullable='8+', default=None),
            F('current_leader', 'LeaderIdAndEpoch', '10+',
                F('leader_id', 'int32', '10+', default=-1),
                F('leader_epoch', 'int32', '10+', default=-1),
                tag=0, tagged='10+'),
        ),
    ),
    F('throttle_time_ms', 'int32', '1+', default=0),
    F('node_endpoints', '[]NodeEndpoint', '10+',
        F('node_id', 'int32', '10+'),
        F('host', 'string', '10+'),
        F('port', 'int32', '10+'),
        F('rack', 'string', '10+', nullable='10+', default=None),
        tag=0, tagged='10+'),
)
