"""ApiVersions (key 18): which versions of which APIs this broker serves.

Clients send it first on every connection and then use, per API, the highest version
both sides know.  librdkafka before 2.11.1 only turns on compression if Produce v0 is
inside the advertised range, so Produce is advertised from 0 (as Kafka 4 does) while
v0-2 requests themselves are refused.  v3+ requests carry the client software name and
version, which must match Kafka's pattern or the answer is INVALID_REQUEST.  With
``transaction.version=2`` the v3+ answer carries the feature ``transaction.version`` as
supported (0-2) and finalized (level 2) in its tagged fields; with 1 it carries no
features at all (a Kafka 4 client then keeps the classic protocol).
"""

from __future__ import annotations

import re

from millrace.broker.context import RequestContext
from millrace.broker.handlers import handles
from millrace.common.errors import Errors
from millrace.protocol import ApiKey
from millrace.protocol.types import (
    ApiVersionsRequest,
    ApiVersionsResponse,
)

TRANSACTION_VERSION_FEATURE = "transaction.version"
_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


@handles(ApiKey.API_VERSIONS)
async def handle_api_versions(ctx: RequestContext, body: ApiVersionsRequest) -> ApiVersionsResponse:
    cls = ApiVersionsResponse
    if ctx.version >= 3 and not (_SOFTWARE.match(body.client_software_name or "")
                                 and _SOFTWARE.match(body.client_software_version or "")):
        return cls(error_code=Errors.INVALID_REQUEST, api_keys=[])
    keys = [cls.ApiVersion(api_key=key, min_version=lo, max_version=hi)
            for key, (lo, hi) in sorted(ctx.services.api_versions.advertised.items())]
    response = cls(error_code=Errors.NONE, api_keys=keys, throttle_time_ms=0)
    if ctx.version >= 3 and ctx.services.api_versions.transaction_version >= 2:
        # KIP-890 part 2 is on: Kafka 4 clients switch to it when they see the
        # finalized level (Kafka's FinalizedFeatures, set with kafka-features.sh).
        response.supported_features = [cls.SupportedFeatureKey(
            name=TRANSACTION_VERSION_FEATURE, min_version=0, max_version=2)]
        response.finalized_features_epoch = 0
        response.finalized_features = [cls.FinalizedFeatureKey(
            name=TRANSACTION_VERSION_FEATURE, max_version_level=2, min_version_level=2)]
    return response
