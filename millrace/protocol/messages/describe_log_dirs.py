"""DescribeLogDirs: request and response layouts (api key 35).

Versions 0-4 as Kafka 3.9 serves them (4.0 dropped v0 and added v5): v1 is v0 with the
throttle answered before throttling, v2 the first flexible version, v3 adds the top-level
error code, v4 the total and usable bytes of each log dir's volume.  Topics null asks for
every partition the broker hosts.
"""

from millrace.protocol.schema import F, request, response

REQUEST = request(
    'DescribeLogDirsRequest', 35, '0-4', '2+',
    F('topics', '[]DescribableLogDirTopic', '0+',
        F('topic', 'string', '0+'),
        F('partitions', '[]int32', '0+'),
        nullable='0+',
    ),
)

RESPONSE = response(
    'DescribeLogDirsResponse', 35, '0-4', '2+',
    F('throttle_time_ms', 'int32', '0+'),
    F('error_code', 'int16', '3+'),
    F('results', '[]DescribeLogDirsResult', '0+',
        F('error_code', 'int16', '0+'),
        F('log_dir', 'string', '0+'),
        F('topics', '[]DescribeLogDirsTopic', '0+',
            F('name', 'string', '0+'),
            F('partitions', '[]DescribeLogDirsPartition', '0+',
                F('partition_index', 'int32', '0+'),
                F('partition_size', 'int64', '0+'),
                F('offset_lag', 'int64', '0+'),
                F('is_future_key', 'bool', '0+'),
            ),
        ),
        F('total_bytes', 'int64', '4+', default=-1),
        F('usable_bytes', 'int64', '4+', default=-1),
    ),
)
