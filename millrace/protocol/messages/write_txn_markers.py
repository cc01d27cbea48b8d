"""WriteTxnMarkers: request and response layouts (api key 27)."""

from millrace.protocol.schema import F, request, response

REQUEST = request(
    'WriteTxnMarkersRequest', 27, '1-2', '1+',
    F('markers', '[]WritableTxnMarker', '0+',
        F('producer_id', 'int64', '0+'),
        F('producer_epoch', 'int16', '0+'),
        F('transaction_result', 'bool', '0+'),
        F('topics', '[]WritableTxnMarkerTopic', '0+',
            F('name', 'string', '0+'),
            F('partition_indexes', '[]int32', '0+'),
        ),
        F('coordinator_epoch', 'int32', '0+'),
        F('transaction_version', 'int8', '2+', default=0),
    ),
)

RESPONSE = response(
    'WriteTxnMarkersResponse', 27, '1-2', '1+',
    F('markers', '[]WritableTxnMarkerResult', '0+',
        F('producer_id', 'int64', '0+'),
        F('topics', '[]WritableTxnMarkerTopicResult', '0+',
            F('name', 'string', '0+'),
            F('partitions', '[]WritableTxnMarkerPartitionResult', '0+',
                F('partition_index', 'int32', '0+'),
                F('error_code', 'int16', '0+'),
            ),
        ),
    ),
)
