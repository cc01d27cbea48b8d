"""SaslHandshake: request and response layouts (api key 17)."""

from millrace.protocol.schema import F, request, response

REQUEST = request(
    'SaslHandshakeRequest', 17, '0-1', 'none',
    F('mechanism', 'string', '0+'),
)

RESPONSE = response(
    'SaslHandshakeResponse', 17, '0-1', 'none',
    F('error_code', 'int16', '0+'),
    F('mechanisms', '[]string', '0+'),
)
