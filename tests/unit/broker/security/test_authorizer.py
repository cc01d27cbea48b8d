"""AclAuthorizer: Kafka 3.9's decision algorithm, KIP-679, bitfields and the audit log."""

from __future__ import annotations

import logging

import pytest

from millrace.broker.security.authorizer import AclAuthorizer, Action, parse_super_users
from millrace.common.errors import ConfigError
from millrace.security.acl import (
    SUPPORTED_OPERATIONS,
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
)
from millrace.security.kafka_principal import KafkaPrincipal

Op, RT, PT = AclOperation, ResourceType, PatternType
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
ALICE, BOB, ADMIN = KafkaPrincipal.user("alice"), KafkaPrincipal.user("bob"), KafkaPrincipal.user("admin")
HOST = "10.0.0.1"


def ace(
    principal: str = "User:alice", op: AclOperation = Op.READ, perm: AclPermissionType = ALLOW,
    host: str = "*",
) -> AccessControlEntry:
    return AccessControlEntry(principal, host, op, perm)


def topic(name: str, pattern_type: PatternType = PT.LITERAL) -> ResourcePattern:
    return ResourcePattern(RT.TOPIC, name, pattern_type)


def authorizer(
    acls: dict[ResourcePattern, set[AccessControlEntry]] | None = None,
    super_users: str = "", allow_everyone: bool = False,
) -> AclAuthorizer:
    auth = AclAuthorizer(parse_super_users(super_users), allow_everyone)
    for pattern, entries in (acls or {}).items():
        auth.update_resource(pattern, entries)
    return auth


def can(
    auth: AclAuthorizer, op: AclOperation, name: str = "orders",
    principal: KafkaPrincipal = ALICE, host: str = HOST, rt: ResourceType = RT.TOPIC,
) -> bool:
    return auth.authorize(principal, host, Action(op, rt, name))


# --- super users and allow.everyone.if.no.acl.found ---------------------------------------


def test_super_user_is_allowed_everything_even_against_a_deny() -> None:
    acls = {topic("orders"): {ace("User:admin", Op.ALL, DENY)}}
    auth = authorizer(acls, super_users="User:admin; User:CN=x,O=y ;")
    assert can(auth, Op.WRITE, principal=ADMIN)
    assert can(auth, Op.ALTER, "other", principal=KafkaPrincipal.user("CN=x,O=y"))
    assert auth.super_users == {"User:admin", "User:CN=x,O=y"}
    # control: the same principal without super.users is denied by the same ACL
    assert not can(authorizer(acls), Op.WRITE, principal=ADMIN)
    # the principal type is case-sensitive, as in Kafka
    assert not can(auth, Op.WRITE, principal=KafkaPrincipal("user", "admin"))


def test_super_users_as_a_config_string_and_malformed() -> None:
    auth = AclAuthorizer("User:a;User:b")
    assert auth.super_users == {"User:a", "User:b"}
    assert parse_super_users(" User:a ;; User:b;") == ["User:a", "User:b"]
    with pytest.raises(ConfigError):
        AclAuthorizer(["admin"])


@pytest.mark.parametrize("allow_everyone", [False, True])
def test_no_acl_at_all_follows_allow_everyone(allow_everyone: bool) -> None:
    auth = authorizer(allow_everyone=allow_everyone)
    assert auth.allow_everyone_if_no_acl_found is allow_everyone
    assert can(auth, Op.WRITE) is allow_everyone
    assert can(auth, Op.CLUSTER_ACTION, "kafka-cluster", rt=RT.CLUSTER) is allow_everyone


def test_allow_everyone_does_not_apply_once_any_acl_covers_the_resource() -> None:
    for pattern in (topic("orders"), topic("*"), topic("ord", PT.PREFIXED)):
        auth = authorizer({pattern: {ace("User:bob")}}, allow_everyone=True)
        assert not can(auth, Op.READ), pattern  # an ACL for bob is "some ACL"
        assert can(auth, Op.READ, principal=BOB)
    # control: ACLs on another resource (or another type) leave it "no ACL found"
    auth = authorizer(
        {topic("payments"): {ace("User:bob")},
         ResourcePattern(RT.GROUP, "orders", PT.LITERAL): {ace("User:bob")}},
        allow_everyone=True,
    )
    assert can(auth, Op.READ)


