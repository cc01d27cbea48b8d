"""SaslAuthenticate: request and response layouts (api key 36)."""

from millrace.protocol.schema import F, request, response

REQUEST = request(
    'SaslAuthenticateRequest', 36, '0-2', '2+',
    F('auth_bytes', 'bytes', '0+'),
)

RESPONSE = response(
    'SaslAuthenticateResponse', 36, '0-2', '2+',
    F('error_code', 'int16', '0+'),
    F('error_message', 'string', '0+', nullable='0+'),
    F('auth_bytes', 'bytes', '0+'),
    F('session_lifetime_ms', 'int64', '1+', default=0),
)
