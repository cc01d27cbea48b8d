"""The ACL admin APIs against a real broker process without an authorizer (Kafka's
behaviour with ``authorizer.class.name`` unset): confluent-kafka, kafka-python and the
millrace admin client each get SECURITY_DISABLED (54) for every binding, every filter
and every describe, as their own error type -- except librdkafka's describe, which drops
the top-level error of every DescribeAcls response -- and the broker keeps serving, the
same connections and new ones.  The request log shows which versions each client spoke.
"""

from __future__ import annotations

import re
import socket
import time
import uuid
import warnings
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError as CkError
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AclBinding as CkBinding
from confluent_kafka.admin import AclBindingFilter as CkFilter
from confluent_kafka.admin import AclOperation as CkOperation
from confluent_kafka.admin import AclPermissionType as CkPermission
from confluent_kafka.admin import AdminClient as ConfluentAdmin
from confluent_kafka.admin import ResourcePatternType as CkPattern
from confluent_kafka.admin import ResourceType as CkResource

from millrace.client.admin import KafkaAdminClient, NewTopic
from millrace.common.errors import SecurityDisabledError
from millrace.protocol import (
    NEED_DATA,
    ApiVersionsRequest,
    ClientConnection,
    DescribeAclsRequest,
    Response,
)
from millrace.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from millrace.testing.broker_process import BrokerProcess

pytestmark = pytest.mark.integration

DESCRIBE_MESSAGE = "No Authorizer is configured on the broker"
ALTER_MESSAGE = "No Authorizer is configured."


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("acl-broker"), log_level="debug") as b:
        yield b
    assert b.proc is not None and b.proc.returncode == 0, b.logs()[-5000:]


def served(broker: BrokerProcess, client_id: str) -> dict[str, set[int]]:
    """API name -> versions the broker completed for ``client_id`` (the request log)."""
    out: dict[str, set[int]] = {}
    for api, version in re.findall(rf"Completed request: (\w+Acls) v(\d+) correlation id \d+ "
                                   rf"from client '{client_id}'", broker.logs()):
        out.setdefault(api, set()).add(int(version))
    return out


def wait_served(broker: BrokerProcess, client_id: str, apis: set[str]) -> dict[str, set[int]]:
    deadline = time.monotonic() + 10
    while set(got := served(broker, client_id)) < apis and time.monotonic() < deadline:
        time.sleep(0.05)
    return got


def assert_still_serving(broker: BrokerProcess, client_id: str) -> None:
    """No request of ``client_id`` failed a handler, and a new client produces to a new
    topic: the broker survived what came before."""
    topic = f"after-acls-{uuid.uuid4().hex[:6]}"
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    errors: list[object] = []
    producer.produce(topic, b"v", on_delivery=lambda err, msg: err and errors.append(err))
    assert producer.flush(15) == 0 and errors == []
    assert not [line for line in broker.logs().splitlines()
                if "closing the connection" in line and f"'{client_id}'" in line]


def ck_code(future: object) -> tuple[int, str]:
    with pytest.raises(KafkaException) as info:
        future.result(timeout=15)  # type: ignore[attr-defined]
    error = info.value.args[0]
    return error.code(), error.str()


# ---------------------------------------------------------------------- confluent-kafka
def test_confluent_kafka_gets_security_disabled(broker: BrokerProcess) -> None:
    admin = ConfluentAdmin({"bootstrap.servers": broker.bootstrap, "client.id": "ck-acls"})
    bindings = [
        CkBinding(CkResource.TOPIC, "orders", CkPattern.LITERAL, "User:alice", "*",
                  CkOperation.READ, CkPermission.ALLOW),
        CkBinding(CkResource.GROUP, "team-", CkPattern.PREFIXED, "User:bob", "*",
                  CkOperation.READ, CkPermission.DENY),
    ]
    created = admin.create_acls(bindings, request_timeout=15)
    assert set(created) == set(bindings)
    for future in created.values():
        code, text = ck_code(future)
        assert code == CkError.SECURITY_DISABLED == 54 and ALTER_MESSAGE in text

    everything = CkFilter(CkResource.ANY, None, CkPattern.ANY, None, None, CkOperation.ANY,
                          CkPermission.ANY)
    # librdkafka reads DescribeAcls's top-level error and drops it (rdkafka_admin.c,
    # rd_kafka_DescribeAclsResponse_parse returns NO_ERROR): against Kafka without an
    # authorizer, too, describe_acls answers an empty list.  The broker did answer 54.
    assert admin.describe_acls(everything, request_timeout=15).result(timeout=15) == []

    topic_match = CkFilter(CkResource.TOPIC, "orders", CkPattern.MATCH, "User:alice", None,
                           CkOperation.ANY, CkPermission.ANY)
    deleted = admin.delete_acls([everything, topic_match], request_timeout=15)
    assert len(deleted) == 2
    for future in deleted.values():
        code, text = ck_code(future)
        assert code == 54 and ALTER_MESSAGE in text
    got = wait_served(broker, "ck-acls", {"CreateAcls", "DescribeAcls", "DeleteAcls"})
    assert set(got) == {"CreateAcls", "DescribeAcls", "DeleteAcls"}, got
    assert all(v >= 1 for versions in got.values() for v in versions)  # pattern types
    assert_still_serving(broker, "ck-acls")


