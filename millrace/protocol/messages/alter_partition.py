"""AlterPartition (formerly AlterIsr): request and response layouts (api key 56).

A partition leader asks the controller to change the ISR (KIP-497): the controller
writes the new state to ZooKeeper and answers with the state now in force, including
the new ``partition_epoch`` (the ``state`` znode's version).  Until the answer comes
the leader counts the wider of the old and proposed ISRs for the high watermark.

Flexible in every version.  v0-1 name the topic, v2+ give its id; v1+ carry the
leader recovery state (KIP-704); v3+ send each new ISR member with its broker epoch
(KIP-903) instead of a bare broker id.
"""

from millrace.protocol.schema import F, request, response

REQUEST = request(
    'AlterPartitionRequest', 56, '0-3', '0+',
    F('broker_id', 'int32', '0+'),
    F('broker_epoch', 'int64', '0+', default=-1),
    F('topics', '[]TopicData', '0+',
        F('topic_name', 'string', '0-1'),
        F('topic_id', 'uuid', '2+'),
        F('partitions', '[]PartitionData', '0+',
            F('partition_index', 'int32', '0+'),
            F('leader_epoch', 'int32', '0+'),
            F('new_isr', '[]int32', '0-2'),
            F('new_isr_with_epochs', '[]BrokerState', '3+',
                F('broker_id', 'int32', '3+'),
                F('broker_epoch', 'int64', '3+', default=-1),
            ),
            F('leader_recovery_state', 'int8', '1+', default=0),
            F('partition_epoch', 'int32', '0+'),
        ),
    ),
)

RESPONSE = response(
    'AlterPartitionResponse', 56, '0-3', '0+',
    F('throttle_time_ms', 'int32', '0+'),
    F('error_code', 'int16', '0+'),
    F('topics', '[]TopicData', '0+',
        F('topic_name', 'string', '0-1'),
        F('topic_id', 'uuid', '2+'),
        F('partitions', '[]PartitionData', '0+',
            F('partition_index', 'int32', '0+'),
            F('error_code', 'int16', '0+'),
            F('leader_id', 'int32', '0+'),
            F('leader_epoch', 'int32', '0+'),
            F('isr', '[]int32', '0+'),
            F('leader_recovery_state', 'int8', '1+', default=0),
            F('partition_epoch', 'int32', '0+'),
        ),
    ),
)
