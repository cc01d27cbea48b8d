"""UpdateMetadata: request and response layouts (api key 6).

The controller pushes its view of the cluster -- live brokers with their listeners and
racks, and every partition's leader, ISR and replicas -- to every broker, which answers
Metadata requests from that cache (``MetadataCache``).  A ZooKeeper-mode API (gone in
Kafka 4.0); the facts are 3.8's.

v0 gives each broker one host and port; v1+ a list of endpoints with their security
protocol, v3+ named by listener; v2+ add the rack.  v0-4 list partition states flat,
each naming its topic; v5+ group them by topic, v7+ with the topic id.  v4+ add the
offline replicas.  v8 carries the request ``type`` as tagged field 0 (0 = unknown,
1 = incremental, 2 = full) and marks a KRaft controller during migration.
"""

from millrace.protocol.schema import F, request, response

# One partition's state; Kafka declares it once and uses it in both request layouts.
_PARTITION_STATE = (
    F('topic_name', 'string', '0-4'),
    F('partition_index', 'int32', '0+'),
    F('controller_epoch', 'int32', '0+'),
    F('leader', 'int32', '0+'),
    F('leader_epoch', 'int32', '0+'),
    F('isr', '[]int32', '0+'),
    F('zk_version', 'int32', '0+'),
    F('replicas', '[]int32', '0+'),
    F('offline_replicas', '[]int32', '4+'),
)

REQUEST = request(
    'UpdateMetadataRequest', 6, '0-8', '6+',
    F('controller_id', 'int32', '0+'),
    F('is_kraft_controller', 'bool', '8+', default=False),
    F('type', 'int8', '8+', default=0, tag=0, tagged='8+'),
    F('controller_epoch', 'int32', '0+'),
    F('broker_epoch', 'int64', '5+', default=-1),
    F('ungrouped_partition_states', '[]UpdateMetadataPartitionState', '0-4',
        *_PARTITION_STATE),
    F('topic_states', '[]UpdateMetadataTopicState', '5+',
        F('topic_name', 'string', '5+'),
        F('topic_id', 'uuid', '7+'),
        F('partition_states', '[]UpdateMetadataPartitionState', '5+', *_PARTITION_STATE),
    ),
    F('live_brokers', '[]UpdateMetadataBroker', '0+',
        F('id', 'int32', '0+'),
        F('v0_host', 'string', '0'),
        F('v0_port', 'int32', '0'),
        F('endpoints', '[]UpdateMetadataEndpoint', '1+',
            F('port', 'int32', '1+'),
            F('host', 'string', '1+'),
            F('listener', 'string', '3+'),
            F('security_protocol', 'int16', '1+'),
        ),
        F('rack', 'string', '2+', nullable='0+'),
    ),
)

RESPONSE = response(
    'UpdateMetadataResponse', 6, '0-8', '6+',
    F('error_code', 'int16', '0+'),
)
