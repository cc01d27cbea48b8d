"""``ListenerSecurity``: what one listener asks of its connections (Kafka's
``ChannelBuilders`` + ``SaslChannelBuilder``).

Built once per listener at start-up from the listener-scoped settings (the most specific
of ``listener.name.<l>.<mechanism>.<key>``, ``listener.name.<l>.<key>``, ``<key>``), so
a bad keystore, an unreadable truststore, a JAAS text that does not parse or a SASL
listener without users stops the broker before it binds anything, with the key named.

* ``SSL`` / ``SASL_SSL``: a server ``ssl.SSLContext``.  Client certificates: on an SSL
  listener ``ssl.client.auth`` (none / requested / required); on a SASL_SSL listener
  only the listener-prefixed form counts, as in Kafka, since SASL already authenticates.
  On an SSL listener the principal is the client certificate's DN mapped by
  ``ssl.principal.mapping.rules`` (``User:ANONYMOUS`` without a certificate).
* ``SASL_PLAINTEXT`` / ``SASL_SSL``: the enabled mechanisms; PLAIN's users come from
  the JAAS options ``user_<name>="<password>"``; SCRAM's credentials from the broker's
  ``CredentialCache`` (ZooKeeper / the local metadata store), attached once services
  exist (``scram_lookup``).

Thread ownership: built on the main thread, then read-only on the event-loop thread.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from millrace.common.errors import ConfigError
from millrace.security.jaas import JaasConfig, parse_jaas_config, plain_users
from millrace.security.kafka_principal import ANONYMOUS, KafkaPrincipal
from millrace.security.sasl import SaslServer
from millrace.security.sasl.plain import PlainSaslServer
from millrace.security.sasl.scram import ScramCredential, ScramMechanism, ScramSaslServer
from millrace.security.ssl_factory import SSL_CONFIG_KEYS, SslFactory, peer_principal_dn
from millrace.security.ssl_principal_mapper import NoMatchingRule, SslPrincipalMapper

if TYPE_CHECKING:
    from millrace.broker.config import KafkaConfig, Listener

log = logging.getLogger(__name__)

ScramLookup = Callable[[str, str], ScramCredential | None]


@dataclass
class ListenerSecurity:
    listener: str
    protocol: str
    ssl_context: ssl.SSLContext | None = None
    principal_mapper: SslPrincipalMapper | None = None
    mechanisms: tuple[str, ...] = ()
    plain_users: dict[str, str] = field(default_factory=dict, repr=False)
    reauth_ms: dict[str, int] = field(default_factory=dict)
    failed_authentication_delay_ms: int = 100
    max_receive_size: int = 524288
    scram_lookup: ScramLookup | None = field(default=None, repr=False)

    @property
    def uses_tls(self) -> bool:
        return self.ssl_context is not None

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def sasl_server(self, mechanism: str) -> SaslServer:
        """A fresh server-side exchange for ``mechanism`` (one of ``mechanisms``)."""
        if mechanism == "PLAIN":
            return PlainSaslServer(self.plain_users.get)
        scram = ScramMechanism.from_name(mechanism)
        assert scram is not None, mechanism
        lookup = self.scram_lookup

        def credential(user: str) -> ScramCredential | None:
            return lookup(mechanism, user) if lookup is not None else None
        return ScramSaslServer(scram, credential)

    def session_lifetime_ms(self, mechanism: str) -> int:
        """``connections.max.reauth.ms`` for this mechanism (0: sessions do not expire)."""
        return self.reauth_ms.get(mechanism, 0)

    def ssl_principal(self, ssl_object: Any) -> KafkaPrincipal:
        """The principal of an SSL connection: the mapped DN of the client's certificate,
        ``User:ANONYMOUS`` without one.  ``NoMatchingRule`` fails the connection."""
        dn = peer_principal_dn(ssl_object) if ssl_object is not None else None
        if dn is None or self.principal_mapper is None:
            return ANONYMOUS
        return KafkaPrincipal("User", self.principal_mapper.get_name(dn))


def _as_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def listener_ssl_config(config: KafkaConfig, listener: str, *, server: bool
                        ) -> dict[str, str | None]:
    """The ``ssl.*`` settings as ``listener`` sees them, as text for ``SslFactory``."""
    out = {key: _as_text(config.listener_value(listener, key)) for key in SSL_CONFIG_KEYS
           if key in config.values}
    protocol = config.listener(listener).protocol
    if server and protocol == "SASL_SSL" and not config.listener_has(listener,
                                                                     "ssl.client.auth"):
        out["ssl.client.auth"] = "none"  # Kafka: only the prefixed form counts here
    return out


def jaas_for(config: KafkaConfig, listener: str, mechanism: str) -> JaasConfig | None:
    text = config.listener_value(listener, "sasl.jaas.config", mechanism)
    if not text:
        return None
    return parse_jaas_config(str(text),
                             config.listener_key(listener, "sasl.jaas.config", mechanism))


def build_listener_security(config: KafkaConfig, listener: Listener) -> ListenerSecurity:
    name = listener.name
    sec = ListenerSecurity(
        listener=name, protocol=listener.protocol,
        failed_authentication_delay_ms=config["connection.failed.authentication.delay.ms"],
        max_receive_size=config["sasl.server.max.receive.size"])
    if listener.uses_tls:
        sec.ssl_context = SslFactory.server_context(
            listener_ssl_config(config, name, server=True))
        if listener.protocol == "SSL":
            rules = config.listener_value(name, "ssl.principal.mapping.rules")
            sec.principal_mapper = SslPrincipalMapper.from_rules(rules)
    if listener.uses_sasl:
        mechanisms = tuple(m.upper() for m in
                           config.listener_value(name, "sasl.enabled.mechanisms"))
        sec.mechanisms = mechanisms
        for mech in mechanisms:
            sec.reauth_ms[mech] = int(config.listener_value(name, "connections.max.reauth.ms",
                                                            mech))
        if "PLAIN" in mechanisms:
            jaas = jaas_for(config, name, "PLAIN")
            if jaas is None:
                raise ConfigError(
                    f"listener {name} enables SASL/PLAIN but has no JAAS configuration: set "
                    f"listener.name.{name.lower()}.plain.sasl.jaas.config (or "
                    "sasl.jaas.config) to org.apache.kafka.common.security.plain."
                    'PlainLoginModule required user_<name>="<password>" ...;')
            sec.plain_users = plain_users(jaas)
    return sec


def build_all(config: KafkaConfig) -> dict[str, ListenerSecurity]:
    return {ls.name: build_listener_security(config, ls) for ls in config.listeners}


__all__ = ["ListenerSecurity", "NoMatchingRule", "ScramLookup", "build_all",
           "build_listener_security", "jaas_for", "listener_ssl_config"]
