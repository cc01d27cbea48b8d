"""The ACL model: wire enums, filters, ZooKeeper JSON and CreateAcls validation."""

from __future__ import annotations

import json
from typing import Any

import pytest

from millrace.security.acl import (
    CLUSTER_NAME,
    IMPLIED_BY,
    SUPPORTED_OPERATIONS,
    WILDCARD,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    decode_acls,
    encode_acls,
    validate_binding,
)

Op, Perm, RT, PT = AclOperation, AclPermissionType, ResourceType, PatternType
ALLOW, DENY = Perm.ALLOW, Perm.DENY


def entry(
    principal: str = "User:alice", host: str = "*", op: AclOperation = Op.READ,
    perm: AclPermissionType = ALLOW,
) -> AccessControlEntry:
    return AccessControlEntry(principal, host, op, perm)


def topic(name: str, pattern_type: PatternType = PT.LITERAL) -> ResourcePattern:
    return ResourcePattern(RT.TOPIC, name, pattern_type)


# --- enums --------------------------------------------------------------------------------

OPERATIONS: list[tuple[Any, int, str]] = [
    (Op.UNKNOWN, 0, "Unknown"), (Op.ANY, 1, "Any"), (Op.ALL, 2, "All"), (Op.READ, 3, "Read"),
    (Op.WRITE, 4, "Write"), (Op.CREATE, 5, "Create"), (Op.DELETE, 6, "Delete"),
    (Op.ALTER, 7, "Alter"), (Op.DESCRIBE, 8, "Describe"), (Op.CLUSTER_ACTION, 9, "ClusterAction"),
    (Op.DESCRIBE_CONFIGS, 10, "DescribeConfigs"), (Op.ALTER_CONFIGS, 11, "AlterConfigs"),
    (Op.IDEMPOTENT_WRITE, 12, "IdempotentWrite"), (Op.CREATE_TOKENS, 13, "CreateTokens"),
    (Op.DESCRIBE_TOKENS, 14, "DescribeTokens"),
]
PERMISSIONS: list[tuple[Any, int, str]] = [(Perm.UNKNOWN, 0, "Unknown"), (Perm.ANY, 1, "Any"), (DENY, 2, "Deny"),
               (ALLOW, 3, "Allow")]
RESOURCE_TYPES: list[tuple[Any, int, str]] = [
    (RT.UNKNOWN, 0, "Unknown"), (RT.ANY, 1, "Any"), (RT.TOPIC, 2, "Topic"), (RT.GROUP, 3, "Group"),
    (RT.CLUSTER, 4, "Cluster"), (RT.TRANSACTIONAL_ID, 5, "TransactionalId"),
    (RT.DELEGATION_TOKEN, 6, "DelegationToken"), (RT.USER, 7, "User"),
]
PATTERN_TYPES: list[tuple[Any, int, str]] = [(PT.UNKNOWN, 0, "UNKNOWN"), (PT.ANY, 1, "ANY"), (PT.MATCH, 2, "MATCH"),
                 (PT.LITERAL, 3, "LITERAL"), (PT.PREFIXED, 4, "PREFIXED")]


@pytest.mark.parametrize("member, code, name", OPERATIONS + PERMISSIONS + RESOURCE_TYPES + PATTERN_TYPES)
def test_wire_code_and_kafka_name(member: AclOperation, code: int, name: str) -> None:
    assert int(member) == code
    assert member.kafka_name == name
    enum = type(member)
    assert enum(code) is member
    assert enum.from_code(code) is member
    assert enum.from_kafka_name(name) is member
    assert enum.from_kafka_name(name.upper()) is member
    assert enum.from_kafka_name(name.lower()) is member
    assert enum.from_kafka_name(member.name) is member  # CLUSTER_ACTION, DESCRIBE_CONFIGS
    assert enum.from_kafka_name(f" {name} ") is member


def test_every_member_is_listed() -> None:
    assert len(OPERATIONS) == len(Op) and len(PERMISSIONS) == len(Perm)
    assert len(RESOURCE_TYPES) == len(RT) and len(PATTERN_TYPES) == len(PT)


