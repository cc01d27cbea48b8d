"""DescribeUserScramCredentials: request and response layouts (api key 50, KIP-554).

A null or empty ``users`` asks for every user holding a SCRAM credential.  The response
carries only each credential's mechanism (1 = SCRAM-SHA-256, 2 = SCRAM-SHA-512) and
iteration count, never the salt or the keys.
"""

from millrace.protocol.schema import F, request, response

REQUEST = request(
    'DescribeUserScramCredentialsRequest', 50, '0', '0+',
    F('users', '[]UserName', '0+',
        F('name', 'string', '0+'),
        nullable='0+'),
)

RESPONSE = response(
    'DescribeUserScramCredentialsResponse', 50, '0', '0+',
    F('throttle_time_ms', 'int32', '0+'),
    F('error_code', 'int16', '0+'),
    F('error_message', 'string', '0+', nullable='0+'),
    F('results', '[]DescribeUserScramCredentialsResult', '0+',
        F('user', 'string', '0+'),
        F('error_code', 'int16', '0+'),
        F('error_message', 'string', '0+', nullable='0+'),
        F('credential_infos', '[]CredentialInfo', '0+',
            F('mechanism', 'int8', '0+'),
            F('iterations', 'int32', '0+'),
        ),
    ),
)