# --- deny wins; implication; All ----------------------------------------------------------


def test_deny_wins_and_removing_it_flips_the_answer() -> None:
    auth = authorizer({topic("orders"): {ace(op=Op.READ), ace(op=Op.READ, perm=DENY)}})
    assert not can(auth, Op.READ)
    auth.update_resource(topic("orders"), {ace(op=Op.READ)})
    assert can(auth, Op.READ)


@pytest.mark.parametrize(
    "deny_pattern, deny_entry",
    [
        (topic("*"), ace(op=Op.WRITE, perm=DENY)),
        (topic("ord", PT.PREFIXED), ace(op=Op.WRITE, perm=DENY)),
        (topic("orders", PT.PREFIXED), ace(op=Op.WRITE, perm=DENY)),
        (topic("orders"), ace("User:*", Op.WRITE, DENY)),
        (topic("orders"), ace(op=Op.ALL, perm=DENY)),
        (topic("orders"), ace(op=Op.WRITE, perm=DENY, host=HOST)),
    ],
)
def test_a_deny_from_any_applicable_pattern_beats_an_allow(
    deny_pattern: ResourcePattern, deny_entry: AccessControlEntry
) -> None:
    allow = {topic("orders"): {ace(op=Op.WRITE)}}
    auth = authorizer(allow)
    assert can(auth, Op.WRITE)
    entries = {deny_entry} | allow.get(deny_pattern, set())
    auth.update_resource(deny_pattern, entries)
    assert not can(auth, Op.WRITE)


@pytest.mark.parametrize("implying", [Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER])
def test_describe_is_implied_by_read_write_delete_alter(implying: AclOperation) -> None:
    assert can(authorizer({topic("orders"): {ace(op=implying)}}), Op.DESCRIBE)


@pytest.mark.parametrize("op", [Op.CREATE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.CLUSTER_ACTION])
def test_describe_is_not_implied_by_other_operations(op: AclOperation) -> None:
    assert not can(authorizer({topic("orders"): {ace(op=op)}}), Op.DESCRIBE)


def test_describe_configs_is_implied_by_alter_configs_only() -> None:
    assert can(authorizer({topic("orders"): {ace(op=Op.ALTER_CONFIGS)}}), Op.DESCRIBE_CONFIGS)
    assert not can(authorizer({topic("orders"): {ace(op=Op.ALTER)}}), Op.DESCRIBE_CONFIGS)
    # implication runs one way only
    assert not can(authorizer({topic("orders"): {ace(op=Op.DESCRIBE_CONFIGS)}}), Op.ALTER_CONFIGS)
    assert not can(authorizer({topic("orders"): {ace(op=Op.DESCRIBE)}}), Op.READ)


def test_a_deny_is_not_widened_by_implication() -> None:
    acls = {topic("orders"): {ace(op=Op.READ), ace(op=Op.READ, perm=DENY)}}
    auth = authorizer(acls)
    assert not can(auth, Op.READ)
    assert can(auth, Op.DESCRIBE)  # ALLOW Read implies it, DENY Read does not deny it
    auth.update_resource(topic("orders"), acls[topic("orders")] | {ace(op=Op.DESCRIBE, perm=DENY)})
    assert not can(auth, Op.DESCRIBE)
    cfg = authorizer({topic("orders"): {ace(op=Op.ALTER_CONFIGS), ace(op=Op.ALTER_CONFIGS, perm=DENY)}})
    assert can(cfg, Op.DESCRIBE_CONFIGS)


def test_all_allows_and_denies_every_operation() -> None:
    auth = authorizer({topic("orders"): {ace(op=Op.ALL)}})
    for op in SUPPORTED_OPERATIONS[RT.TOPIC]:
        assert can(auth, op), op
    auth.update_resource(topic("*"), {ace(op=Op.ALL, perm=DENY)})
    for op in SUPPORTED_OPERATIONS[RT.TOPIC]:
        assert not can(auth, op), op


# --- principals, hosts, resources ---------------------------------------------------------


