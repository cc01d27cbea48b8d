"""The rules of the client quota admin APIs (KIP-546), pure: reading a request's quota
entity and operations, and a DescribeClientQuotas filter (Kafka 3.9's
``ZkAdminManager.describeClientQuotas`` / ``alterClientQuotas``, with the stricter value
checks of its KRaft ``ClientQuotaControlManager``).

Entities.  On the wire an entity is a list of (entity type, name) pairs, types ``user``,
``client-id`` and ``ip``, a null name meaning the default entity.  Refused with
INVALID_REQUEST, naming why: no pair, a type twice, an unknown type, an empty name,
``ip`` together with ``user``/``client-id``, an ``ip`` name that is not an IPv4 or IPv6
address (hostnames are not resolved), and a name equal to ``<default>`` (the stored
spelling of the default entity; a default is asked for with a null name).  An ``ip``
entity is an ``IpQuotaEntity`` (KIP-612, ``/config/ips``), the others a ``QuotaEntity``.

Operations.  Set a key or remove it.  A user / client-id entity's keys are
``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage`` and
``controller_mutation_rate``; an ip entity's only ``connection_creation_rate``.  Any
other key (a SCRAM mechanism among them: credentials go through
AlterUserScramCredentials) is an invalid configuration key, for removals too.  A value
must be a finite number greater than 0; the byte rates and the connection rate are whole
numbers (Kafka's LONG keys, and its INT key, at most 2147483647: a fraction over 1e-6 is
refused).  Kafka's ZooKeeper mode takes 0 and negative values; its KRaft mode, and this
broker, refuse them.

Filters.  A component names an entity type and how to match its name: 0 exactly
``match`` (which must not be null), 1 the default entity, 2 any name, the default
included (Kafka's ``ofEntityType``).  An entity matches when every component matches its
part of the entity and, for a type no component names, the entity has no such part or
the filter is not strict (so an ``ip`` filter finds only ip entities, a user / client-id
filter never finds them, and an empty filter that is not strict finds every entity).  An empty entity type, a type given twice or ``ip`` with
``user``/``client-id`` is INVALID_REQUEST; an unknown type UNSUPPORTED_VERSION ("Custom
entity type ... not supported"), as Kafka answers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from millrace.broker.quota.entity import (
    CONNECTION_CREATION_RATE,
    DEFAULT,
    IP_KEYS,
    STORED_KEYS,
    AnyQuotaEntity,
    IpQuotaEntity,
    QuotaEntity,
    QuotaValues,
    keys_of,
)
from millrace.broker.quota.quota_store import INTEGER_KEYS, QuotaOps, valid_ip_name
from millrace.common.errors import Errors

USER, CLIENT_ID, IP = "user", "client-id", "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
LONG_MAX = 2 ** 63 - 1
INT_MAX = 2 ** 31 - 1


class QuotaRequestError(Exception):
    """What is wrong with one entry (or a whole describe filter), as an error code."""

    def __init__(self, message: str, error: Errors = Errors.INVALID_REQUEST) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


# ---------------------------------------------------------------------- alter
def parse_entity(pairs: Iterable[tuple[str, str | None]]) -> AnyQuotaEntity:
    """The entity of an AlterClientQuotas entry; ``QuotaRequestError`` saying why not."""
    seen: dict[str, str | None] = {}
    for entity_type, name in pairs:
        if entity_type in seen:
            raise QuotaRequestError(
                f"Invalid client quota entity, duplicate entity entry {entity_type}")
        if entity_type not in ENTITY_TYPES:
            raise QuotaRequestError(f"Unhandled client quota entity type: {entity_type}")
        if name is not None and not name:
            raise QuotaRequestError(f"Empty {entity_type} not supported")
        if name == DEFAULT:
            raise QuotaRequestError(
                f"{entity_type} name {DEFAULT} is reserved for the default entity: ask for "
                "the default with a null name")
        seen[entity_type] = name
    if not seen:
        raise QuotaRequestError("Invalid empty client quota entity")
    if IP in seen:
        if USER in seen or CLIENT_ID in seen:
            raise QuotaRequestError("Invalid quota entity combination, IP entity should not "
                                    "be combined with User or ClientId")
        ip = seen[IP]
        if ip is None:
            return IpQuotaEntity(DEFAULT)
        if not valid_ip_name(ip):
            raise QuotaRequestError(f"{ip} is not a valid IP address (hostnames are not "
                                    "resolved)")
        return IpQuotaEntity(ip)
    user = (seen[USER] if seen[USER] is not None else DEFAULT) if USER in seen else None
    client_id = ((seen[CLIENT_ID] if seen[CLIENT_ID] is not None else DEFAULT)
                 if CLIENT_ID in seen else None)
    return QuotaEntity(user, client_id)


def check_op(key: str, value: float | None, entity: AnyQuotaEntity | None = None) -> None:
    """One set (``value``) or removal (None) on ``entity`` (None: on an entity of either
    kind); ``QuotaRequestError`` if invalid."""
    if key not in (keys_of(entity) if entity is not None else (*STORED_KEYS, *IP_KEYS)):
        raise QuotaRequestError(f"Invalid configuration key {key}")
    if value is None:
        return
    if not math.isfinite(value):
        raise QuotaRequestError(f"Quota {key} must be a finite number")
    if value <= 0.0:
        raise QuotaRequestError(f"Quota {key} must be greater than 0")
    if key in INTEGER_KEYS:
        if key == CONNECTION_CREATION_RATE and value > INT_MAX:
            raise QuotaRequestError(f"Proposed value for {key} is too large for an INT.")
        if value > LONG_MAX:
            raise QuotaRequestError(f"Proposed value for {key} is too large for a LONG.")
        if abs(value % 1.0) > 1e-6 and abs(value % 1.0 - 1.0) > 1e-6:
            raise QuotaRequestError(f"{key} cannot be a fractional value.")


def parse_ops(ops: Iterable[tuple[str, float, bool]], entity: AnyQuotaEntity | None = None
              ) -> QuotaOps:
    """(key, value, remove) triples -> key -> value (None: remove), every one checked
    against ``entity``'s kind (None: a key of either kind passes)."""
    parsed: dict[str, float | None] = {}
    for key, value, remove in ops:
        check_op(key, None if remove else value, entity)
        parsed.pop(key, None)  # a key given twice: the later op, in its place
        parsed[key] = None if remove else value
    return parsed


