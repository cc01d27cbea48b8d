"""EndTxn: request and response layouts (api key 26)."""

from millrace.protocol.schema import F, request, response

REQUEST = request(
    'EndTxnRequest', 26, '0-5', '3+',
    F('transactional_id', 'string', '0+'),
    F('producer_id', 'int64', '0+'),
    F('producer_epoch', 'int16', '0+'),
    F('committed', 'bool', '0+'),
)

RESPONSE = response(
    'EndTxnResponse', 26, '0-5', '3+',
    F('throttle_time_ms', 'int32', '0+'),
    F('error_code', 'int16', '0+'),
    F('producer_id', 'int64', '5+', default=-1),
    F('producer_epoch', 'int16', '5+', default=-1),
)
