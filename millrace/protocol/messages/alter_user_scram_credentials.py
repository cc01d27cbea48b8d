"""AlterUserScramCredentials: request and response layouts (api key 51, KIP-554).

The client sends the salt and the salted password (PBKDF2 of the password), never the
password itself; the broker derives StoredKey and ServerKey from them.  The response has
one result per user named in the request.
"""

from millrace.protocol.schema import F, request, response

REQUEST = request(
    'AlterUserScramCredentialsRequest', 51, '0', '0+',
    F('deletions', '[]ScramCredentialDeletion', '0+',
        F('name', 'string', '0+'),
        F('mechanism', 'int8', '0+'),
    ),
    F('upsertions', '[]ScramCredentialUpsertion', '0+',
        F('name', 'string', '0+'),
        F('mechanism', 'int8', '0+'),
        F('iterations', 'int32', '0+'),
        F('salt', 'bytes', '0+'),
        F('salted_password', 'bytes', '0+'),
    ),
)

RESPONSE = response(
    'AlterUserScramCredentialsResponse', 51, '0', '0+',
    F('throttle_time_ms', 'int32', '0+'),
    F('results', '[]AlterUserScramCredentialsResult', '0+',
        F('user', 'string', '0+'),
        F('error_code', 'int16', '0+'),
        F('error_message', 'string', '0+', nullable='0+'),
    ),
)
