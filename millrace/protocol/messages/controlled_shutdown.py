"""ControlledShutdown: request and response layouts (api key 7).

A broker about to stop asks the controller to move leadership away from it first; the
controller answers with the partitions it could not move yet (the broker retries).  A
ZooKeeper-mode API (gone in Kafka 4.0); the facts are 3.8's.

v0 is sent with request header v0, which has no client id (``headers.py``); v1+ use
the standard headers.  v2+ carry the broker epoch so that a request from a previous
incarnation of the broker is refused (STALE_BROKER_EPOCH).
"""

from millrace.protocol.schema import F, request, response

REQUEST = request(
    'ControlledShutdownRequest', 7, '0-3', '3+',
    F('broker_id', 'int32', '0+'),
    F('broker_epoch', 'int64', '2+', default=-1),
)

RESPONSE = response(
    'ControlledShutdownResponse', 7, '0-3', '3+',
    F('error_code', 'int16', '0+'),
    F('remaining_partitions', '[]RemainingPartition', '0+',
        F('topic_name', 'string', '0+'),
        F('partition_index', 'int32', '0+'),
    ),
)
