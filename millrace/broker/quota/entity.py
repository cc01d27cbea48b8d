"""Client quota entities and the quota keys -- the vocabulary shared by the quota store
(storage, the admin APIs) and the quota manager (enforcement).

A quota is configured for a user, a client id, or a (user, client id) pair; either part
can be the *default* entity, spelled ``<default>`` as ZooKeeper's znodes spell it
(Kafka's ``ConfigEntityName.DEFAULT``).  A part that is absent is None:
``QuotaEntity(user="alice", client_id=None)`` is the user-only entity ``users/alice``,
``QuotaEntity(user=DEFAULT, client_id="app")`` is ``users/<default>/clients/app``.  User
names are kept unsanitized here; the ZooKeeper store sanitizes them in znode names.

An IP quota (KIP-612) is a separate kind of entity, ``IpQuotaEntity``: one IP address
(as written when it was set) or the default IP entity, never combined with a user or a
client id, carrying only ``connection_creation_rate`` (new connections per second from
that address, enforced at accept by ``connection_quotas``).  ``AnyQuotaEntity`` is
either kind; code that knows only client quotas keeps using ``QuotaEntity``.

Values are floats by key.  ``QUOTA_KEYS`` are the keys the quota manager enforces;
``controller_mutation_rate`` (KIP-599) is accepted and stored but not enforced.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

DEFAULT = "<default>"

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

QUOTA_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE)
"""The keys the quota manager enforces."""

STORED_KEYS = (*QUOTA_KEYS, CONTROLLER_MUTATION_RATE)
"""Every key a user or client id entity may carry (the store accepts these)."""

IP_KEYS = (CONNECTION_CREATION_RATE,)
"""The one key an IP entity may carry."""

QuotaValues = dict[str, float]
"""A quota entity's configured values by key; empty means no quota configured."""


class QuotaEntity(NamedTuple):
    """The (user, client id) a quota is configured for; None = that part absent,
    ``DEFAULT`` = the default entity of that type."""

    user: str | None
    client_id: str | None


@dataclass(frozen=True, slots=True)
class IpQuotaEntity:
    """The IP address (or ``DEFAULT``) a ``connection_creation_rate`` is configured for."""

    ip: str


AnyQuotaEntity = QuotaEntity | IpQuotaEntity


def keys_of(entity: AnyQuotaEntity) -> tuple[str, ...]:
    """The quota keys ``entity``'s kind may carry."""
    return IP_KEYS if isinstance(entity, IpQuotaEntity) else STORED_KEYS
