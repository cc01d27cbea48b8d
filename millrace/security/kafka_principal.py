"""Who a connection is, and how it is secured (Java: ``KafkaPrincipal``, ``SecurityProtocol``).

A ``KafkaPrincipal`` is the identity the authorizer sees: a type (always ``User`` for the
built-in principal builder) and a name.  Its string form ``User:alice`` is the one used in ACLs,
``super.users`` and log lines, so ``parse(str(p)) == p``.

Where the name comes from depends on the listener's ``SecurityProtocol``:

* PLAINTEXT, or SSL without a client certificate -> ``ANONYMOUS`` (``User:ANONYMOUS``);
* SSL with a validated client certificate -> the DN mapped by ``ssl.principal.mapping.rules``;
* SASL_PLAINTEXT / SASL_SSL -> the SASL mechanism's authorization id (the verified user name).

``SecurityProtocol`` values are Kafka's wire ids (they appear in UpdateMetadata endpoints).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from millrace.common.errors import ConfigError

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    """An authenticated identity, ``<principal_type>:<name>``."""

    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """Parse ``Type:name``; the name is all after the first ``:`` (it may contain ``:``)."""
        principal_type, sep, name = text.partition(":")
        if not sep or not principal_type:
            raise ConfigError(
                f"Expected a principal in the form principalType:principalName, got {text!r}"
            )
        return cls(principal_type, name)

    @classmethod
    def user(cls, name: str) -> KafkaPrincipal:
        return cls(USER_TYPE, name)


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")


class SecurityProtocol(enum.Enum):
    """A listener's protocol; the value is Kafka's wire id."""

    PLAINTEXT = 0
    SSL = 1
    SASL_PLAINTEXT = 2
    SASL_SSL = 3

    @property
    def uses_tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)

    @classmethod
    def parse(cls, name: str) -> SecurityProtocol:
        """Case-insensitive lookup by name (``sasl_ssl`` -> ``SASL_SSL``)."""
        try:
            return cls[name.strip().upper()]
        except KeyError:
            valid = ", ".join(p.name for p in cls)
            raise ConfigError(
                f"Unknown security protocol {name!r}; expected one of {valid}"
            ) from None
