"""DescribeProducers: request and response layouts (api key 61)."""

from millrace.protocol.schema import F, request, response

REQUEST = request(
    'DescribeProducersRequest', 61, '0', '0+',
    F('topics', '[]TopicRequest', '0+',
        F('name', 'string', '0+'),
        F('partition_indexes', '[]int32', '0+'),
    ),
)

RESPONSE = response(
    'DescribeProducersResponse', 61, '0', '0+',
    F('throttle_time_ms', 'int32', '0+'),
    F('topics', '[]TopicResponse', '0+',
        F('name', 'string', '0+'),
        F('partitions', '[]PartitionResponse', '0+',
            F('partition_index', 'int32', '0+'),
            F('error_code', 'int16', '0+'),
            F('error_message', 'string', '0+', nullable='0+', default=None),
            F('active_producers', '[]ProducerState', '0+',
                F('producer_id', 'int64', '0+'),
                F('producer_epoch', 'int32', '0+'),
                F('last_sequence', 'int32', '0+', default=-1),
                F('last_timestamp', 'int64', '0+', default=-1),
                F('coordinator_epoch', 'int32', '0+'),
                F('current_txn_start_offset', 'int64', '0+', default=-1),
            ),
        ),
    ),
)