# ---------------------------------------------------------------------- describe
@dataclass(frozen=True, slots=True)
class Component:
    entity_type: str
    match_type: int
    match: str | None


@dataclass(frozen=True, slots=True)
class QuotaFilter:
    user: Component | None
    client_id: Component | None
    ip: Component | None
    strict: bool


def parse_filter(components: Iterable[Component], strict: bool) -> QuotaFilter:
    """A DescribeClientQuotas filter; ``QuotaRequestError`` for an invalid one."""
    by_type: dict[str, Component] = {}
    names = {USER: "user", CLIENT_ID: "client", IP: "ip"}
    for c in components:
        if c.entity_type == "":
            raise QuotaRequestError("Unexpected empty filter component entity type")
        if c.entity_type not in ENTITY_TYPES:
            raise QuotaRequestError(f"Custom entity type '{c.entity_type}' not supported",
                                    Errors.UNSUPPORTED_VERSION)
        if c.entity_type in by_type:
            raise QuotaRequestError(
                f"Duplicate {names[c.entity_type]} filter component entity type")
        if c.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
            raise QuotaRequestError(f"Unexpected match type: {c.match_type}")
        if c.match_type == MATCH_EXACT and c.match is None:
            raise QuotaRequestError(f"An exact {c.entity_type} filter component needs a "
                                    "name to match")
        by_type[c.entity_type] = c
    if IP in by_type and (USER in by_type or CLIENT_ID in by_type):
        raise QuotaRequestError(
            "Invalid entity filter component combination, IP filter component should not "
            "be used with user or clientId filter component.")
    return QuotaFilter(by_type.get(USER), by_type.get(CLIENT_ID), by_type.get(IP), strict)


def _part_matches(component: Component | None, part: str | None, strict: bool) -> bool:
    if component is None:
        return part is None or not strict
    if part is None:
        return False
    if component.match_type == MATCH_DEFAULT:
        return part == DEFAULT
    if component.match_type == MATCH_EXACT:
        return part == component.match and part != DEFAULT
    return True  # any specified name, the default included


def matches(flt: QuotaFilter, entity: AnyQuotaEntity) -> bool:
    if isinstance(entity, IpQuotaEntity):
        return (_part_matches(flt.ip, entity.ip, flt.strict)
                and _part_matches(flt.user, None, flt.strict)
                and _part_matches(flt.client_id, None, flt.strict))
    return (_part_matches(flt.user, entity.user, flt.strict)
            and _part_matches(flt.client_id, entity.client_id, flt.strict)
            and _part_matches(flt.ip, None, flt.strict))


def _order(entity: AnyQuotaEntity) -> tuple[bool, str, bool, str]:
    if isinstance(entity, IpQuotaEntity):
        return (True, "~", False, entity.ip)  # after every user / client entity
    return (entity.user is None, entity.user or "", entity.client_id is None,
            entity.client_id or "")


def describe(quotas: Mapping[AnyQuotaEntity, QuotaValues], flt: QuotaFilter
             ) -> list[tuple[AnyQuotaEntity, QuotaValues]]:
    """The entities with quotas that match, in a stable order (users first, ips last)."""
    found = [(e, v) for e, v in quotas.items() if v and matches(flt, e)]
    return sorted(found, key=lambda ev: _order(ev[0]))


def wire_entity(entity: AnyQuotaEntity) -> list[tuple[str, str | None]]:
    """The (entity type, name) pairs of an entity, the default as a null name."""
    if isinstance(entity, IpQuotaEntity):
        return [(IP, None if entity.ip == DEFAULT else entity.ip)]
    pairs: list[tuple[str, str | None]] = []
    if entity.user is not None:
        pairs.append((USER, None if entity.user == DEFAULT else entity.user))
    if entity.client_id is not None:
        pairs.append((CLIENT_ID, None if entity.client_id == DEFAULT else entity.client_id))
    return pairs
