"""``AclAuthorizer``: may this principal, from this host, do this to that resource?

Java: ``kafka.security.authorizer.AclAuthorizer`` (ZooKeeper mode, Kafka 3.9) -- its decisions,
not its storage: the ACLs arrive through ``update_resource``/``load_acls`` from an ``AclStore``
(``acl_store``), and ``authorize`` never does I/O.

Decision for one action, an operation on one *literal* resource name (``authorizeAction``):

1. the principal is a super user (``super.users``) -> allowed;
2. the ACLs that apply are those of the resource type's LITERAL name, its LITERAL ``*`` and every
   PREFIXED pattern that is a prefix of the name; none at all -> allowed iff
   ``allow.everyone.if.no.acl.found`` (an ACL for anyone else is "some ACL");
3. an entry "matches" when its principal is the principal or ``User:*``, its host the client
   address or ``*``, and its operation the one asked or ``All``;
4. a matching DENY -> denied.  Deny wins, and is not widened: DENY Read does not deny Describe;
5. a matching ALLOW for the operation *or one that implies it* -> allowed: Read, Write, Delete
   and Alter imply Describe, AlterConfigs implies DescribeConfigs (``IMPLIED_BY``);
6. otherwise denied.

Hosts are compared as addresses: ``::1`` equals ``0:0:0:0:0:0:0:1`` (Java renders IPv6
uncompressed) and an IPv4-mapped IPv6 peer is its IPv4 address (Java's ``InetAddress`` does the
same).  An ACL host that is not an address (a host name) matches no client.

``authorize_by_resource_type`` (KIP-679; the idempotent producer's InitProducerId without
IdempotentWrite on the cluster) asks "could this principal do the operation on *some* resource
of the type?" with Kafka's rules: a matching DENY on the LITERAL ``*`` -> no; then
``allow.everyone.if.no.acl.found`` -> yes; otherwise yes iff some matching ALLOW (op or ``All``,
no implication) names a resource no matching DENY covers -- a LITERAL ALLOW is covered by a
DENY on the same literal or on a PREFIX of it, a PREFIXED ALLOW by a DENY on a prefix of its
prefix (or on the prefix itself); an ALLOW on the LITERAL ``*`` is never covered.

Audit log (logger ``millrace.authorizer``, Kafka's ``kafka.authorizer.logger``), one line per
decision: denials at INFO, grants at DEBUG; lookups that only compute authorized-operation
bitfields log at TRACE (level 5) either way, as Kafka does::

    Principal = User:bob is Denied Operation = Write from host = 127.0.0.1 on resource = Topic:LITERAL:orders

Thread ownership: the ACLs are an immutable snapshot replaced whole by each update (writers
serialised by ``_lock``), so the event loop reads them without a lock while a ZooKeeper watcher
thread may update them.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import threading
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from millrace.security.acl import (
    IMPLIED_BY,
    SUPPORTED_OPERATIONS,
    WILDCARD,
    WILDCARD_HOST,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from millrace.security.kafka_principal import USER_TYPE, KafkaPrincipal

__all__ = [
    "ALLOW_EVERYONE_IF_NO_ACL_FOUND_CONFIG",
    "AUTHORIZER_CLASS_NAMES",
    "AUTHORIZER_CLASS_NAME_CONFIG",
    "SUPER_USERS_CONFIG",
    "AclAuthorizer",
    "Action",
    "parse_super_users",
]

log = logging.getLogger("millrace.authorizer")
TRACE = 5

AUTHORIZER_CLASS_NAME_CONFIG = "authorizer.class.name"
SUPER_USERS_CONFIG = "super.users"
ALLOW_EVERYONE_IF_NO_ACL_FOUND_CONFIG = "allow.everyone.if.no.acl.found"
AUTHORIZER_CLASS_NAMES = frozenset({
    "kafka.security.authorizer.AclAuthorizer",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
})
"""The ``authorizer.class.name`` values that mean this authorizer ("" means none)."""

_WILDCARD_PRINCIPAL = (USER_TYPE, "*")
_Address = ipaddress.IPv4Address | ipaddress.IPv6Address
_HostKey = _Address | str


class Action(NamedTuple):
    """One operation on one resource, named literally.  The two flags are Kafka's
    ``logIfAllowed``/``logIfDenied``: False for lookups that only compute what a client may do
    (their lines go to TRACE)."""

    operation: AclOperation
    resource_type: ResourceType
    name: str
    log_if_allowed: bool = True
    log_if_denied: bool = True


def parse_super_users(value: str) -> list[str]:
    """``super.users``: principals separated by ``;`` (DNs contain commas), blanks ignored."""
    return [item.strip() for item in value.split(";") if item.strip()]


@functools.lru_cache(maxsize=4096)
def _host_key(host: str) -> _HostKey:
    """The address a host string names (IPv4-mapped IPv6 -> IPv4), or the string itself."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _java_host_address(host: str) -> str:
    """The host as Java's ``InetAddress.getHostAddress`` prints it (``0:0:0:0:0:0:0:1``), for
    log lines that read like Kafka's."""
    key = _host_key(host)
    if isinstance(key, ipaddress.IPv6Address):
        groups = ":".join(f"{int.from_bytes(key.packed[i:i + 2], 'big'):x}" for i in range(0, 16, 2))
        return f"{groups}%{key.scope_id}" if key.scope_id else groups
    return str(key)