def test_wildcard_principal_is_user_star_only() -> None:
    auth = authorizer({topic("orders"): {ace("User:*")}})
    assert can(auth, Op.READ) and can(auth, Op.READ, principal=BOB)
    # as in Kafka, User:* is everyone, whatever the principal's type
    assert can(auth, Op.READ, principal=KafkaPrincipal("Group", "x"))
    assert not can(authorizer({topic("orders"): {ace("Group:*")}}), Op.READ)
    assert not can(authorizer({topic("orders"): {ace("Group:*")}}), Op.READ,
                   principal=KafkaPrincipal("Group", "x"))
    # a principal of another type with the same name is another principal
    assert not can(authorizer({topic("orders"): {ace()}}), Op.READ,
                   principal=KafkaPrincipal("Group", "alice"))


def test_an_entry_for_another_principal_does_not_allow() -> None:
    auth = authorizer({topic("orders"): {ace("User:bob")}})
    assert not can(auth, Op.READ)
    assert can(auth, Op.READ, principal=BOB)


@pytest.mark.parametrize(
    "acl_host, client, matches",
    [
        ("*", "10.0.0.1", True),
        ("*", "::1", True),
        ("10.0.0.1", "10.0.0.1", True),
        ("10.0.0.1", "10.0.0.2", False),
        ("0:0:0:0:0:0:0:1", "::1", True),
        ("::1", "0:0:0:0:0:0:0:1", True),
        ("2001:db8:0:0:0:0:0:a0b", "2001:DB8::A0B", True),
        ("2001:db8::a0b", "2001:db8::a0c", False),
        ("10.0.0.1", "::ffff:10.0.0.1", True),  # Java sees an IPv4-mapped peer as IPv4
        ("::1", "127.0.0.1", False),
        ("localhost", "127.0.0.1", False),  # host names are not resolved
    ],
)
def test_host_matching(acl_host: str, client: str, matches: bool) -> None:
    auth = authorizer({topic("orders"): {ace(host=acl_host)}})
    assert can(auth, Op.READ, host=client) is matches


def test_host_deny_applies_only_to_that_address() -> None:
    auth = authorizer({topic("orders"): {ace(), ace(perm=DENY, host="0:0:0:0:0:0:0:1")}})
    assert not can(auth, Op.READ, host="::1")
    assert can(auth, Op.READ, host="::2")


def test_literal_star_applies_to_every_name_of_its_type_only() -> None:
    auth = authorizer({topic("*"): {ace()}})
    assert can(auth, Op.READ, "orders") and can(auth, Op.READ, "x") and can(auth, Op.READ, "*")
    assert not can(auth, Op.READ, "g", rt=RT.GROUP)
    # a literal name is only itself
    literal = authorizer({topic("orders"): {ace()}})
    assert can(literal, Op.READ, "orders")
    assert not can(literal, Op.READ, "orders2") and not can(literal, Op.READ, "*")


def test_prefixed_patterns_apply_to_names_that_start_with_them() -> None:
    auth = authorizer({topic("orders-", PT.PREFIXED): {ace()}})
    assert can(auth, Op.READ, "orders-eu")
    assert can(auth, Op.READ, "orders-")
    assert not can(auth, Op.READ, "orders")
    assert not can(auth, Op.READ, "my-orders-eu")
    assert not can(auth, Op.READ, "orders-eu", rt=RT.GROUP)
    auth.update_resource(topic("o", PT.PREFIXED), {ace(op=Op.WRITE)})
    auth.update_resource(topic("orders-eu-west", PT.PREFIXED), {ace(op=Op.DELETE)})
    assert can(auth, Op.WRITE, "orders-eu") and can(auth, Op.READ, "orders-eu")
    assert not can(auth, Op.DELETE, "orders-eu")
    assert can(auth, Op.DELETE, "orders-eu-west-1")


def test_update_resource_replaces_and_empty_removes() -> None:
    auth = authorizer({topic("orders"): {ace(op=Op.READ)}})
    auth.update_resource(topic("orders"), {ace(op=Op.WRITE)})
    assert not can(auth, Op.READ) and can(auth, Op.WRITE)
    auth.update_resource(topic("orders"), set())
    assert auth.acls() == []
    assert not can(auth, Op.WRITE)
    assert can(AclAuthorizer([], True), Op.WRITE)


