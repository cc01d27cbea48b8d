"""OffsetCommit: request and response layouts (api key 8)."""

from millrace.protocol.schema import F, request, response

REQUEST = request(
    'OffsetCommitRequest', 8, '2-10', '8+',
    F('group_id', 'string', '0+'),
    F('generation_id_or_member_epoch', 'int32', '1+', default=-1),
    F('member_id', 'string', '1+'),
    F('group_instance_id', 'string', '7+', nullable='7+', default=None),
    F('retention_time_ms', 'int64', '2-4', default=-1),
    F('topics', '[]OffsetCommitRequestTopic', '0+',
        F('name', 'string', '0-9'),
        F('topic_id', 'uuid', '10+'),
        F('partitions', '[]OffsetCommitRequestPartition', '0+',
            F('partition_index', 'int32', '0+'),
            F('committed_offset', 'int64', '0+'),
            F('committed_leader_epoch', 'int32', '6+', default=-1),
            F('commit_timestamp', 'int64', '1', default=-1),
            F('committed_metadata', 'string', '0+', nullable='0+'),
        ),
    ),
)

RESPONSE = response(
    'OffsetCommitResponse', 8, '2-10', '8+',
    F('throttle_time_ms', 'int32', '3+'),
    F('topics', '[]OffsetCommitResponseTopic', '0+',
        F('name', 'string', '0-9'),
        F('topic_id', 'uuid', '10+'),
        F('partitions', '[]OffsetCommitResponsePartition', '0+',
            F('partition_index', 'int32', '0+'),
            F('error_code', 'int16', '0+'),
        ),
    ),
)
