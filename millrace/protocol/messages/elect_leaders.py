"""ElectLeaders: request and response layouts (api key 43).

An admin client asks the controller to elect leaders (KIP-460): ``election_type`` 0 is
the preferred replica (the first of the assigned replicas, if alive and in the ISR),
1 unclean (any live replica when the ISR has none).  Null ``topic_partitions`` means
every partition.  v0 has no election type and always means preferred.
"""

from millrace.protocol.schema import F, request, response

REQUEST = request(
    'ElectLeadersRequest', 43, '0-2', '2+',
    F('election_type', 'int8', '1+'),
    F('topic_partitions', '[]TopicPartitions', '0+',
        F('topic', 'string', '0+'),
        F('partitions', '[]int32', '0+'),
        nullable='0+'),
    F('timeout_ms', 'int32', '0+', default=60000),
)

RESPONSE = response(
    'ElectLeadersResponse', 43, '0-2', '2+',
    F('throttle_time_ms', 'int32', '0+'),
    F('error_code', 'int16', '1+'),
    F('replica_election_results', '[]ReplicaElectionResult', '0+',
        F('topic', 'string', '0+'),
        F('partition_result', '[]PartitionResult', '0+',
            F('partition_id', 'int32', '0+'),
            F('error_code', 'int16', '0+'),
            F('error_message', 'string', '0+', nullable='0+'),
        ),
    ),
)