def test_load_acls_replaces_everything() -> None:
    auth = authorizer({topic("old"): {ace()}})
    auth.load_acls({topic("orders"): {ace()}, topic("empty"): set()})
    assert [b.pattern for b in auth.acls()] == [topic("orders")]
    assert can(auth, Op.READ, "orders") and not can(auth, Op.READ, "old")


def test_acls_lists_and_filters_bindings() -> None:
    group = ResourcePattern(RT.GROUP, "g", PT.LITERAL)
    auth = authorizer({
        topic("orders"): {ace(), ace("User:bob", Op.WRITE, DENY)},
        topic("ord", PT.PREFIXED): {ace(op=Op.DESCRIBE)},
        topic("*"): {ace("User:*", Op.DESCRIBE)},
        group: {ace()},
    })
    assert auth.acls() == auth.acls(AclBindingFilter.ANY)
    assert [(b.pattern, b.entry) for b in auth.acls()] == [
        (topic("*"), ace("User:*", Op.DESCRIBE)),
        (topic("orders"), ace()),
        (topic("orders"), ace("User:bob", Op.WRITE, DENY)),
        (topic("ord", PT.PREFIXED), ace(op=Op.DESCRIBE)),
        (group, ace()),
    ]
    match = AclBindingFilter(
        ResourcePatternFilter(RT.TOPIC, "orders", PT.MATCH), AccessControlEntryFilter.ANY
    )
    assert len(auth.acls(match)) == 4
    bob = AclBindingFilter(
        ResourcePatternFilter.ANY, AccessControlEntryFilter("User:bob", None, Op.ANY, DENY)
    )
    assert auth.acls(bob) == [AclBinding(topic("orders"), ace("User:bob", Op.WRITE, DENY))]


@pytest.mark.parametrize(
    "op, rt", [(Op.ANY, RT.TOPIC), (Op.UNKNOWN, RT.TOPIC), (Op.READ, RT.ANY), (Op.READ, RT.UNKNOWN)]
)
def test_filter_values_are_not_actions(op: AclOperation, rt: ResourceType) -> None:
    auth = authorizer()
    with pytest.raises(ValueError):
        auth.authorize(ALICE, HOST, Action(op, rt, "x"))
    with pytest.raises(ValueError):
        auth.authorize_by_resource_type(ALICE, HOST, op, rt)


# --- authorize_by_resource_type (KIP-679) -------------------------------------------------


def any_topic(auth: AclAuthorizer, op: AclOperation = Op.WRITE, principal: KafkaPrincipal = ALICE,
              host: str = HOST) -> bool:
    return auth.authorize_by_resource_type(principal, host, op, RT.TOPIC)


def test_by_resource_type_needs_an_allow_somewhere() -> None:
    assert not any_topic(authorizer())
    assert any_topic(authorizer({topic("t1"): {ace(op=Op.WRITE)}}))
    assert any_topic(authorizer({topic("t", PT.PREFIXED): {ace(op=Op.WRITE)}}))
    assert any_topic(authorizer({topic("t1"): {ace("User:*", Op.ALL)}}))
    # no implication, no other type, no other principal or host
    assert not any_topic(authorizer({topic("t1"): {ace(op=Op.READ)}}))
    assert not any_topic(authorizer({ResourcePattern(RT.TRANSACTIONAL_ID, "t", PT.LITERAL):
                                     {ace(op=Op.WRITE)}}))
    assert not any_topic(authorizer({topic("t1"): {ace("User:bob", Op.WRITE)}}))
    assert not any_topic(authorizer({topic("t1"): {ace(op=Op.WRITE, host="10.9.9.9")}}))
    assert any_topic(authorizer({topic("t1"): {ace(op=Op.WRITE, host="10.0.0.1")}}))