@pytest.mark.parametrize("enum", [Op, Perm, RT, PT])
def test_unknown_code_is_unknown_and_unknown_name_an_error(enum: type[AclOperation]) -> None:
    assert enum.from_code(99) is enum(0)
    assert enum.from_code(-1) is enum(0)
    with pytest.raises(ValueError, match="Unknown"):
        enum.from_kafka_name("Frobnicate")
    with pytest.raises(ValueError):
        enum(99)


def test_supported_operations_are_kafkas() -> None:
    assert {
        RT.TOPIC: {Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER,
                   Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS},
        RT.GROUP: {Op.READ, Op.DESCRIBE, Op.DELETE},
        RT.CLUSTER: {Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
                     Op.IDEMPOTENT_WRITE, Op.ALTER, Op.DESCRIBE},
        RT.TRANSACTIONAL_ID: {Op.DESCRIBE, Op.WRITE},
        RT.DELEGATION_TOKEN: {Op.DESCRIBE},
        RT.USER: {Op.CREATE_TOKENS, Op.DESCRIBE_TOKENS},
    } == SUPPORTED_OPERATIONS
    assert {
        Op.DESCRIBE: {Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER},
        Op.DESCRIBE_CONFIGS: {Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS},
    } == IMPLIED_BY


# --- value types --------------------------------------------------------------------------


@pytest.mark.parametrize("rt", [RT.ANY, RT.UNKNOWN])
def test_pattern_refuses_a_filter_resource_type(rt: ResourceType) -> None:
    with pytest.raises(ValueError, match=f"resourceType must not be {rt.name}"):
        ResourcePattern(rt, "x", PT.LITERAL)


@pytest.mark.parametrize("pt", [PT.ANY, PT.MATCH, PT.UNKNOWN])
def test_pattern_refuses_a_filter_pattern_type(pt: PatternType) -> None:
    with pytest.raises(ValueError, match=f"patternType must not be {pt.name}"):
        ResourcePattern(RT.TOPIC, "x", pt)


def test_values_are_coerced_from_wire_codes_and_hashable() -> None:
    p = ResourcePattern(2, "t", 4)  # type: ignore[arg-type]
    assert p.resource_type is RT.TOPIC and p.pattern_type is PT.PREFIXED
    assert p == topic("t", PT.PREFIXED) and hash(p) == hash(topic("t", PT.PREFIXED))
    e = AccessControlEntry("User:a", "*", 3, 3)  # type: ignore[arg-type]
    assert e.operation is Op.READ and e.permission_type is ALLOW
    assert str(topic("orders")) == "Topic:LITERAL:orders"
    with pytest.raises(ValueError):
        ResourcePattern(99, "t", 3)  # type: ignore[arg-type]


def test_entry_refuses_any_but_keeps_unknown() -> None:
    with pytest.raises(ValueError, match="operation must not be ANY"):
        entry(op=Op.ANY)
    with pytest.raises(ValueError, match="permissionType must not be ANY"):
        entry(perm=Perm.ANY)
    assert entry(op=Op.UNKNOWN).operation is Op.UNKNOWN
    with pytest.raises(TypeError):
        AccessControlEntry(None, "*", Op.READ, ALLOW)  # type: ignore[arg-type]


# --- filters ------------------------------------------------------------------------------

LIT_FOO = topic("foo")
LIT_STAR = topic(WILDCARD)
PRE_F = topic("f", PT.PREFIXED)
PRE_FOO = topic("foo", PT.PREFIXED)
PRE_FOOBAR = topic("foobar", PT.PREFIXED)
LIT_BAR = topic("bar")
GROUP_FOO = ResourcePattern(RT.GROUP, "foo", PT.LITERAL)
ALL_PATTERNS = [LIT_FOO, LIT_STAR, PRE_F, PRE_FOO, PRE_FOOBAR, LIT_BAR, GROUP_FOO]