def _split_principal(principal: str) -> tuple[str, str] | None:
    principal_type, colon, name = principal.partition(":")
    return (principal_type, name) if colon else None


class _Matcher(NamedTuple):
    """An entry with its principal split and its host parsed, once, at update time."""

    principal: tuple[str, str] | None
    host: _HostKey | None  # None: the wildcard host
    operation: AclOperation
    permission_type: AclPermissionType

    @classmethod
    def of(cls, entry: AccessControlEntry) -> _Matcher:
        host = None if entry.host == WILDCARD_HOST else _host_key(entry.host)
        return cls(_split_principal(entry.principal), host, entry.operation, entry.permission_type)

    def applies_to(self, principal: tuple[str, str], host: _HostKey) -> bool:
        return (self.principal == principal or self.principal == _WILDCARD_PRINCIPAL) and (
            self.host is None or self.host == host
        )


class _ResourceAcls(NamedTuple):
    pattern: ResourcePattern
    entries: frozenset[AccessControlEntry]
    matchers: tuple[_Matcher, ...]


_Key = tuple[PatternType, str]


class _TypeAcls(NamedTuple):
    """One resource type's ACLs, by (pattern type, name), and the lengths of its PREFIXED
    names (a name's applicable prefixes are found by slicing at those lengths only)."""

    resources: Mapping[_Key, _ResourceAcls]
    prefix_lengths: tuple[int, ...]

    @classmethod
    def build(cls, resources: dict[_Key, _ResourceAcls]) -> _TypeAcls:
        lengths = {len(name) for pattern_type, name in resources if pattern_type is PatternType.PREFIXED}
        return cls(resources, tuple(sorted(lengths)))


_EMPTY = _TypeAcls({}, ())


