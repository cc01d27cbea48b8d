"""How a client secures its connections (Java ``ChannelBuilders`` + ``JaasContext``).

``client_security(values)`` reads the parsed security keys of ``common_client_configs``
and answers a ``ClientSecurity``: the protocol, the ``ssl.SSLContext`` for SSL/SASL_SSL
(built by ``millrace.security.ssl_factory.client_ssl_context`` from librdkafka's file
keys) and, for SASL_*, the ``SaslCredentials`` the ``NetworkClient`` authenticates with.

Everything that can be wrong with these settings is found here, when the client is
built, and raised as ``ConfigError`` naming the key: an unknown protocol, a mechanism
millrace does not implement (GSSAPI -- Kafka's default -- and OAUTHBEARER), a missing
user name or password, a ``sasl.jaas.config`` that does not parse, unreadable TLS files.

The mechanism comes from ``sasl.mechanism`` or librdkafka's alias ``sasl.mechanisms``
(both set: they must agree).  The credentials come from ``sasl.username`` /
``sasl.password`` (librdkafka) or from the ``username``/``password`` options of a Java
style ``sasl.jaas.config`` (``PlainLoginModule``/``ScramLoginModule``); given both ways,
the explicit keys win, as in librdkafka, which has no JAAS.

Passwords never appear in a repr or a log line: ``SaslCredentials`` hides its password.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from millrace.common.errors import ConfigError
from millrace.security.jaas import parse_jaas_config
from millrace.security.kafka_principal import SecurityProtocol
from millrace.security.sasl import SUPPORTED_MECHANISMS, SaslClient, create_sasl_client
from millrace.security.ssl_factory import client_ssl_context

# The login modules whose username/password options a client reads.  Kafka's client
# takes the credentials either module puts in the Subject whatever the mechanism, so
# either is accepted with any of our mechanisms; Kerberos or OAuth modules are not.
_LOGIN_MODULES = ("org.apache.kafka.common.security.plain.PlainLoginModule",
                  "org.apache.kafka.common.security.scram.ScramLoginModule")


@dataclass(frozen=True)
class SaslCredentials:
    """One SASL identity: the mechanism and the user it authenticates as."""

    mechanism: str
    username: str
    password: str = field(repr=False)

    def create_client(self) -> SaslClient:
        """A fresh mechanism state machine (one per connection)."""
        return create_sasl_client(self.mechanism, self.username, self.password)


@dataclass(frozen=True)
class ClientSecurity:
    protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    ssl_context: ssl.SSLContext | None = None
    sasl: SaslCredentials | None = None


PLAINTEXT = ClientSecurity()


def client_security(values: Mapping[str, Any]) -> ClientSecurity:
    """The security of a client from its parsed configuration (ConfigError if wrong)."""
    protocol = SecurityProtocol.parse(values.get("security.protocol") or "PLAINTEXT")
    if protocol is SecurityProtocol.PLAINTEXT:
        return PLAINTEXT
    context = _ssl_context(values) if protocol.uses_tls else None
    sasl = _sasl_credentials(values, protocol) if protocol.uses_sasl else None
    return ClientSecurity(protocol, context, sasl)


def _ssl_context(values: Mapping[str, Any]) -> ssl.SSLContext:
    algorithm = (values.get("ssl.endpoint.identification.algorithm") or "").strip().lower()
    return client_ssl_context(
        ca_location=values.get("ssl.ca.location"),
        certificate_location=values.get("ssl.certificate.location"),
        key_location=values.get("ssl.key.location"),
        key_password=values.get("ssl.key.password"),
        endpoint_identification="https" if algorithm == "https" else "none",
        ca_pem=values.get("ssl.ca.pem"))


def _mechanism(values: Mapping[str, Any], protocol: SecurityProtocol) -> str:
    primary = (values.get("sasl.mechanism") or "GSSAPI").strip()
    alias = values.get("sasl.mechanisms")
    mechanism = primary
    if alias is not None and alias.strip():
        mechanism = alias.strip()
        if primary.upper() not in ("GSSAPI", mechanism.upper()):
            raise ConfigError(f"sasl.mechanism ({primary}) and sasl.mechanisms ({mechanism}) "
                              "disagree; set one of them")
    mechanism = mechanism.upper()
    if "," in mechanism or " " in mechanism:
        raise ConfigError(f"Invalid value {mechanism} for configuration sasl.mechanism: "
                          "exactly one mechanism may be configured")
    if mechanism not in SUPPORTED_MECHANISMS:
        raise ConfigError(
            f"{mechanism} is not supported; set sasl.mechanism to "
            f"{', '.join(SUPPORTED_MECHANISMS[:-1])} or {SUPPORTED_MECHANISMS[-1]} "
            f"(security.protocol={protocol.name})")
    return mechanism


def _sasl_credentials(values: Mapping[str, Any], protocol: SecurityProtocol
                      ) -> SaslCredentials:
    mechanism = _mechanism(values, protocol)
    username: str | None = values.get("sasl.username")
    password: str | None = values.get("sasl.password")
    jaas_text = values.get("sasl.jaas.config")
    if jaas_text:
        jaas = parse_jaas_config(jaas_text)
        if jaas.login_module not in _LOGIN_MODULES:
            raise ConfigError(f"sasl.jaas.config: login module {jaas.login_module} is not "
                              f"supported; use {' or '.join(_LOGIN_MODULES)}")
        if username is None:
            username = jaas.options.get("username")
        if password is None:
            password = jaas.options.get("password")
    if not username:
        raise ConfigError(f"security.protocol={protocol.name} with sasl.mechanism={mechanism} "
                          "needs a user name: set sasl.username (or username in "
                          "sasl.jaas.config)")
    if password is None:
        raise ConfigError(f"security.protocol={protocol.name} with sasl.mechanism={mechanism} "
                          f"needs the password of user {username}: set sasl.password (or "
                          "password in sasl.jaas.config)")
    credentials = SaslCredentials(mechanism, username, password)
    credentials.create_client()  # the mechanism's own checks (e.g. NUL in a PLAIN name)
    return credentials
