"""Kafka's ACL layout in ZooKeeper, byte for byte (``kafka.zk.ZkData``: ZkAclStore,
LiteralAclChangeStore, ExtendedAclChangeStore; Kafka's ``LiteralAclStoreTest`` and
``ExtendedAclStoreTest``), and decoding of what Kafka's brokers and ``kafka-acls`` write."""

from __future__ import annotations

import pytest

from millrace.broker.zk import zk_data as zd
from millrace.security.acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

LITERAL_TOPIC = ResourcePattern(ResourceType.TOPIC, "some-topic", PatternType.LITERAL)
PREFIXED_TOPIC = ResourcePattern(ResourceType.TOPIC, "some-topic", PatternType.PREFIXED)

# what Kafka 3.9 writes for one Allow Read entry: Jackson over Java HashMaps, so the keys
# come out in hash order ("acls" before "version"; "host" before "operation")
KAFKA_ZNODE = (b'{"acls":[{"principal":"User:alice","permissionType":"Allow","host":"*",'
               b'"operation":"Read"}],"version":1}')


def test_store_paths() -> None:
    assert zd.acl_store_path(PatternType.LITERAL) == "/kafka-acl"
    assert zd.acl_store_path(PatternType.PREFIXED) == "/kafka-acl-extended/prefixed"
    assert zd.acl_resource_type_path(PatternType.LITERAL, ResourceType.TOPIC) == \
        "/kafka-acl/Topic"
    assert zd.acl_resource_type_path(PatternType.PREFIXED, ResourceType.TOPIC) == \
        "/kafka-acl-extended/prefixed/Topic"
    for pattern_type in (PatternType.ANY, PatternType.MATCH, PatternType.UNKNOWN):
        with pytest.raises(ValueError, match="Invalid pattern type"):
            zd.acl_store_path(pattern_type)
        with pytest.raises(ValueError):
            zd.acl_change_path(pattern_type)


def test_resource_paths_use_pascal_case_types_and_raw_names() -> None:
    cases = {
        ResourcePattern(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL):
            "/kafka-acl/Cluster/kafka-cluster",
        ResourcePattern(ResourceType.TOPIC, "*", PatternType.LITERAL): "/kafka-acl/Topic/*",
        ResourcePattern(ResourceType.GROUP, "group-1", PatternType.PREFIXED):
            "/kafka-acl-extended/prefixed/Group/group-1",
        ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx.a", PatternType.LITERAL):
            "/kafka-acl/TransactionalId/tx.a",
        ResourcePattern(ResourceType.DELEGATION_TOKEN, "t", PatternType.LITERAL):
            "/kafka-acl/DelegationToken/t",
        ResourcePattern(ResourceType.USER, "CN=a,O=b", PatternType.PREFIXED):
            "/kafka-acl-extended/prefixed/User/CN=a,O=b",
    }
    for pattern, path in cases.items():
        assert zd.acl_resource_path(pattern) == path
    for bad in ("", "a/b"):
        with pytest.raises(ValueError, match="cannot name a znode"):
            zd.acl_resource_path(ResourcePattern(ResourceType.TOPIC, bad, PatternType.LITERAL))


def test_acl_paths_are_kafkas_create_acl_paths() -> None:
    types = ("Topic", "Group", "Cluster", "TransactionalId", "DelegationToken", "User")
    expected = {"/kafka-acl", "/kafka-acl-extended/prefixed", "/kafka-acl-changes",
                "/kafka-acl-extended-changes",
                *(f"/kafka-acl/{t}" for t in types),
                *(f"/kafka-acl-extended/prefixed/{t}" for t in types)}
    assert set(zd.acl_paths()) == expected
    assert len(zd.acl_paths()) == len(expected)
    # every parent before its children (ensure_path creates parents anyway, but in order)
    paths = zd.acl_paths()
    assert paths.index("/kafka-acl") < paths.index("/kafka-acl/Topic")


def test_change_paths() -> None:
    assert zd.acl_change_path(PatternType.LITERAL) == "/kafka-acl-changes"
    assert zd.acl_change_path(PatternType.PREFIXED) == "/kafka-acl-extended-changes"
    assert zd.acl_change_pattern_type("/kafka-acl-changes") == PatternType.LITERAL
    assert zd.acl_change_pattern_type("/kafka-acl-extended-changes") == PatternType.PREFIXED
    with pytest.raises(ValueError):
        zd.acl_change_pattern_type("/config/changes")
    assert zd.sequence_number_of("acl_changes_0000000007", zd.ACL_CHANGE_PREFIX) == \
        "0000000007"


def test_literal_change_is_the_enum_name_text() -> None:
    # LiteralAclChangeStore.encode: ResourceType.toString (the enum name) + ":" + name
    assert zd.encode_acl_change_notification(LITERAL_TOPIC) == b"TOPIC:some-topic"
    assert zd.encode_acl_change_notification(ResourcePattern(
        ResourceType.TRANSACTIONAL_ID, "tx:1", PatternType.LITERAL)) == b"TRANSACTIONAL_ID:tx:1"
    assert zd.decode_acl_change_notification(
        zd.KAFKA_ACL_CHANGES_PATH, b"TOPIC:some-topic") == LITERAL_TOPIC


