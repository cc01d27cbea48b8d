"""The ACL model: bindings, filters, their wire enums and their ZooKeeper JSON.

Java: ``org.apache.kafka.common.acl`` (``AclOperation``, ``AclPermissionType``,
``AccessControlEntry``, ``AclBinding`` and their ``*Filter`` twins),
``org.apache.kafka.common.resource`` (``ResourceType``, ``PatternType``, ``ResourcePattern``,
``ResourcePatternFilter``) and ``org.apache.kafka.security.authorizer.AclEntry`` (supported
operations, JSON).  Shared by the broker (authorizer, ACL store, CreateAcls/DescribeAcls/DeleteAcls
handlers) and the admin client; sans-I/O.

An ACL reads "principal P is Allowed/Denied operation O from host H on every resource matching
pattern RP".  A ``ResourcePattern`` is concrete: a resource type (never ANY/UNKNOWN) and a name
taken LITERALly (``*`` being the literal that matches every name) or as a PREFIX.

Filters (DescribeAcls, DeleteAcls, ``AclAuthorizer.acls``) follow Kafka exactly:

* ``None`` name/principal/host and ANY resource type/operation/permission match everything;
  a filter's operation matches only itself (no Read -> Describe implication here);
* pattern type ANY matches LITERAL and PREFIXED patterns whose name *equals* the filter's name;
* pattern type MATCH takes the filter's name as a resource name and matches every pattern that
  would apply to it: the LITERAL name, the LITERAL ``*`` and each PREFIXED pattern that is a
  prefix of the name;
* pattern type LITERAL/PREFIXED match exactly that pattern.

ZooKeeper JSON (znode ``/kafka-acl/<Type>/<name>`` and ``/kafka-acl-extended/prefixed/..``), as
Kafka 3.9 writes it -- compact, and in the key order of the Java ``HashMap``s it serialises
(so "acls" before "version", "host" before "operation")::

    {"acls":[{"principal":"User:alice","permissionType":"Allow","host":"*","operation":"Read"}],"version":1}

Readers must not depend on that order (Kafka < 3.7 wrote "version" first).  Operation and
permission names are PascalCase; readers accept any case.  The order of the entries in "acls" is
not defined by Kafka (a Java ``HashSet``); ``encode_acls`` sorts them.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, ClassVar, Self

__all__ = [
    "CLUSTER_NAME",
    "IMPLIED_BY",
    "SUPPORTED_OPERATIONS",
    "WILDCARD",
    "WILDCARD_HOST",
    "WILDCARD_PRINCIPAL",
    "AccessControlEntry",
    "AccessControlEntryFilter",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "PatternType",
    "ResourcePattern",
    "ResourcePatternFilter",
    "ResourceType",
    "decode_acls",
    "encode_acls",
    "validate_binding",
]

WILDCARD = "*"
"""The LITERAL resource name that matches every resource of its type."""
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"
"""The one name a CLUSTER resource has."""
ZK_ACL_JSON_VERSION = 1


class _KafkaEnum(IntEnum):
    """An enum whose value is Kafka's wire code and whose ``kafka_name`` is Kafka's spelling."""

    @property
    def kafka_name(self) -> str:
        """PascalCase, as Kafka writes it in ZooKeeper, logs and tools (``ClusterAction``)."""
        return "".join(part.capitalize() for part in self.name.split("_"))

    @classmethod
    def from_kafka_name(cls, name: str) -> Self:
        """Case-insensitive lookup ignoring ``_``: ``Read``, ``read``, ``CLUSTER_ACTION``,
        ``ClusterAction``; ``ValueError`` for a name that is not a member."""
        key = name.strip().replace("_", "").upper()
        for member in cls:
            if member.name.replace("_", "") == key:
                return member
        raise ValueError(f"Unknown {cls.__name__} {name!r}")

    @classmethod
    def from_code(cls, code: int) -> Self:
        """The member with this wire code, UNKNOWN for a code this version does not know."""
        try:
            return cls(code)
        except ValueError:
            return cls(0)


class AclOperation(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    DENY = 2
    ALLOW = 3


class ResourceType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1  # filters only: any pattern type, exactly this name
    MATCH = 2  # filters only: every pattern that applies to this resource name
    LITERAL = 3
    PREFIXED = 4

    @property
    def kafka_name(self) -> str:
        """Kafka never PascalCases pattern types: ``LITERAL``, ``PREFIXED`` (log lines,
        extended-ACL change events)."""
        return self.name


SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({
        AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
        AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    }),
    ResourceType.GROUP: frozenset({AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE}),
    ResourceType.CLUSTER: frozenset({
        AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
        AclOperation.DESCRIBE,
    }),
    ResourceType.TRANSACTIONAL_ID: frozenset({AclOperation.DESCRIBE, AclOperation.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({AclOperation.DESCRIBE}),
    ResourceType.USER: frozenset({AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS}),
}
"""The operations each concrete resource type has (Kafka's ``AclEntry.supportedOperations``);
``ALL`` applies to every type besides these.  Authorized-operations bitfields range over them."""

IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset({
        AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
        AclOperation.ALTER,
    }),
    AclOperation.DESCRIBE_CONFIGS: frozenset({
        AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
    }),
}
"""Operation -> the operations whose ALLOW also allows it (an operation absent here is allowed
only by itself or ``ALL``).  Applies to ALLOW entries only: DENY Read does not deny Describe."""


def _coerce(value: Any, enum: type[_KafkaEnum]) -> Any:
    return value if type(value) is enum else enum(value)


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    """The resources an ACL applies to.  Concrete: no ANY/UNKNOWN type, no ANY/MATCH/UNKNOWN
    pattern type (``ValueError``)."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def __post_init__(self) -> None:
        object.__setattr__(self, "resource_type", _coerce(self.resource_type, ResourceType))
        object.__setattr__(self, "pattern_type", _coerce(self.pattern_type, PatternType))
        if self.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            raise ValueError(f"resourceType must not be {self.resource_type.name}")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise ValueError(f"patternType must not be {self.pattern_type.name}")
        if not isinstance(self.name, str):
            raise TypeError(f"resource name must be a str, got {self.name!r}")

    def to_filter(self) -> ResourcePatternFilter:
        return ResourcePatternFilter(self.resource_type, self.name, self.pattern_type)

    def __str__(self) -> str:
        """``Topic:LITERAL:orders``, the form of Kafka's authorizer log lines."""
        return f"{self.resource_type.kafka_name}:{self.pattern_type.name}:{self.name}"


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    """Who (``Type:name`` principal, ``User:*`` for everyone), from where (an IP address or
    ``*``), what, and whether it is allowed or denied.  ANY operation or permission is a filter
    value, not an entry (``ValueError``); UNKNOWN is kept (a name this version does not know,
    read back from ZooKeeper) and matches nothing."""

    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __post_init__(self) -> None:
        object.__setattr__(self, "operation", _coerce(self.operation, AclOperation))
        object.__setattr__(
            self, "permission_type", _coerce(self.permission_type, AclPermissionType)
        )
        if not isinstance(self.principal, str) or not isinstance(self.host, str):
            raise TypeError("principal and host must be str")
        if self.operation is AclOperation.ANY:
            raise ValueError("operation must not be ANY")
        if self.permission_type is AclPermissionType.ANY:
            raise ValueError("permissionType must not be ANY")

    def to_filter(self) -> AccessControlEntryFilter:
        return AccessControlEntryFilter(
            self.principal, self.host, self.operation, self.permission_type
        )


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: an entry bound to a resource pattern."""

    pattern: ResourcePattern
    entry: AccessControlEntry

    def to_filter(self) -> AclBindingFilter:
        """The filter that matches exactly this binding."""
        return AclBindingFilter(self.pattern.to_filter(), self.entry.to_filter())


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    """Selects resource patterns; ``name=None`` is any name (see the module docstring)."""

    ANY: ClassVar[ResourcePatternFilter]

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType

    def __post_init__(self) -> None:
        object.__setattr__(self, "resource_type", _coerce(self.resource_type, ResourceType))
        object.__setattr__(self, "pattern_type", _coerce(self.pattern_type, PatternType))

    def matches(self, pattern: ResourcePattern) -> bool:
        if self.resource_type is not ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        if (
            self.pattern_type not in (PatternType.ANY, PatternType.MATCH)
            and self.pattern_type != pattern.pattern_type
        ):
            return False
        if self.name is None:
            return True
        if self.pattern_type is PatternType.ANY or self.pattern_type == pattern.pattern_type:
            return self.name == pattern.name
        # MATCH: every pattern that applies to the resource called self.name
        if pattern.pattern_type is PatternType.LITERAL:
            return pattern.name in (self.name, WILDCARD)
        return self.name.startswith(pattern.name)

    @property
    def is_unknown(self) -> bool:
        return (
            self.resource_type is ResourceType.UNKNOWN
            or self.pattern_type is PatternType.UNKNOWN
        )

    def find_indefinite_field(self) -> str | None:
        """Why this filter may match more than one pattern, or None (Kafka's wording)."""
        if self.resource_type is ResourceType.ANY:
            return "Resource type is ANY."
        if self.resource_type is ResourceType.UNKNOWN:
            return "Resource type is UNKNOWN."
        if self.name is None:
            return "Resource name is NULL."
        if self.pattern_type is PatternType.MATCH:
            return "Resource pattern type is MATCH."
        if self.pattern_type is PatternType.UNKNOWN:
            return "Resource pattern type is UNKNOWN."
        return None


ResourcePatternFilter.ANY = ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY)


@dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    """Selects entries; ``None`` principal/host and ANY operation/permission match any.  The
    comparison is exact (strings as written; no operation implication)."""

    ANY: ClassVar[AccessControlEntryFilter]

    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    def __post_init__(self) -> None:
        object.__setattr__(self, "operation", _coerce(self.operation, AclOperation))
        object.__setattr__(
            self, "permission_type", _coerce(self.permission_type, AclPermissionType)
        )

    def matches(self, entry: AccessControlEntry) -> bool:
        if self.principal is not None and self.principal != entry.principal:
            return False
        if self.host is not None and self.host != entry.host:
            return False
        if self.operation is not AclOperation.ANY and self.operation != entry.operation:
            return False
        return (
            self.permission_type is AclPermissionType.ANY
            or self.permission_type == entry.permission_type
        )

    @property
    def is_unknown(self) -> bool:
        return (
            self.operation is AclOperation.UNKNOWN
            or self.permission_type is AclPermissionType.UNKNOWN
        )

    def find_indefinite_field(self) -> str | None:
        if self.principal is None:
            return "Principal is NULL"
        if self.host is None:
            return "Host is NULL"
        if self.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            return f"Operation is {self.operation.name}"
        if self.permission_type in (AclPermissionType.ANY, AclPermissionType.UNKNOWN):
            return f"Permission type is {self.permission_type.name}"
        return None


AccessControlEntryFilter.ANY = AccessControlEntryFilter(
    None, None, AclOperation.ANY, AclPermissionType.ANY
)


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """A pattern filter and an entry filter; ``AclBindingFilter.ANY`` matches every binding."""

    ANY: ClassVar[AclBindingFilter]

    pattern_filter: ResourcePatternFilter
    entry_filter: AccessControlEntryFilter

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern_filter.matches(binding.pattern) and self.entry_filter.matches(
            binding.entry
        )

    @property
    def is_unknown(self) -> bool:
        return self.pattern_filter.is_unknown or self.entry_filter.is_unknown

    def matches_at_most_one(self) -> bool:
        return self.find_indefinite_field() is None

    def find_indefinite_field(self) -> str | None:
        return (
            self.pattern_filter.find_indefinite_field()
            or self.entry_filter.find_indefinite_field()
        )


AclBindingFilter.ANY = AclBindingFilter(ResourcePatternFilter.ANY, AccessControlEntryFilter.ANY)


# --- validation ---------------------------------------------------------------------------


def validate_binding(binding: AclBinding, *, strict: bool = True) -> str | None:
    """Why CreateAcls must refuse this binding (the INVALID_REQUEST message), or None.

    Always checked -- the reasons a Kafka 3.9 ZooKeeper-mode broker refuses (``AclApis``,
    ``AclAuthorizer.createAcls``; the principal check is KRaft's wording, ZK mode fails it with
    an unknown server error): a CLUSTER resource not named ``kafka-cluster``, an empty name, a
    ``/`` in the name (it would be a znode path), an UNKNOWN operation or permission, a principal
    without ``:``.

    ``strict`` (the default) adds the checks Kafka leaves to ``kafka-acls`` or does not make at
    all: the principal type must be ``User`` with a non-empty name, the host ``*`` or an IP
    address (a host name would never match: the authorizer compares addresses), and the operation
    ``All`` or one the resource type supports.  ``strict=False`` is exactly Kafka's broker.
    """
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type is ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not pattern.name:
        return "Invalid empty resource name"
    if "/" in pattern.name:
        return f"ACL binding contains invalid resource name: {pattern.name}"
    if entry.operation is AclOperation.UNKNOWN or entry.permission_type is AclPermissionType.UNKNOWN:
        return "ACL binding contains unknown elements"
    principal_type, colon, principal_name = entry.principal.partition(":")
    if not colon:
        return (
            f"Could not parse principal from `{entry.principal}` "
            "(no colon is present separating the principal type from the principal name)"
        )
    if not strict:
        return None
    if principal_type != "User" or not principal_name:
        return (
            f"Invalid principal `{entry.principal}`: expected User:<name> "
            "(User:* for every principal)"
        )
    if entry.host != WILDCARD_HOST:
        try:
            ipaddress.ip_address(entry.host)
        except ValueError:
            return f"Invalid host `{entry.host}`: expected * or an IP address (not a host name)"
    supported = SUPPORTED_OPERATIONS[pattern.resource_type] | {AclOperation.ALL}
    if entry.operation not in supported:
        names = ", ".join(op.kafka_name for op in sorted(supported))
        return f"ResourceType {pattern.resource_type.kafka_name} only supports operations {names}"
    return None


# --- ZooKeeper JSON -----------------------------------------------------------------------

_SHORT_ESCAPES = {
    '"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
}


def _json_string(text: str) -> str:
    """A JSON string literal as Jackson writes it: UTF-8 kept, control characters escaped
    (``\\u001F``, upper-case hex)."""
    out = ['"']
    for ch in text:
        escaped = _SHORT_ESCAPES.get(ch)
        if escaped is not None:
            out.append(escaped)
        elif ch < " ":
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _entry_sort_key(entry: AccessControlEntry) -> tuple[str, str, int, int]:
    return (entry.principal, entry.host, entry.operation, entry.permission_type)


def encode_acls(entries: Iterable[AccessControlEntry]) -> bytes:
    """One resource's entries as the znode data Kafka 3.9 writes (module docstring)."""
    items = ",".join(
        "{"
        f'"principal":{_json_string(e.principal)},'
        f'"permissionType":{_json_string(e.permission_type.kafka_name)},'
        f'"host":{_json_string(e.host)},'
        f'"operation":{_json_string(e.operation.kafka_name)}'
        "}"
        for e in sorted(set(entries), key=_entry_sort_key)
    )
    return f'{{"acls":[{items}],"version":{ZK_ACL_JSON_VERSION}}}'.encode()


def _name_or_unknown(enum: type[_KafkaEnum], name: str) -> Any:
    try:
        return enum.from_kafka_name(name)
    except ValueError:
        return enum.UNKNOWN  # type: ignore[attr-defined]


def _string_field(item: dict[str, Any], key: str) -> str:
    value = item.get(key)
    if not isinstance(value, str):
        raise ValueError(f"ACL JSON entry needs a string {key!r}, got {value!r}")
    return value


def decode_acls(data: bytes) -> set[AccessControlEntry]:
    """Parse znode data written by Kafka or ``encode_acls``; empty data is no ACLs.

    ``ValueError`` for data that is not UTF-8 JSON, a version other than 1, a missing or
    mistyped field, a principal without ``:`` or an ANY operation/permission.  (Kafka reads data
    that is not JSON at all as no ACLs; the store decides what to do with the error.)  An
    operation or permission *name* this version does not know becomes UNKNOWN, as in Kafka, so
    one entry written by a newer broker does not hide the resource's other ACLs.
    """
    if not data:
        return set()
    try:
        document = json.loads(data.decode("utf-8"))
    except ValueError as e:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise ValueError(f"ACL data is not UTF-8 JSON: {e}") from None
    if not isinstance(document, dict):
        raise ValueError(f"ACL JSON must be an object, got {type(document).__name__}")
    version = document.get("version")
    if type(version) is not int or version != ZK_ACL_JSON_VERSION:
        raise ValueError(f"Unsupported ACL JSON version {version!r} (expected 1)")
    acls = document.get("acls")
    if not isinstance(acls, list):
        raise ValueError(f"ACL JSON needs an 'acls' array, got {acls!r}")
    entries: set[AccessControlEntry] = set()
    for item in acls:
        if not isinstance(item, dict):
            raise ValueError(f"ACL JSON entry must be an object, got {item!r}")
        principal = _string_field(item, "principal")
        if ":" not in principal:
            raise ValueError(
                "expected a string in format principalType:principalName but got "
                f"{principal!r}"
            )
        entries.add(
            AccessControlEntry(
                principal,
                _string_field(item, "host"),
                _name_or_unknown(AclOperation, _string_field(item, "operation")),
                _name_or_unknown(AclPermissionType, _string_field(item, "permissionType")),
            )
        )
    return entries
