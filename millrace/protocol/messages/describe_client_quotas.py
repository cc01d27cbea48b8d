"""DescribeClientQuotas: request and response layouts (api key 48, KIP-546).

The request is a filter: components, each naming an entity type (``user``,
``client-id``, ``ip``) and how to match it -- 0 the exact name in ``match``, 1 the
default entity, 2 any name given (``match`` unused for 1 and 2) -- and ``strict``, which
leaves out entities having a type the components do not name.  The response has one
top-level error (the whole request fails or succeeds) and, on success, the matching
entities with their quota values (doubles); a null entity name is the default entity.
``entries`` is null in an error response.  v1 is the first flexible version.
"""

from millrace.protocol.schema import F, request, response

REQUEST = request(
    'DescribeClientQuotasRequest', 48, '0-1', '1+',
    F('components', '[]ComponentData', '0+',
        F('entity_type', 'string', '0+'),
        F('match_type', 'int8', '0+'),
        F('match', 'string', '0+', nullable='0+'),
    ),
    F('strict', 'bool', '0+'),
)

RESPONSE = response(
    'DescribeClientQuotasResponse', 48, '0-1', '1+',
    F('throttle_time_ms', 'int32', '0+'),
    F('error_code', 'int16', '0+'),
    F('error_message', 'string', '0+', nullable='0+'),
    F('entries', '[]EntryData', '0+',
        F('entity', '[]EntityData', '0+',
            F('entity_type', 'string', '0+'),
            F('entity_name', 'string', '0+', nullable='0+'),
        ),
        F('values', '[]ValueData', '0+',
            F('key', 'string', '0+'),
            F('value', 'float64', '0+'),
        ),
        nullable='0+',
    ),
)
