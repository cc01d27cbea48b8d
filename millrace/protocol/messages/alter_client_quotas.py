"""AlterClientQuotas: request and response layouts (api key 49, KIP-546).

Each entry names one quota entity (a list of (entity type, name) pairs; a null name is
the default entity) and the operations on its keys: set ``key`` to ``value``, or remove
it (``remove`` true, ``value`` ignored).  ``validate_only`` checks without writing.  The
response has one result per entry, naming the entity again.  v1 is the first flexible
version.
"""

from millrace.protocol.schema import F, request, response

REQUEST = request(
    'AlterClientQuotasRequest', 49, '0-1', '1+',
    F('entries', '[]EntryData', '0+',
        F('entity', '[]EntityData', '0+',
            F('entity_type', 'string', '0+'),
            F('entity_name', 'string', '0+', nullable='0+'),
        ),
        F('ops', '[]OpData', '0+',
            F('key', 'string', '0+'),
            F('value', 'float64', '0+'),
            F('remove', 'bool', '0+'),
        ),
    ),
    F('validate_only', 'bool', '0+'),
)

RESPONSE = response(
    'AlterClientQuotasResponse', 49, '0-1', '1+',
    F('throttle_time_ms', 'int32', '0+'),
    F('entries', '[]EntryData', '0+',
        F('error_code', 'int16', '0+'),
        F('error_message', 'string', '0+', nullable='0+'),
        F('entity', '[]EntityData', '0+',
            F('entity_type', 'string', '0+'),
            F('entity_name', 'string', '0+', nullable='0+'),
        ),
    ),
)
