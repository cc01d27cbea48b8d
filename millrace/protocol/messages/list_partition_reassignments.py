"""ListPartitionReassignments: request and response layouts (api key 46).

An admin client asks the controller which reassignments are in progress (KIP-455):
per partition the current replica set and the replicas being added and removed.  Null
``topics`` lists every ongoing reassignment.  One version, flexible.
"""

from millrace.protocol.schema import F, request, response

REQUEST = request(
    'ListPartitionReassignmentsRequest', 46, '0', '0+',
    F('timeout_ms', 'int32', '0+', default=60000),
    F('topics', '[]ListPartitionReassignmentsTopics', '0+',
        F('name', 'string', '0+'),
        F('partition_indexes', '[]int32', '0+'),
        nullable='0+', default=None),
)

RESPONSE = response(
    'ListPartitionReassignmentsResponse', 46, '0', '0+',
    F('throttle_time_ms', 'int32', '0+'),
    F('error_code', 'int16', '0+'),
    F('error_message', 'string', '0+', nullable='0+'),
    F('topics', '[]OngoingTopicReassignment', '0+',
        F('name', 'string', '0+'),
        F('partitions', '[]OngoingPartitionReassignment', '0+',
            F('partition_index', 'int32', '0+'),
            F('replicas', '[]int32', '0+'),
            F('adding_replicas', '[]int32', '0+'),
            F('removing_replicas', '[]int32', '0+'),
        ),
    ),
)