# ---------------------------------------------------------------------- kafka-python
def test_kafka_python_gets_security_disabled(broker: BrokerProcess) -> None:
    # kafka-python loads its message schemas with importlib.resources.read_text
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.admin as kp
    import kafka.errors as kp_errors

    admin = kp.KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="kp-acls")
    try:
        topic, op, allow = kp.ResourceType.TOPIC, kp.ACLOperation, kp.ACLPermissionType.ALLOW
        acl = kp.ACL("User:alice", "*", op.WRITE, allow, kp.ResourcePattern(topic, "orders"))
        prefixed = kp.ACL("User:bob", "*", op.READ, allow, kp.ResourcePattern(
            topic, "logs-", kp.ACLResourcePatternType.PREFIXED))
        result = admin.create_acls([acl, prefixed])
        assert result["succeeded"] == []
        assert result["failed"] == [kp_errors.SecurityDisabledError] * 2

        flt = kp.ACLFilter(None, None, op.ANY, kp.ACLPermissionType.ANY, kp.ResourcePatternFilter(
            kp.ResourceType.ANY, None, kp.ACLResourcePatternType.ANY))
        with pytest.raises(kp_errors.SecurityDisabledError, match=DESCRIBE_MESSAGE):
            admin.describe_acls(flt)

        deleted = admin.delete_acls([flt])
        assert deleted == [(flt, [], kp_errors.SecurityDisabledError)]
    finally:
        admin.close()
    got = wait_served(broker, "kp-acls", {"CreateAcls", "DescribeAcls", "DeleteAcls"})
    assert set(got) == {"CreateAcls", "DescribeAcls", "DeleteAcls"}, got
    assert_still_serving(broker, "kp-acls")


# ---------------------------------------------------------------------- millrace
def test_millrace_admin_raises_security_disabled(broker: BrokerProcess) -> None:
    with KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="mr-acls",
                          default_api_timeout_ms=15_000) as admin:
        bindings = [
            AclBinding(ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL),
                       AccessControlEntry("User:alice", "*", AclOperation.READ,
                                          AclPermissionType.ALLOW)),
            AclBinding(ResourcePattern(ResourceType.CLUSTER, "kafka-cluster",
                                       PatternType.LITERAL),
                       AccessControlEntry("User:admin", "*", AclOperation.ALTER,
                                          AclPermissionType.ALLOW)),
        ]
        created = admin.create_acls(bindings)
        assert list(created) == bindings
        for future in created.values():
            with pytest.raises(SecurityDisabledError, match=re.escape(ALTER_MESSAGE)) as info:
                future.result()
            assert info.value.code == 54

        with pytest.raises(SecurityDisabledError, match=DESCRIBE_MESSAGE):
            admin.describe_acls()
        with pytest.raises(SecurityDisabledError):
            admin.describe_acls(bindings[0].to_filter())

        deleted = admin.delete_acls([AclBindingFilter.ANY, bindings[1].to_filter()])
        assert [type(e) for e in deleted.errors().values()] == [SecurityDisabledError] * 2

        # the same client, the same connection, goes on working
        admin.create_topics([NewTopic(f"mr-acls-{uuid.uuid4().hex[:6]}", 1)]).all()
    got = wait_served(broker, "mr-acls", {"CreateAcls", "DescribeAcls", "DeleteAcls"})
    assert got == {"CreateAcls": {3}, "DescribeAcls": {3}, "DeleteAcls": {3}}, got
    assert_still_serving(broker, "mr-acls")


# ---------------------------------------------------------------------- on the wire
def rpc(sock: socket.socket, conn: ClientConnection, body: object, version: int) -> object:
    """One request and its response, or None when the broker closes the connection."""
    _, data = conn.send_request(body, version)
    sock.sendall(data)
    while (event := conn.next_event()) is NEED_DATA:
        data = sock.recv(1 << 16)
        if not data:
            return None
        conn.receive_data(data)
    assert isinstance(event, Response)
    return event.body


def describe_body(operation: int) -> DescribeAclsRequest:
    return DescribeAclsRequest(resource_type_filter=1, resource_name_filter=None,
                               pattern_type_filter=1, principal_filter=None,
                               host_filter=None, operation=operation, permission_type=1)


def test_every_version_is_advertised_and_answered(broker: BrokerProcess) -> None:
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        conn = ClientConnection(client_id="raw-acls")
        versions = rpc(sock, conn, ApiVersionsRequest(), 0)
        advertised = {k.api_key: (k.min_version, k.max_version)
                      for k in versions.api_keys}  # type: ignore[attr-defined]
        assert [advertised[k] for k in (29, 30, 31)] == [(0, 3)] * 3
        for version in range(4):  # v0 too: no pattern type, the broker reads LITERAL
            got = rpc(sock, conn, describe_body(operation=1), version)
            assert (got.error_code, got.error_message) == (  # type: ignore[attr-defined]
                54, DESCRIBE_MESSAGE)


def test_an_unknown_element_closes_only_that_connection(broker: BrokerProcess) -> None:
    # Kafka fails such a request while parsing it and closes the connection.
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        assert rpc(sock, ClientConnection(client_id="raw-unknown"), describe_body(0), 1) \
            is None
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        got = rpc(sock, ClientConnection(client_id="raw-after"), describe_body(1), 1)
        assert got.error_code == 54  # type: ignore[attr-defined]
    closed = [line for line in broker.logs().splitlines()
              if "closing connection" in line and "'raw-unknown'" in line]
    assert len(closed) == 1 and "invalid DescribeAcls v1" in closed[0], closed
    assert "UNKNOWN elements" in closed[0]
    assert "Traceback" not in broker.logs()  # bad input is one line, not a stack trace