def test_by_resource_type_super_user_and_allow_everyone() -> None:
    deny_all = {topic("*"): {ace("User:*", Op.WRITE, DENY)}}
    assert any_topic(authorizer(deny_all, super_users="User:alice"))
    assert any_topic(authorizer(allow_everyone=True))
    # Kafka's order: allow.everyone answers yes before any ACL is weighed ...
    some_deny = {topic("t1"): {ace(op=Op.WRITE, perm=DENY)}}
    assert any_topic(authorizer(some_deny, allow_everyone=True))
    assert not any_topic(authorizer(some_deny))
    # ... except a DENY on the literal *, checked first
    assert not any_topic(authorizer(deny_all, allow_everyone=True))


@pytest.mark.parametrize(
    "acls, allowed",
    [
        # a literal * deny covers everything, even an allow on *
        ({topic("*"): {ace(op=Op.WRITE), ace(op=Op.WRITE, perm=DENY)}}, False),
        ({topic("t1"): {ace(op=Op.WRITE)}, topic("*"): {ace(op=Op.ALL, perm=DENY)}}, False),
        # a deny on the same literal
        ({topic("foo"): {ace(op=Op.WRITE), ace(op=Op.WRITE, perm=DENY)}}, False),
        ({topic("foo"): {ace(op=Op.WRITE), ace(op=Op.WRITE, perm=DENY)},
          topic("bar"): {ace(op=Op.WRITE)}}, True),
        # a broader prefixed deny covers a literal allow ...
        ({topic("foo"): {ace(op=Op.WRITE)}, topic("f", PT.PREFIXED): {ace(op=Op.WRITE, perm=DENY)}},
         False),
        ({topic("foo"): {ace(op=Op.WRITE)}, topic("g", PT.PREFIXED): {ace(op=Op.WRITE, perm=DENY)}},
         True),
        ({topic("foo"): {ace(op=Op.WRITE)}, topic("foo", PT.PREFIXED): {ace(op=Op.WRITE, perm=DENY)}},
         False),
        # ... and a narrower-or-equal prefixed allow; a narrower deny does not
        ({topic("foo", PT.PREFIXED): {ace(op=Op.WRITE)}, topic("fo", PT.PREFIXED):
          {ace(op=Op.WRITE, perm=DENY)}}, False),
        ({topic("foo", PT.PREFIXED): {ace(op=Op.WRITE), ace(op=Op.WRITE, perm=DENY)}}, False),
        ({topic("fo", PT.PREFIXED): {ace(op=Op.WRITE)}, topic("foo", PT.PREFIXED):
          {ace(op=Op.WRITE, perm=DENY)}}, True),
        # a literal deny does not cover a prefixed allow (other names start with it)
        ({topic("a", PT.PREFIXED): {ace(op=Op.WRITE)}, topic("a"): {ace(op=Op.WRITE, perm=DENY)}},
         True),
        # an allow on the literal * survives prefixed and literal denies
        ({topic("*"): {ace(op=Op.WRITE)}, topic("a", PT.PREFIXED): {ace(op=Op.WRITE, perm=DENY)},
          topic("b"): {ace(op=Op.WRITE, perm=DENY)}}, True),
        # denies for others, or for another operation, do not count
        ({topic("foo"): {ace(op=Op.WRITE), ace("User:bob", Op.WRITE, DENY),
                         ace(op=Op.READ, perm=DENY)},
          topic("*"): {ace("User:bob", Op.ALL, DENY)}}, True),
        ({topic("foo"): {ace(op=Op.WRITE)}, topic("f", PT.PREFIXED): {ace("User:*", Op.ALL, DENY)}},
         False),
    ],
)
def test_by_resource_type_denies(
    acls: dict[ResourcePattern, set[AccessControlEntry]], allowed: bool
) -> None:
    assert any_topic(authorizer(acls)) is allowed


# --- authorized_operations ----------------------------------------------------------------


def bits(*ops: AclOperation) -> int:
    return sum(1 << op for op in set(ops))


