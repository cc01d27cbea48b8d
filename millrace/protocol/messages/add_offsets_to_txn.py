"""AddOffsetsToTxn: request and response layouts (api key 25)."""

from millrace.protocol.schema import F, request, response

REQUEST = request(
    'AddOffsetsToTxnRequest', 25, '0-4', '3+',
    F('transactional_id', 'string', '0+'),
    F('producer_id', 'int64', '0+'),
    F('producer_epoch', 'int16', '0+'),
    F('group_id', 'string', '0+'),
)

RESPONSE = response(
    'AddOffsetsToTxnResponse', 25, '0-4', '3+',
    F('throttle_time_ms', 'int32', '0+'),
    F('error_code', 'int16', '0+'),
)