def test_literal_change_decoding_splits_once() -> None:
    # LiteralAclStoreTest.shouldDecodeResourceUsingTwoPartLogic
    name = "PREFIXED:this, including the PREFIXED part, is a valid two part group name"
    assert zd.decode_acl_change_notification(
        zd.KAFKA_ACL_CHANGES_PATH, f"GROUP:{name}".encode()) == \
        ResourcePattern(ResourceType.GROUP, name, PatternType.LITERAL)


def test_literal_change_type_names_any_case_and_kafka_1_pascal_case() -> None:
    for text, resource_type in (("topic:x", ResourceType.TOPIC),
                                ("Topic:x", ResourceType.TOPIC),        # Kafka 1.x
                                ("TransactionalId:x", ResourceType.TRANSACTIONAL_ID),
                                ("delegation_token:x", ResourceType.DELEGATION_TOKEN)):
        assert zd.decode_acl_change_notification(zd.KAFKA_ACL_CHANGES_PATH, text.encode()) \
            == ResourcePattern(resource_type, "x", PatternType.LITERAL)
    for bad in (b"Bogus:x", b"ANY:x", b"UNKNOWN:x", b"no separator", b""):
        with pytest.raises(ValueError):
            zd.decode_acl_change_notification(zd.KAFKA_ACL_CHANGES_PATH, bad)


def test_extended_change_is_kafkas_jackson_json() -> None:
    # ExtendedAclChangeEvent through Jackson: the case class's fields in declaration order
    data = zd.encode_acl_change_notification(
        ResourcePattern(ResourceType.TOPIC, "orders-é/x", PatternType.PREFIXED))
    assert data == ('{"version":1,"resourceType":"TOPIC","name":"orders-é/x",'
                    '"patternType":"PREFIXED"}').encode()
    assert zd.decode_acl_change_notification(zd.KAFKA_ACL_EXTENDED_CHANGES_PATH, data) == \
        ResourcePattern(ResourceType.TOPIC, "orders-é/x", PatternType.PREFIXED)
    # ExtendedAclStoreTest.shouldRoundTripChangeNode; any key order is read
    assert zd.decode_acl_change_notification(
        zd.KAFKA_ACL_EXTENDED_CHANGES_PATH,
        b'{"patternType":"PREFIXED","name":"some-topic","resourceType":"TOPIC","version":1}'
    ) == PREFIXED_TOPIC


def test_extended_change_refusals() -> None:
    for bad in (b'{"version":2,"resourceType":"TOPIC","name":"x","patternType":"PREFIXED"}',
                b'{"version":1,"resourceType":"TOPIC","name":"x","patternType":"MATCH"}',
                b'{"version":1,"resourceType":"TOPIC","name":"x","patternType":"prefixed"}',
                b'{"version":1,"resourceType":"BOGUS","name":"x","patternType":"PREFIXED"}',
                b'{"version":1,"resourceType":"TOPIC","patternType":"PREFIXED"}',
                b'TOPIC:x', b'[]', b''):
        with pytest.raises(ValueError):
            zd.decode_acl_change_notification(zd.KAFKA_ACL_EXTENDED_CHANGES_PATH, bad)


def test_resource_type_dir_names() -> None:
    assert zd.resource_type_from_path_name("Topic") == ResourceType.TOPIC
    assert zd.resource_type_from_path_name("TransactionalId") == ResourceType.TRANSACTIONAL_ID
    assert zd.resource_type_from_path_name("User") == ResourceType.USER
    for skipped in ("TOPIC", "topic", "Any", "Unknown", "Bogus"):
        assert zd.resource_type_from_path_name(skipped) is None


def test_versioned_acls_from_kafkas_znode() -> None:
    acls = zd.decode_versioned_acls(KAFKA_ZNODE, 3)
    assert acls.exists and acls.zk_version == 3
    assert acls.entries == {AccessControlEntry("User:alice", "*", AclOperation.READ,
                                               AclPermissionType.ALLOW)}
    # the javadoc's form (spaces, other order) and upper-case names are read too
    assert zd.decode_versioned_acls(
        b'{"version": 1, "acls": [ {"host":"host1", "permissionType": "DENY",'
        b'"operation": "IdempotentWrite","principal": "User:alice"}]}', 0).entries == {
        AccessControlEntry("User:alice", "host1", AclOperation.IDEMPOTENT_WRITE,
                           AclPermissionType.DENY)}
    # AclEntry.fromBytes: an empty znode holds no ACLs; only version 1 is read
    assert zd.decode_versioned_acls(b"", 0).entries == frozenset()
    with pytest.raises(ValueError):
        zd.decode_versioned_acls(KAFKA_ZNODE.replace(b'"version":1', b'"version":2'), 0)
    assert not zd.NO_ACLS.exists and zd.NO_ACLS.zk_version == zd.UNKNOWN_VERSION
