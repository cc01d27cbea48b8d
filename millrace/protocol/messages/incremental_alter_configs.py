"""IncrementalAlterConfigs: request and response layouts (api key 44)."""

from millrace.protocol.schema import F, request, response

REQUEST = request(
    'IncrementalAlterConfigsRequest', 44, '0-1', '1+',
    F('resources', '[]AlterConfigsResource', '0+',
        F('resource_type', 'int8', '0+'),
        F('resource_name', 'string', '0+'),
        F('configs', '[]AlterableConfig', '0+',
            F('name', 'string', '0+'),
            F('config_operation', 'int8', '0+'),
            F('value', 'string', '0+', nullable='0+'),
        ),
    ),
    F('validate_only', 'bool', '0+'),
)

RESPONSE = response(
    'IncrementalAlterConfigsResponse', 44, '0-1', '1+',
    F('throttle_time_ms', 'int32', '0+'),
    F('responses', '[]AlterConfigsResourceResponse', '0+',
        F('error_code', 'int16', '0+'),
        F('error_message', 'string', '0+', nullable='0+'),
        F('resource_type', 'int8', '0+'),
        F('resource_name', 'string', '0+'),
    ),
)
