"""OffsetForLeaderEpoch: request and response layouts (api key 23)."""

from millrace.protocol.schema import F, request, response

REQUEST = request(
    'OffsetForLeaderEpochRequest', 23, '2-4', '4+',
    F('replica_id', 'int32', '3+', default=-2),
    F('topics', '[]OffsetForLeaderTopic', '0+',
        F('topic', 'string', '0+'),
        F('partitions', '[]OffsetForLeaderPartition', '0+',
            F('partition', 'int32', '0+'),
            F('current_leader_epoch', 'int32', '2+', default=-1),
            F('leader_epoch', 'int32', '0+'),
        ),
    ),
)

RESPONSE = response(
    'OffsetForLeaderEpochResponse', 23, '2-4', '4+',
    F('throttle_time_ms', 'int32', '2+'),
    F('topics', '[]OffsetForLeaderTopicResult', '0+',
        F('topic', 'string', '0+'),
        F('partitions', '[]EpochEndOffset', '0+',
            F('error_code', 'int16', '0+'),
            F('partition', 'int32', '0+'),
            F('leader_epoch', 'int32', '1+', default=-1),
            F('end_offset', 'int64', '0+', default=-1),
        ),
    ),
)
