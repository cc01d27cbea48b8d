"""Building what every client needs the same way (Java ``ClientUtils``).

``create_network_client`` turns a client's parsed configuration (the common keys of
``common_client_configs``) into its ``NetworkClient``.  The producer, the consumer and the
admin client all build theirs here, so this is the one place where the connection
settings are read -- and where TLS and SASL are wired (``security.protocol``, ``ssl.*``,
``sasl.*``; Java's ``ChannelBuilders``): ``client_security`` checks them (``ConfigError``
when the client is built, not at the first connection), SSL/SASL_SSL get an
``SslSelector`` with the TLS context, SASL_* hand the credentials to the
``NetworkClient``, which authenticates every connection before using it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from millrace.client._client_security import client_security
from millrace.client._selector import Selector
from millrace.client._ssl_selector import SslSelector
from millrace.client.api_versions import ApiVersions
from millrace.client.metadata import Metadata
from millrace.client.network_client import NetworkClient
from millrace.common.time import Time


def create_network_client(config: Mapping[str, Any], metadata: Metadata, *, client_id: str,
                          max_in_flight_requests_per_connection: int, time: Time,
                          selector: Selector | None = None,
                          api_versions: ApiVersions | None = None) -> NetworkClient:
    """The ``NetworkClient`` of one client: ``config`` is its parsed values (the common
    client keys), ``metadata`` its already bootstrapped ``Metadata``; ``selector`` is for
    tests that script the sockets (TLS settings are then checked but not used)."""
    security = client_security(config)
    if selector is None and security.ssl_context is not None:
        selector = SslSelector(security.ssl_context, config["send.buffer.bytes"],
                               config["receive.buffer.bytes"])
    return NetworkClient(
        metadata, selector=selector, client_id=client_id,
        max_in_flight_requests_per_connection=max_in_flight_requests_per_connection,
        reconnect_backoff_ms=config["reconnect.backoff.ms"],
        reconnect_backoff_max_ms=config["reconnect.backoff.max.ms"],
        request_timeout_ms=config["request.timeout.ms"],
        connection_setup_timeout_ms=config["socket.connection.setup.timeout.ms"],
        connection_setup_timeout_max_ms=config["socket.connection.setup.timeout.max.ms"],
        send_buffer_bytes=config["send.buffer.bytes"],
        receive_buffer_bytes=config["receive.buffer.bytes"], time=time,
        api_versions=api_versions, sasl=security.sasl)