class AclAuthorizer:
    """Kafka's ``AclAuthorizer`` decisions over an in-memory copy of the ACLs."""

    def __init__(
        self, super_users: Iterable[str], allow_everyone_if_no_acl_found: bool = False
    ) -> None:
        """``super_users``: principals (``User:admin``); a str is read as the ``super.users``
        value (``;``-separated).  A malformed principal is a ``ConfigError``."""
        if isinstance(super_users, str):
            super_users = parse_super_users(super_users)
        parsed = (KafkaPrincipal.parse(p.strip()) for p in super_users if p.strip())
        self._super_users = frozenset((p.principal_type, p.name) for p in parsed)
        self._allow_everyone = allow_everyone_if_no_acl_found
        self._lock = threading.Lock()
        self._acls: Mapping[ResourceType, _TypeAcls] = {}  # replaced whole; writers hold _lock

    @property
    def super_users(self) -> frozenset[str]:
        return frozenset(f"{t}:{n}" for t, n in self._super_users)

    @property
    def allow_everyone_if_no_acl_found(self) -> bool:
        return self._allow_everyone

    # --- the cache ------------------------------------------------------------------------

    def update_resource(
        self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]
    ) -> None:
        """Replace one resource pattern's ACLs (an empty set removes the pattern)."""
        with self._lock:
            acls = dict(self._acls)
            resources = dict(acls.get(pattern.resource_type, _EMPTY).resources)
            key = (pattern.pattern_type, pattern.name)
            frozen = frozenset(entries)
            if frozen:
                resources[key] = _ResourceAcls(
                    pattern, frozen, tuple(_Matcher.of(e) for e in frozen)
                )
            else:
                resources.pop(key, None)
            acls[pattern.resource_type] = _TypeAcls.build(resources)
            self._acls = acls

    def load_acls(self, acls: Mapping[ResourcePattern, Iterable[AccessControlEntry]]) -> None:
        """Replace every ACL at once (start-up: ``AclStore.load()``)."""
        by_type: dict[ResourceType, dict[_Key, _ResourceAcls]] = {}
        for pattern, entries in acls.items():
            frozen = frozenset(entries)
            if frozen:
                by_type.setdefault(pattern.resource_type, {})[
                    (pattern.pattern_type, pattern.name)
                ] = _ResourceAcls(pattern, frozen, tuple(_Matcher.of(e) for e in frozen))
        snapshot = {rt: _TypeAcls.build(resources) for rt, resources in by_type.items()}
        with self._lock:
            self._acls = snapshot

    def acls(self, flt: AclBindingFilter | None = None) -> list[AclBinding]:
        """Every binding the filter matches (all when None), sorted by resource type, pattern
        type, name, then principal, host, operation, permission."""
        flt = flt or AclBindingFilter.ANY
        found: list[AclBinding] = []
        for type_acls in self._acls.values():
            for resource in type_acls.resources.values():
                if not flt.pattern_filter.matches(resource.pattern):
                    continue
                found.extend(
                    AclBinding(resource.pattern, e) for e in resource.entries
                    if flt.entry_filter.matches(e)
                )
        found.sort(key=lambda b: (
            b.pattern.resource_type, b.pattern.pattern_type, b.pattern.name, b.entry.principal,
            b.entry.host, b.entry.operation, b.entry.permission_type,
        ))
        return found

    # --- decisions ------------------------------------------------------------------------

    def authorize(self, principal: KafkaPrincipal, host: str, action: Action) -> bool:
        """Kafka's ``authorizeAction`` (module docstring); logs the decision."""
        _check_concrete(action.operation, action.resource_type)
        who = (principal.principal_type, principal.name)
        if who in self._super_users:
            allowed = True
        else:
            matching = self._matching_acls(action.resource_type, action.name)
            if not matching:
                allowed = self._allow_everyone
            else:
                allowed = _decide(matching, who, _host_key(host), action.operation)
        self._audit(
            principal, host, action.operation, action.resource_type, PatternType.LITERAL,
            action.name, allowed, action.log_if_allowed, action.log_if_denied,
        )
        return allowed

    def authorize_by_resource_type(
        self, principal: KafkaPrincipal, host: str, operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool:
        """May the principal do ``operation`` on *some* resource of the type (KIP-679; module
        docstring)?  ANY/UNKNOWN operation or type is a ``ValueError``."""
        _check_concrete(operation, resource_type)
        who = (principal.principal_type, principal.name)
        if who in self._super_users:
            return True
        client = _host_key(host)
        deny_literals: set[str] = set()
        deny_prefixes: set[str] = set()
        allow_literals: set[str] = set()
        allow_prefixes: set[str] = set()
        for (pattern_type, name), resource in self._acls.get(resource_type, _EMPTY).resources.items():
            literal = pattern_type is PatternType.LITERAL
            for m in resource.matchers:
                if not (
                    m.applies_to(who, client)
                    and (m.operation is operation or m.operation is AclOperation.ALL)
                ):
                    continue
                if m.permission_type is AclPermissionType.DENY:
                    (deny_literals if literal else deny_prefixes).add(name)
                elif m.permission_type is AclPermissionType.ALLOW:
                    (allow_literals if literal else allow_prefixes).add(name)

        def dominated(name: str) -> bool:
            """A DENY on a prefix of ``name`` (or on ``name`` itself as a prefix)."""
            return any(name[:i] in deny_prefixes for i in range(1, len(name) + 1))

        if WILDCARD in deny_literals:
            allowed = False
        elif self._allow_everyone:
            allowed = True
        elif not deny_literals and not deny_prefixes:
            allowed = bool(allow_literals or allow_prefixes)
        else:
            allowed = any(not dominated(p) for p in allow_prefixes) or any(
                name == WILDCARD or (name not in deny_literals and not dominated(name))
                for name in allow_literals
            )
        self._audit(
            principal, host, operation, resource_type, PatternType.UNKNOWN, "NONE", allowed,
            True, True,
        )
        return allowed

    def authorized_operations(
        self, principal: KafkaPrincipal, host: str, resource_type: ResourceType, name: str
    ) -> int:
        """The int32 bitfield ``1 << operation`` of the resource's supported operations this
        principal may do (Metadata v8+, DescribeGroups v3+, DescribeCluster)."""
        _check_resource_type(resource_type)
        bits = 0
        for op in SUPPORTED_OPERATIONS[resource_type]:
            if self.authorize(principal, host, Action(op, resource_type, name, False, False)):
                bits |= 1 << op
        return bits

    # --- helpers --------------------------------------------------------------------------

    def _matching_acls(self, resource_type: ResourceType, name: str) -> list[_ResourceAcls]:
        """The ACL sets that apply to the literal ``name``: prefixes, ``*``, the name."""
        type_acls = self._acls.get(resource_type)
        if type_acls is None:
            return []
        resources = type_acls.resources
        found: list[_ResourceAcls] = []
        for length in type_acls.prefix_lengths:
            if length > len(name):
                break
            prefixed = resources.get((PatternType.PREFIXED, name[:length]))
            if prefixed is not None:
                found.append(prefixed)
        for literal in (WILDCARD, name) if name != WILDCARD else (WILDCARD,):
            acls = resources.get((PatternType.LITERAL, literal))
            if acls is not None:
                found.append(acls)
        return found

    @staticmethod
    def _audit(
        principal: KafkaPrincipal, host: str, operation: AclOperation,
        resource_type: ResourceType, pattern_type: PatternType, name: str, allowed: bool,
        log_if_allowed: bool, log_if_denied: bool,
    ) -> None:
        if allowed:
            level = logging.DEBUG if log_if_allowed else TRACE
        else:
            level = logging.INFO if log_if_denied else TRACE
        if log.isEnabledFor(level):
            log.log(
                level,
                "Principal = %s is %s Operation = %s from host = %s on resource = %s:%s:%s",
                principal, "Allowed" if allowed else "Denied", operation.kafka_name,
                _java_host_address(host), resource_type.kafka_name, pattern_type.name, name,
            )


def _decide(
    matching: list[_ResourceAcls], who: tuple[str, str], client: _HostKey, op: AclOperation
) -> bool:
    """Steps 3-6 of the decision over the applicable ACL sets."""
    allow_ops = IMPLIED_BY.get(op, frozenset((op,)))
    allowed = False
    for resource in matching:
        for m in resource.matchers:
            if not m.applies_to(who, client):
                continue
            if m.permission_type is AclPermissionType.DENY:
                if m.operation is op or m.operation is AclOperation.ALL:
                    return False  # deny wins, whatever else allows
            elif m.permission_type is AclPermissionType.ALLOW and (
                m.operation in allow_ops or m.operation is AclOperation.ALL
            ):
                allowed = True
    return allowed


def _check_resource_type(resource_type: ResourceType) -> None:
    if resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
        raise ValueError(f"An action needs a concrete resource type, not {resource_type.name}")


def _check_concrete(operation: AclOperation, resource_type: ResourceType) -> None:
    _check_resource_type(resource_type)
    if operation in (AclOperation.ANY, AclOperation.UNKNOWN):
        raise ValueError(f"An action needs a concrete operation, not {operation.name}")
