"""CreateAcls / DescribeAcls / DeleteAcls against a broker process *with* the ACL
authorizer: confluent-kafka, kafka-python and the millrace admin client add, list with
Kafka's filter semantics (ANY: every pattern type with exactly this name; MATCH: the
LITERAL name, the LITERAL ``*`` and every PREFIXED pattern that is a prefix of it) and
remove ACLs; an invalid binding is refused alone (INVALID_REQUEST) while the others in
the same request land; a restart loses nothing.

The broker listens PLAINTEXT, so every client is ``User:ANONYMOUS``, made the super user
(the ACL APIs need Alter / Describe on the Cluster; their denial is covered by the unit
tests and the every-API walk)."""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AclBinding as CkBinding
from confluent_kafka.admin import AclBindingFilter as CkFilter
from confluent_kafka.admin import AclOperation as CkOperation
from confluent_kafka.admin import AclPermissionType as CkPermission
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import ResourcePatternType as CkPattern
from confluent_kafka.admin import ResourceType as CkResource

from millrace.client.admin import KafkaAdminClient
from millrace.common.errors import InvalidRequestError
from millrace.security.acl import (
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
from millrace.testing.broker_process import BrokerProcess

pytestmark = pytest.mark.integration

AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "super.users": "User:ANONYMOUS"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("acl-authz-broker"), overrides=AUTHORIZER) as b:
        yield b
    assert b.proc is not None and b.proc.returncode == 0, b.logs()[-5000:]


def ck(restype: CkResource, name: str, pattern: CkPattern, principal: str,
       op: CkOperation, permission: CkPermission = CkPermission.ALLOW) -> CkBinding:
    return CkBinding(restype, name, pattern, principal, "*", op, permission)


def test_confluent_kafka_adds_lists_with_match_and_removes(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    who = f"User:ck-{uuid.uuid4().hex[:6]}"
    literal = ck(CkResource.TOPIC, "orders-eu", CkPattern.LITERAL, who, CkOperation.READ)
    wildcard = ck(CkResource.TOPIC, "*", CkPattern.LITERAL, who, CkOperation.DESCRIBE)
    prefixed = ck(CkResource.TOPIC, "orders-", CkPattern.PREFIXED, who, CkOperation.WRITE)
    other = ck(CkResource.TOPIC, "orders", CkPattern.LITERAL, who, CkOperation.READ)
    group = ck(CkResource.GROUP, "billing", CkPattern.LITERAL, who, CkOperation.READ,
               CkPermission.DENY)
    bad = ck(CkResource.BROKER, "not-the-cluster", CkPattern.LITERAL, who,
             CkOperation.ALTER)
    created = admin.create_acls([literal, wildcard, prefixed, other, group, bad],
                                request_timeout=15)
    for b in (literal, wildcard, prefixed, other, group):
        assert created[b].result(15) is None
    with pytest.raises(KafkaException) as info:
        created[bad].result(15)
    assert info.value.args[0].code() == KafkaError.INVALID_REQUEST
    assert "kafka-cluster" in info.value.args[0].str()

    def listed(flt: CkFilter) -> set[CkBinding]:
        return set(admin.describe_acls(flt, request_timeout=15).result(15))

    mine = CkFilter(CkResource.ANY, None, CkPattern.ANY, who, None, CkOperation.ANY,
                    CkPermission.ANY)
    assert listed(mine) == {literal, wildcard, prefixed, other, group}
    match = CkFilter(CkResource.TOPIC, "orders-eu", CkPattern.MATCH, who, None,
                     CkOperation.ANY, CkPermission.ANY)
    assert listed(match) == {literal, wildcard, prefixed}  # not "orders", not the group
    by_name = CkFilter(CkResource.TOPIC, "orders-", CkPattern.ANY, who, None,
                       CkOperation.ANY, CkPermission.ANY)
    assert listed(by_name) == {prefixed}

    deleted = admin.delete_acls([match], request_timeout=15)[match].result(15)
    assert set(deleted) == {literal, wildcard, prefixed}
    assert listed(mine) == {other, group}


def test_kafka_python_adds_lists_and_removes(broker: BrokerProcess) -> None:
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.admin as kp
    import kafka.errors as kp_errors

    admin = kp.KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="kp-authz")
    who = f"User:kp-{uuid.uuid4().hex[:6]}"
    try:
        topic, op, allow = kp.ResourceType.TOPIC, kp.ACLOperation, kp.ACLPermissionType.ALLOW
        acl = kp.ACL(who, "*", op.WRITE, allow, kp.ResourcePattern(topic, "payments"))
        prefixed = kp.ACL(who, "*", op.READ, allow, kp.ResourcePattern(
            topic, "logs-", kp.ACLResourcePatternType.PREFIXED))
        result = admin.create_acls([acl, prefixed])
        assert result["failed"] == [] and len(result["succeeded"]) == 2

        flt = kp.ACLFilter(who, None, op.ANY, kp.ACLPermissionType.ANY,
                           kp.ResourcePatternFilter(kp.ResourceType.ANY, None,
                                                    kp.ACLResourcePatternType.ANY))
        acls, error = admin.describe_acls(flt)
        assert error is kp_errors.NoError
        assert {(a.resource_pattern.resource_name, a.operation) for a in acls} == \
            {("payments", op.WRITE), ("logs-", op.READ)}

        deleted = admin.delete_acls([flt])
        assert len(deleted) == 1 and len(deleted[0][1]) == 2
        acls, _ = admin.describe_acls(flt)
        assert acls == []
    finally:
        admin.close()


def test_millrace_admin_and_restart(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The millrace admin client, then the broker restarted: the ACLs are still there
    (the single node's metadata file), and the ones deleted stay deleted."""
    who = "User:restart"
    keep = AclBinding(ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx-", PatternType.PREFIXED),
                      AccessControlEntry(who, "*", AclOperation.WRITE, AclPermissionType.ALLOW))
    drop = AclBinding(ResourcePattern(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL),
                      AccessControlEntry(who, "127.0.0.1", AclOperation.IDEMPOTENT_WRITE,
                                         AclPermissionType.ALLOW))
    invalid = AclBinding(ResourcePattern(ResourceType.TOPIC, "a/b", PatternType.LITERAL),
                         AccessControlEntry(who, "*", AclOperation.READ,
                                            AclPermissionType.ALLOW))
    mine = AclBindingFilter(ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY),
                            AccessControlEntryFilter(who, None, AclOperation.ANY,
                                                     AclPermissionType.ANY))
    with BrokerProcess(tmp_path_factory.mktemp("acl-restart"), overrides=AUTHORIZER) as b:
        with KafkaAdminClient(bootstrap_servers=b.bootstrap,
                              default_api_timeout_ms=15_000) as admin:
            created = admin.create_acls([keep, drop, invalid])
            created[keep].result()
            created[drop].result()
            with pytest.raises(InvalidRequestError):
                created[invalid].result()
            assert set(admin.describe_acls(mine)) == {keep, drop}
            removed = admin.delete_acls([drop.to_filter()])
            assert [r.binding for r in removed[drop.to_filter()].result()] == [drop]
        b.stop()
        b.start()
        with KafkaAdminClient(bootstrap_servers=b.bootstrap,
                              default_api_timeout_ms=15_000) as admin:
            assert admin.describe_acls(mine) == [keep]