@pytest.mark.parametrize(
    "flt, expected",
    [
        (ResourcePatternFilter.ANY, ALL_PATTERNS),
        (ResourcePatternFilter(RT.TOPIC, None, PT.ANY), ALL_PATTERNS[:-1]),
        (ResourcePatternFilter(RT.ANY, "foo", PT.ANY), [LIT_FOO, PRE_FOO, GROUP_FOO]),
        (ResourcePatternFilter(RT.TOPIC, "foo", PT.ANY), [LIT_FOO, PRE_FOO]),
        (ResourcePatternFilter(RT.TOPIC, "foo", PT.LITERAL), [LIT_FOO]),
        (ResourcePatternFilter(RT.TOPIC, "foo", PT.PREFIXED), [PRE_FOO]),
        (ResourcePatternFilter(RT.TOPIC, None, PT.PREFIXED), [PRE_F, PRE_FOO, PRE_FOOBAR]),
        (ResourcePatternFilter(RT.TOPIC, "*", PT.LITERAL), [LIT_STAR]),
        # MATCH: the literal name, the literal *, every prefix of the name
        (ResourcePatternFilter(RT.TOPIC, "foo", PT.MATCH), [LIT_FOO, LIT_STAR, PRE_F, PRE_FOO]),
        (ResourcePatternFilter(RT.TOPIC, "foobarbaz", PT.MATCH),
         [LIT_STAR, PRE_F, PRE_FOO, PRE_FOOBAR]),
        (ResourcePatternFilter(RT.TOPIC, "bar", PT.MATCH), [LIT_STAR, LIT_BAR]),
        (ResourcePatternFilter(RT.ANY, "foo", PT.MATCH),
         [LIT_FOO, LIT_STAR, PRE_F, PRE_FOO, GROUP_FOO]),
        (ResourcePatternFilter(RT.TOPIC, None, PT.MATCH), ALL_PATTERNS[:-1]),
        (ResourcePatternFilter(RT.CLUSTER, None, PT.ANY), []),
    ],
)
def test_resource_pattern_filter(flt: ResourcePatternFilter, expected: list[ResourcePattern]) -> None:
    assert [p for p in ALL_PATTERNS if flt.matches(p)] == expected


def test_entry_filter_null_and_any_fields_match_everything() -> None:
    entries = [
        entry(), entry("User:bob"), entry(host="10.0.0.1"), entry(op=Op.WRITE),
        entry(perm=DENY), entry("User:*"),
    ]
    assert all(AccessControlEntryFilter.ANY.matches(e) for e in entries)
    by_principal = AccessControlEntryFilter("User:alice", None, Op.ANY, Perm.ANY)
    assert [e for e in entries if not by_principal.matches(e)] == [entries[1], entries[5]]
    by_host = AccessControlEntryFilter(None, "10.0.0.1", Op.ANY, Perm.ANY)
    assert [e for e in entries if by_host.matches(e)] == [entries[2]]
    by_op = AccessControlEntryFilter(None, None, Op.WRITE, Perm.ANY)
    assert [e for e in entries if by_op.matches(e)] == [entries[3]]
    by_perm = AccessControlEntryFilter(None, None, Op.ANY, DENY)
    assert [e for e in entries if by_perm.matches(e)] == [entries[4]]


def test_entry_filter_is_exact() -> None:
    """No wildcard expansion and no operation implication in filters."""
    star = entry("User:*", op=Op.ALL)
    assert not AccessControlEntryFilter("User:alice", None, Op.ANY, Perm.ANY).matches(star)
    assert not AccessControlEntryFilter(None, None, Op.READ, Perm.ANY).matches(star)
    assert not AccessControlEntryFilter(None, None, Op.DESCRIBE, Perm.ANY).matches(entry())
    assert not AccessControlEntryFilter(None, "127.0.0.1", Op.ANY, Perm.ANY).matches(entry())


def test_binding_filter_needs_both_halves() -> None:
    binding = AclBinding(LIT_FOO, entry())
    assert AclBindingFilter.ANY.matches(binding)
    assert binding.to_filter().matches(binding)
    assert binding.to_filter().matches_at_most_one()
    assert not binding.to_filter().matches(AclBinding(LIT_BAR, entry()))
    assert not binding.to_filter().matches(AclBinding(LIT_FOO, entry(op=Op.WRITE)))
    only_pattern = AclBindingFilter(LIT_FOO.to_filter(), AccessControlEntryFilter.ANY)
    assert only_pattern.matches(AclBinding(LIT_FOO, entry(perm=DENY)))
    assert not only_pattern.matches(AclBinding(PRE_FOO, entry()))


