"""StopReplica: request and response layouts (api key 5).

The controller tells a broker to stop fetching for (and, with ``delete_partition``,
to delete) replicas: on topic deletion, reassignment away from the broker, and
controlled shutdown.  A ZooKeeper-mode API (gone in Kafka 4.0); the facts are 3.8's.

v0 lists (topic, partition) pairs with one request-wide ``delete_partitions``; v1-2
group partition indexes by topic; v3+ (KIP-570) carry per-partition state: the leader
epoch the controller knows (-2 means the topic is being deleted, -1 none) and a
per-partition ``delete_partition``.  v4 marks a KRaft controller during migration.
"""

from millrace.protocol.schema import F, request, response

REQUEST = request(
    'StopReplicaRequest', 5, '0-4', '2+',
    F('controller_id', 'int32', '0+'),
    F('is_kraft_controller', 'bool', '4+', default=False),
    F('controller_epoch', 'int32', '0+'),
    F('broker_epoch', 'int64', '1+', default=-1),
    F('delete_partitions', 'bool', '0-2'),
    F('ungrouped_partitions', '[]StopReplicaPartitionV0', '0',
        F('topic_name', 'string', '0'),
        F('partition_index', 'int32', '0'),
    ),
    F('topics', '[]StopReplicaTopicV1', '1-2',
        F('name', 'string', '1-2'),
        F('partition_indexes', '[]int32', '1-2'),
    ),
    F('topic_states', '[]StopReplicaTopicState', '3+',
        F('topic_name', 'string', '3+'),
        F('partition_states', '[]StopReplicaPartitionState', '3+',
            F('partition_index', 'int32', '3+'),
            F('leader_epoch', 'int32', '3+', default=-1),
            F('delete_partition', 'bool', '3+'),
        ),
    ),
)

RESPONSE = response(
    'StopReplicaResponse', 5, '0-4', '2+',
    F('error_code', 'int16', '0+'),
    F('partition_errors', '[]StopReplicaPartitionError', '0+',
        F('topic_name', 'string', '0+'),
        F('partition_index', 'int32', '0+'),
        F('error_code', 'int16', '0+'),
    ),
)
