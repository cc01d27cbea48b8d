"""ApiVersions: request and response layouts (api key 18)."""

from millrace.protocol.schema import F, request, response

REQUEST = request(
    'ApiVersionsRequest', 18, '0-4', '3+',
    F('client_software_name', 'string', '3+'),
    F('client_software_version', 'string', '3+'),
)

RESPONSE = response(
    'ApiVersionsResponse', 18, '0-4', '3+',
    F('error_code', 'int16', '0+'),
    F('api_keys', '[]ApiVersion', '0+',
        F('api_key', 'int16', '0+'),
        F('min_version', 'int16', '0+'),
        F('max_version', 'int16', '0+'),
    ),
    F('throttle_time_ms', 'int32', '1+'),
    F('supported_features', '[]SupportedFeatureKey', '3+',
        F('name', 'string', '3+'),
        F('min_version', 'int16', '3+'),
        F('max_version', 'int16', '3+'),
        tag=0, tagged='3+'),
    F('finalized_features_epoch', 'int64', '3+', default=-1, tag=1, tagged='3+'),
    F('finalized_features', '[]FinalizedFeatureKey', '3+',
        F('name', 'string', '3+'),
        F('max_version_level', 'int16', '3+'),
        F('min_version_level', 'int16', '3+'),
        tag=2, tagged='3+'),
    F('zk_migration_ready', 'bool', '3+', default=False, tag=3, tagged='3+'),
)