def test_indefinite_fields_and_unknown() -> None:
    assert AclBindingFilter.ANY.find_indefinite_field() == "Resource type is ANY."
    assert not AclBindingFilter.ANY.matches_at_most_one()
    flt = AclBindingFilter(
        ResourcePatternFilter(RT.TOPIC, "t", PT.LITERAL),
        AccessControlEntryFilter("User:a", "*", Op.READ, Perm.ANY),
    )
    assert flt.find_indefinite_field() == "Permission type is ANY"
    assert not flt.is_unknown
    assert AclBindingFilter(
        ResourcePatternFilter(RT.UNKNOWN, "t", PT.LITERAL), AccessControlEntryFilter.ANY
    ).is_unknown
    assert ResourcePatternFilter(RT.TOPIC, "t", PT.MATCH).find_indefinite_field() == (
        "Resource pattern type is MATCH."
    )
    assert AccessControlEntryFilter("User:a", None, Op.READ, ALLOW).find_indefinite_field() == (
        "Host is NULL"
    )


# --- ZooKeeper JSON -----------------------------------------------------------------------


def test_encode_writes_kafka_39_layout() -> None:
    """Byte for byte what Kafka 3.9's ``AclEntry.toJsonCompatibleMap`` + Jackson produce (the
    key order is that of java.util.HashMap for these keys)."""
    assert encode_acls([entry()]) == (
        b'{"acls":[{"principal":"User:alice","permissionType":"Allow","host":"*",'
        b'"operation":"Read"}],"version":1}'
    )
    assert encode_acls([entry("User:bob", "10.0.0.1", Op.IDEMPOTENT_WRITE, DENY)]) == (
        b'{"acls":[{"principal":"User:bob","permissionType":"Deny","host":"10.0.0.1",'
        b'"operation":"IdempotentWrite"}],"version":1}'
    )
    assert encode_acls([]) == b'{"acls":[],"version":1}'


def test_encode_is_deterministic_and_escapes_like_jackson() -> None:
    a, b = entry("User:b"), entry("User:a", op=Op.DESCRIBE_CONFIGS)
    assert encode_acls([a, b, a]) == encode_acls([b, a])
    doc = json.loads(encode_acls([a, b]))
    assert [e["principal"] for e in doc["acls"]] == ["User:a", "User:b"]
    odd = entry('User:CN=é "x"\\y\n\x01')
    data = encode_acls([odd])
    assert b'"User:CN=\xc3\xa9 \\"x\\"\\\\y\\n\\u0001"' in data
    assert decode_acls(data) == {odd}


def test_round_trip_every_operation_and_permission() -> None:
    entries = {
        entry(f"User:u{op}", "::1", op, perm)
        for op in Op if op is not Op.ANY
        for perm in (ALLOW, DENY)
    }
    assert decode_acls(encode_acls(entries)) == entries


def test_decode_reads_what_older_kafka_and_kafka_acls_wrote() -> None:
    old_layout = (
        b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",'
        b'"operation":"Read","host":"*"},{"host":"host1","permissionType":"DENY",'
        b'"operation":"CLUSTERACTION","principal":"User:CN=a,O=b"}]}'
    )
    assert decode_acls(old_layout) == {
        entry(),
        entry("User:CN=a,O=b", "host1", Op.CLUSTER_ACTION, DENY),
    }
    pretty = json.dumps(
        {"version": 1, "acls": [{"principal": "User:x", "permissionType": "allow",
                                 "operation": "describe_configs", "host": "*", "extra": 1}]},
        indent=2,
    ).encode()
    assert decode_acls(pretty) == {entry("User:x", op=Op.DESCRIBE_CONFIGS)}


def test_decode_empty_data_is_no_acls() -> None:
    assert decode_acls(b"") == set()
    assert decode_acls(b'{"version":1,"acls":[]}') == set()


def test_decode_keeps_an_unknown_operation_name_as_unknown() -> None:
    data = (
        b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Deny",'
        b'"operation":"TwoPhaseCommit","host":"*"},{"principal":"User:a",'
        b'"permissionType":"Allow","operation":"Read","host":"*"}]}'
    )
    assert decode_acls(data) == {entry("User:a", op=Op.UNKNOWN, perm=DENY), entry("User:a")}


