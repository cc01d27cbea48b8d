"""LeaderAndIsr: request and response layouts (api key 4).

The controller tells a broker, partition by partition, who leads, which replicas are in
sync and at which leader epoch; the broker becomes leader or follower accordingly
(``ReplicaManager.become_leader_or_follower``).  A ZooKeeper-mode API: Kafka 4.0 dropped
it together with ZooKeeper, so the facts here are Kafka 3.8's.

v0-1 list the partition states flat, each naming its topic; v2+ group them by topic
(``topic_states``), v5+ add the topic id and the request ``type`` (Kafka's
``AbstractControlRequest.Type``: 0 unknown, 1 incremental, 2 full -- every partition the
broker hosts), v7 marks a KRaft controller during migration.
``partition_epoch`` is the version of the partition's ``state`` znode (its zkVersion).
The response lists per-partition errors flat up to v4 and grouped by topic id from v5.
"""

from millrace.protocol.schema import F, request, response

# One partition's state; Kafka declares it once and uses it in both request layouts.
_PARTITION_STATE = (
    F('topic_name', 'string', '0-1'),
    F('partition_index', 'int32', '0+'),
    F('controller_epoch', 'int32', '0+'),
    F('leader', 'int32', '0+'),
    F('leader_epoch', 'int32', '0+'),
    F('isr', '[]int32', '0+'),
    F('partition_epoch', 'int32', '0+'),
    F('replicas', '[]int32', '0+'),
    F('adding_replicas', '[]int32', '3+'),
    F('removing_replicas', '[]int32', '3+'),
    F('is_new', 'bool', '1+', default=False),
    F('leader_recovery_state', 'int8', '6+', default=0),
)

REQUEST = request(
    'LeaderAndIsrRequest', 4, '0-7', '4+',
    F('controller_id', 'int32', '0+'),
    F('is_kraft_controller', 'bool', '7+', default=False),
    F('controller_epoch', 'int32', '0+'),
    F('broker_epoch', 'int64', '2+', default=-1),
    F('type', 'int8', '5+'),
    F('ungrouped_partition_states', '[]LeaderAndIsrPartitionState', '0-1', *_PARTITION_STATE),
    F('topic_states', '[]LeaderAndIsrTopicState', '2+',
        F('topic_name', 'string', '2+'),
        F('topic_id', 'uuid', '5+'),
        F('partition_states', '[]LeaderAndIsrPartitionState', '2+', *_PARTITION_STATE),
    ),
    F('live_leaders', '[]LeaderAndIsrLiveLeader', '0+',
        F('broker_id', 'int32', '0+'),
        F('host_name', 'string', '0+'),
        F('port', 'int32', '0+'),
    ),
)

_PARTITION_ERROR = (
    F('topic_name', 'string', '0-4'),
    F('partition_index', 'int32', '0+'),
    F('error_code', 'int16', '0+'),
)

RESPONSE = response(
    'LeaderAndIsrResponse', 4, '0-7', '4+',
    F('error_code', 'int16', '0+'),
    F('partition_errors', '[]LeaderAndIsrPartitionError', '0-4', *_PARTITION_ERROR),
    F('topics', '[]LeaderAndIsrTopicError', '5+',
        F('topic_id', 'uuid', '5+'),
        F('partition_errors', '[]LeaderAndIsrPartitionError', '5+', *_PARTITION_ERROR),
    ),
)
