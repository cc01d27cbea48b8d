"""InitProducerId: request and response layouts (api key 22)."""

from millrace.protocol.schema import F, request, response

REQUEST = request(
    'InitProducerIdRequest', 22, '0-6', '2+',
    F('transactional_id', 'string', '0+', nullable='0+'),
    F('transaction_timeout_ms', 'int32', '0+'),
    F('producer_id', 'int64', '3+', default=-1),
    F('producer_epoch', 'int16', '3+', default=-1),
    F('enable2_pc', 'bool', '6+', default=False),
    F('keep_prepared_txn', 'bool', '6+', default=False),
)

RESPONSE = response(
    'InitProducerIdResponse', 22, '0-6', '2+',
    F('throttle_time_ms', 'int32', '0+'),
    F('error_code', 'int16', '0+'),
    F('producer_id', 'int64', '0+', default=-1),
    F('producer_epoch', 'int16', '0+'),
    F('ongoing_txn_producer_id', 'int64', '6+', default=-1),
    F('ongoing_txn_producer_epoch', 'int16', '6+', default=-1),
)