@pytest.mark.parametrize(
    "data",
    [
        b"not json",
        b"\xff\xfe",
        b"[]",
        b"null",
        b'{"acls":[]}',
        b'{"version":2,"acls":[]}',
        b'{"version":"1","acls":[]}',
        b'{"version":1.0,"acls":[]}',
        b'{"version":true,"acls":[]}',
        b'{"version":1}',
        b'{"version":1,"acls":{}}',
        b'{"version":1,"acls":["x"]}',
        b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Allow","host":"*"}]}',
        b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Allow","host":null,'
        b'"operation":"Read"}]}',
        b'{"version":1,"acls":[{"principal":"alice","permissionType":"Allow","host":"*",'
        b'"operation":"Read"}]}',
        b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Any","host":"*",'
        b'"operation":"Read"}]}',
        b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Allow","host":"*",'
        b'"operation":"Any"}]}',
        b'{"version":1,"acls":[]} trailing',
    ],
)
def test_decode_refuses_malformed_data(data: bytes) -> None:
    with pytest.raises(ValueError):
        decode_acls(data)


def test_decode_byte_by_byte_prefixes_are_refused() -> None:
    data = encode_acls([entry()])
    for cut in range(1, len(data)):
        with pytest.raises(ValueError):
            decode_acls(data[:cut])


# --- validate_binding ---------------------------------------------------------------------


def binding(
    pattern: ResourcePattern = LIT_FOO, **kw: object
) -> AclBinding:
    return AclBinding(pattern, entry(**kw))  # type: ignore[arg-type]


def test_valid_bindings() -> None:
    good = [
        binding(),
        binding(topic("orders-", PT.PREFIXED), op=Op.ALL, perm=DENY),
        binding(LIT_STAR, principal="User:*", host="10.1.2.3", op=Op.DESCRIBE_CONFIGS),
        binding(host="::1"),
        binding(host="2001:db8:0:0:0:0:0:1"),
        binding(ResourcePattern(RT.CLUSTER, CLUSTER_NAME, PT.LITERAL), op=Op.IDEMPOTENT_WRITE),
        binding(ResourcePattern(RT.USER, "bob", PT.LITERAL), op=Op.CREATE_TOKENS),
        binding(ResourcePattern(RT.GROUP, "g", PT.PREFIXED), op=Op.ALL),
    ]
    for b in good:
        assert validate_binding(b) is None, b
        assert validate_binding(b, strict=False) is None, b


@pytest.mark.parametrize(
    "b, reason",
    [
        (binding(ResourcePattern(RT.CLUSTER, "other", PT.LITERAL), op=Op.ALTER),
         "The only valid name for the CLUSTER resource is kafka-cluster"),
        (binding(ResourcePattern(RT.CLUSTER, "kafka-", PT.PREFIXED), op=Op.ALTER),
         "The only valid name for the CLUSTER resource is kafka-cluster"),
        (binding(topic("")), "Invalid empty resource name"),
        (binding(topic("a/b")), "ACL binding contains invalid resource name: a/b"),
        (binding(op=Op.UNKNOWN), "ACL binding contains unknown elements"),
        (binding(perm=Perm.UNKNOWN), "ACL binding contains unknown elements"),
        (binding(principal="alice"), "Could not parse principal from `alice`"),
    ],
)
def test_kafka_broker_refusals(b: AclBinding, reason: str) -> None:
    assert (validate_binding(b) or "").startswith(reason)
    assert (validate_binding(b, strict=False) or "").startswith(reason)


@pytest.mark.parametrize(
    "b, reason",
    [
        (binding(principal="Group:g"), "Invalid principal `Group:g`"),
        (binding(principal="User:"), "Invalid principal `User:`"),
        (binding(host="localhost"), "Invalid host `localhost`"),
        (binding(host="10.0.0.0/8"), "Invalid host `10.0.0.0/8`"),
        (binding(op=Op.CLUSTER_ACTION),
         "ResourceType Topic only supports operations All, Read, Write, Create, Delete, Alter, "
         "Describe, DescribeConfigs, AlterConfigs"),
        (binding(ResourcePattern(RT.GROUP, "g", PT.LITERAL), op=Op.WRITE),
         "ResourceType Group only supports operations All, Read, Delete, Describe"),
        (binding(ResourcePattern(RT.TRANSACTIONAL_ID, "t", PT.LITERAL), op=Op.READ),
         "ResourceType TransactionalId only supports"),
    ],
)
def test_strict_refusals_kafka_leaves_to_the_tool(b: AclBinding, reason: str) -> None:
    assert (validate_binding(b) or "").startswith(reason)
    assert validate_binding(b, strict=False) is None
