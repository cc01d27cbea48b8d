"""AlterPartitionReassignments: request and response layouts (api key 45).

An admin client asks the controller to move partitions to new replica sets (KIP-455):
the controller adds the new replicas, waits for them to join the ISR, then removes the
old ones.  Null ``replicas`` cancels a pending reassignment of that partition.  v1
(KIP-1066) lets the caller forbid a change of replication factor.  Flexible in every
version.
"""

from millrace.protocol.schema import F, request, response

REQUEST = request(
    'AlterPartitionReassignmentsRequest', 45, '0-1', '0+',
    F('timeout_ms', 'int32', '0+', default=60000),
    F('allow_replication_factor_change', 'bool', '1+', default=True),
    F('topics', '[]ReassignableTopic', '0+',
        F('name', 'string', '0+'),
        F('partitions', '[]ReassignablePartition', '0+',
            F('partition_index', 'int32', '0+'),
            F('replicas', '[]int32', '0+', nullable='0+', default=None),
        ),
    ),
)

RESPONSE = response(
    'AlterPartitionReassignmentsResponse', 45, '0-1', '0+',
    F('throttle_time_ms', 'int32', '0+'),
    F('allow_replication_factor_change', 'bool', '1+', default=True),
    F('error_code', 'int16', '0+'),
    F('error_message', 'string', '0+', nullable='0+'),
    F('responses', '[]ReassignableTopicResponse', '0+',
        F('name', 'string', '0+'),
        F('partitions', '[]ReassignablePartitionResponse', '0+',
            F('partition_index', 'int32', '0+'),
            F('error_code', 'int16', '0+'),
            F('error_message', 'string', '0+', nullable='0+'),
        ),
    ),
)
