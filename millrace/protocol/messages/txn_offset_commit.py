"""TxnOffsetCommit: request and response layouts (api key 28)."""

from millrace.protocol.schema import F, request, response

REQUEST = request(
    'TxnOffsetCommitRequest', 28, '0-5', '3+',
    F('transactional_id', 'string', '0+'),
    F('group_id', 'string', '0+'),
    F('producer_id', 'int64', '0+'),
    F('producer_epoch', 'int16', '0+'),
    F('generation_id', 'int32', '3+', default=-1),
    F('member_id', 'string', '3+', default=''),
    F('group_instance_id', 'string', '3+', nullable='3+', default=None),
    F('topics', '[]TxnOffsetCommitRequestTopic', '0+',
        F('name', 'string', '0+'),
        F('partitions', '[]TxnOffsetCommitRequestPartition', '0+',
            F('partition_index', 'int32', '0+'),
            F('committed_offset', 'int64', '0+'),
            F('committed_leader_epoch', 'int32', '2+', default=-1),
            F('committed_metadata', 'string', '0+', nullable='0+'),
        ),
    ),
)

RESPONSE = response(
    'TxnOffsetCommitResponse', 28, '0-5', '3+',
    F('throttle_time_ms', 'int32', '0+'),
    F('topics', '[]TxnOffsetCommitResponseTopic', '0+',
        F('name', 'string', '0+'),
        F('partitions', '[]TxnOffsetCommitResponsePartition', '0+',
            F('partition_index', 'int32', '0+'),
            F('error_code', 'int16', '0+'),
        ),
    ),
)
