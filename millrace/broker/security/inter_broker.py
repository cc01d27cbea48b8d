"""How this broker talks to the others: the inter-broker listener's security, client side.

Replica fetchers, the controller's requests, controlled shutdown, transaction markers
and KIP-890 verifications all go through a ``BrokerChannel`` to the other broker's
inter-broker endpoint (``inter.broker.listener.name`` / ``security.inter.broker.protocol``);
``ChannelSecurity`` says how such a channel connects:

* TLS when the inter-broker listener is SSL / SASL_SSL: a client context from that
  listener's ``ssl.*`` settings (its keystore is the broker's client certificate, its
  truststore checks the peer; ``ssl.endpoint.identification.algorithm=https`` -- the
  default -- checks the peer's certificate against the host it advertises);
* SASL when it is SASL_PLAINTEXT / SASL_SSL: ``sasl.mechanism.inter.broker.protocol``
  with the broker's own ``username`` / ``password`` from that listener's JAAS text for the
  mechanism (``listener.name.<l>.<mech>.sasl.jaas.config``), exchanged as any client
  would (SaslHandshake v1, then SaslAuthenticate rounds) before the first request.

There is no fallback: a channel whose handshake or authentication fails is closed and the
caller retries later, on the same listener.  ``inter_broker_security`` is built once per
``KafkaConfig`` (the SSL context is shared by every channel).

Thread ownership: built on the main thread; ``authenticate`` runs on the event loop.
"""

from __future__ import annotations

import ssl
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from millrace.broker.security.listener_security import jaas_for, listener_ssl_config
from millrace.common.errors import ConfigError, SaslAuthenticationError
from millrace.protocol.types import SaslAuthenticateRequest, SaslHandshakeRequest
from millrace.security.sasl import create_sasl_client
from millrace.security.ssl_factory import SslFactory

if TYPE_CHECKING:
    from millrace.broker.config import KafkaConfig

SASL_HANDSHAKE_VERSION = 1
SASL_AUTHENTICATE_VERSION = 2


@dataclass(frozen=True)
class ChannelSecurity:
    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    mechanism: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    @property
    def uses_sasl(self) -> bool:
        return self.mechanism is not None


PLAINTEXT_CHANNEL = ChannelSecurity()
# built once per config (one SSL context for every channel), gone with the config
_BUILT: weakref.WeakKeyDictionary[KafkaConfig, ChannelSecurity] = weakref.WeakKeyDictionary()


def inter_broker_security(config: KafkaConfig) -> ChannelSecurity:
    """The inter-broker listener's client-side security (built once per config)."""
    security = _BUILT.get(config)
    if security is None:
        security = _BUILT[config] = _build(config)
    return security


def _build(config: KafkaConfig) -> ChannelSecurity:
    listener = config.listener(config.inter_broker_listener_name)
    if listener.protocol == "PLAINTEXT":
        return PLAINTEXT_CHANNEL
    context = None
    if listener.uses_tls:
        context = SslFactory.client_context(
            listener_ssl_config(config, listener.name, server=False))
    if not listener.uses_sasl:
        return ChannelSecurity(listener.protocol, context)
    mechanism = str(config["sasl.mechanism.inter.broker.protocol"]).upper()
    jaas = jaas_for(config, listener.name, mechanism)
    key = f"listener.name.{listener.name.lower()}.{mechanism.lower()}.sasl.jaas.config"
    if jaas is None or not jaas.options.get("username") or "password" not in jaas.options:
        raise ConfigError(
            f"The inter-broker listener {listener.name} uses SASL/{mechanism} "
            "(sasl.mechanism.inter.broker.protocol) but no username/password is set for "
            f"the broker itself: set {key} (or sasl.jaas.config) with username=\"...\" "
            'password="..." options')
    return ChannelSecurity(listener.protocol, context, mechanism, jaas.options["username"],
                           jaas.options["password"])


async def authenticate(exchange: Callable[[Any, int], Awaitable[Any]],
                       security: ChannelSecurity) -> None:
    """SASL over a fresh channel (Kafka's ``SaslClientAuthenticator``), each request sent
    with ``exchange(body, version)``, which returns the response body;
    ``SaslAuthenticationError`` with the peer's message when it refuses."""
    assert security.mechanism is not None and security.username is not None
    client = create_sasl_client(security.mechanism, security.username,
                                security.password or "")
    handshake = await exchange(SaslHandshakeRequest(mechanism=security.mechanism),
                               SASL_HANDSHAKE_VERSION)
    if handshake.error_code:
        raise SaslAuthenticationError(
            f"the broker refused SASL mechanism {security.mechanism} "
            f"(error {handshake.error_code}; enabled: "
            f"{', '.join(handshake.mechanisms)})")
    token = client.evaluate_challenge(b"")
    while token is not None:
        resp = await exchange(SaslAuthenticateRequest(auth_bytes=token),
                              SASL_AUTHENTICATE_VERSION)
        if resp.error_code:
            raise SaslAuthenticationError(
                f"inter-broker SASL/{security.mechanism} authentication as "
                f"{security.username!r} failed: {resp.error_message or f'error {resp.error_code}'}")
        if client.is_complete():
            break
        token = client.evaluate_challenge(bytes(resp.auth_bytes))
    if not client.is_complete():
        raise SaslAuthenticationError(
            f"inter-broker SASL/{security.mechanism} exchange ended before completion")