def test_authorized_operations_bitfields() -> None:
    auth = authorizer({
        topic("orders"): {ace(op=Op.READ)},
        ResourcePattern(RT.CLUSTER, "kafka-cluster", PT.LITERAL): {ace(op=Op.ALL)},
        ResourcePattern(RT.GROUP, "g", PT.LITERAL): {ace(op=Op.DELETE), ace(op=Op.READ, perm=DENY)},
    })
    assert auth.authorized_operations(ALICE, HOST, RT.TOPIC, "orders") == bits(Op.READ, Op.DESCRIBE)
    assert auth.authorized_operations(ALICE, HOST, RT.TOPIC, "other") == 0
    assert auth.authorized_operations(ALICE, HOST, RT.CLUSTER, "kafka-cluster") == bits(
        *SUPPORTED_OPERATIONS[RT.CLUSTER]
    ) == 0b1_1111_1010_0000
    assert auth.authorized_operations(ALICE, HOST, RT.GROUP, "g") == bits(Op.DELETE, Op.DESCRIBE)
    assert auth.authorized_operations(BOB, HOST, RT.TOPIC, "orders") == 0


def test_authorized_operations_for_super_users_and_allow_everyone() -> None:
    everything = bits(*SUPPORTED_OPERATIONS[RT.TOPIC])
    assert everything == 0b1101_1111_1000
    assert authorizer(super_users="User:alice").authorized_operations(
        ALICE, HOST, RT.TOPIC, "t") == everything
    assert authorizer(allow_everyone=True).authorized_operations(
        ALICE, HOST, RT.TOPIC, "t") == everything
    assert authorizer().authorized_operations(ALICE, HOST, RT.TOPIC, "t") == 0
    with pytest.raises(ValueError):
        authorizer().authorized_operations(ALICE, HOST, RT.ANY, "t")


# --- audit log ----------------------------------------------------------------------------


def test_denials_log_at_info_grants_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    auth = authorizer({topic("orders"): {ace("User:bob", Op.READ)}})
    with caplog.at_level(logging.INFO, logger="millrace.authorizer"):
        assert not can(auth, Op.WRITE, principal=BOB, host="127.0.0.1")
        assert can(auth, Op.READ, principal=BOB)
    assert [(r.name, r.levelno, r.getMessage()) for r in caplog.records] == [
        ("millrace.authorizer", logging.INFO,
         "Principal = User:bob is Denied Operation = Write from host = 127.0.0.1 on resource = "
         "Topic:LITERAL:orders"),
    ]
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="millrace.authorizer"):
        assert can(auth, Op.DESCRIBE, principal=BOB, host="::1")
        assert can(authorizer(super_users="User:admin"), Op.CLUSTER_ACTION, "kafka-cluster",
                   principal=ADMIN, rt=RT.CLUSTER)
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.DEBUG, "Principal = User:bob is Allowed Operation = Describe from host = "
                        "0:0:0:0:0:0:0:1 on resource = Topic:LITERAL:orders"),
        (logging.DEBUG, "Principal = User:admin is Allowed Operation = ClusterAction from host = "
                        "10.0.0.1 on resource = Cluster:LITERAL:kafka-cluster"),
    ]


def test_bitfield_lookups_log_at_trace_only(caplog: pytest.LogCaptureFixture) -> None:
    auth = authorizer({topic("orders"): {ace(op=Op.READ)}})
    with caplog.at_level(logging.DEBUG, logger="millrace.authorizer"):
        auth.authorized_operations(ALICE, HOST, RT.TOPIC, "orders")
    assert caplog.records == []
    with caplog.at_level(5, logger="millrace.authorizer"):
        auth.authorized_operations(ALICE, HOST, RT.TOPIC, "orders")
    assert len(caplog.records) == len(SUPPORTED_OPERATIONS[RT.TOPIC])
    assert {r.levelno for r in caplog.records} == {5}


def test_by_resource_type_logs_kafkas_placeholder_resource(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="millrace.authorizer"):
        any_topic(authorizer())
        any_topic(authorizer({topic("t"): {ace(op=Op.WRITE)}}), host="::ffff:10.0.0.7")
        any_topic(authorizer(super_users="User:alice"))  # super users: no line, as in Kafka
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.INFO, "Principal = User:alice is Denied Operation = Write from host = 10.0.0.1 "
                       "on resource = Topic:UNKNOWN:NONE"),
        (logging.DEBUG, "Principal = User:alice is Allowed Operation = Write from host = 10.0.0.7 "
                        "on resource = Topic:UNKNOWN:NONE"),
    ]
