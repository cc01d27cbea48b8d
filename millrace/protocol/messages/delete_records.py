"""DeleteRecords: request and response layouts (api key 21)."""

from millrace.protocol.schema import F, request, response

REQUEST = request(
    'DeleteRecordsRequest', 21, '0-2', '2+',
    F('topics', '[]DeleteRecordsTopic', '0+',
        F('name', 'string', '0+'),
        F('partitions', '[]DeleteRecordsPartition', '0+',
            F('partition_index', 'int32', '0+'),
            F('offset', 'int64', '0+'),
        ),
    ),
    F('timeout_ms', 'int32', '0+'),
)

RESPONSE = response(
    'DeleteRecordsResponse', 21, '0-2', '2+',
    F('throttle_time_ms', 'int32', '0+'),
    F('topics', '[]DeleteRecordsTopicResult', '0+',
        F('name', 'string', '0+'),
        F('partitions', '[]DeleteRecordsPartitionResult', '0+',
            F('partition_index', 'int32', '0+'),
            F('low_watermark', 'int64', '0+'),
            F('error_code', 'int16', '0+'),
        ),
    ),
)
