"""The ACL authorizer as the real clients meet it, over ``SASL_SSL``.

One broker process, its only listener SASL_SSL with PLAIN users (``admin`` the super
user, ``alice``, ``bob``, ``carol``, ``dave`` who never gets an ACL), ``authorizer.class.name`` set to Kafka's ZooKeeper
name.  ACLs are granted and removed as ``admin`` through confluent-kafka's AdminClient.
Each case is what a user of Kafka meets and what their client raises: a producer without
Write gets TOPIC_AUTHORIZATION_FAILED per partition, a consumer without Read on the
topic or the group gets the error its client raises (not a hang), transactional and
idempotent producers without their ACLs fail fatally, a super user needs no ACL, a
PREFIXED allow with a LITERAL deny (deny wins), and an ACL removed stops the very next
request.  The cluster case (an ACL written through one broker enforced by the others)
is in ``tests/integration/cluster/test_cluster_acls.py``.
"""

from __future__ import annotations

import asyncio
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from millrace.security.certs import CertificateAuthority, write_pem
from millrace.testing.broker_process import BrokerProcess

warnings.simplefilter("ignore", DeprecationWarning)
import aiokafka  # noqa: E402
import aiokafka.errors  # noqa: E402
import aiokafka.helpers  # noqa: E402
import kafka  # noqa: E402
import kafka.errors  # noqa: E402

pytestmark = pytest.mark.integration

PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret",
             "carol": "carol-secret", "dave": "dave-secret"}
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-secret" '
        + " ".join(f'user_{u}="{p}"' for u, p in PASSWORDS.items()) + ";")
FAIL_FAST = 20.0  # seconds: an authorization error arrives long before any client timeout


class AclBroker(BrokerProcess):
    def __init__(self, data_dir: Path, ca: str, keystore: str) -> None:
        super().__init__(data_dir, listener_protocol="SASL_SSL")
        self.ca = ca
        self.overrides.update({
            "security.inter.broker.protocol": "SASL_SSL",
            "sasl.enabled.mechanisms": "PLAIN",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": keystore,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": ca,
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:admin",
            "offsets.topic.num.partitions": "2",
            "transaction.state.log.num.partitions": "2",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "offsets.topic.replication.factor": "1",
        })

    def confluent(self, user: str) -> dict[str, Any]:
        return {"bootstrap.servers": self.bootstrap, "security.protocol": "SASL_SSL",
                "sasl.mechanism": "PLAIN", "sasl.username": user,
                "sasl.password": PASSWORDS[user], "ssl.ca.location": self.ca}

    def kafka_python(self, user: str) -> dict[str, Any]:
        return {"bootstrap_servers": self.bootstrap, "security_protocol": "SASL_SSL",
                "sasl_mechanism": "PLAIN", "sasl_plain_username": user,
                "sasl_plain_password": PASSWORDS[user], "ssl_cafile": self.ca}

    def aiokafka(self, user: str) -> dict[str, Any]:
        return {"bootstrap_servers": self.bootstrap, "security_protocol": "SASL_SSL",
                "sasl_mechanism": "PLAIN", "sasl_plain_username": user,
                "sasl_plain_password": PASSWORDS[user],
                "ssl_context": aiokafka.helpers.create_ssl_context(cafile=self.ca)}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclBroker]:
    d = tmp_path_factory.mktemp("acl-pki")
    ca = CertificateAuthority.generate("authorizer test CA")
    write_pem(d / "ca.pem", ca.cert_pem)
    write_pem(d / "broker.pem", ca.issue("broker", hosts=["localhost", "127.0.0.1"])
              .key_and_chain_pem, private=True)
    with AclBroker(tmp_path_factory.mktemp("acl-broker"), str(d / "ca.pem"),
                   str(d / "broker.pem")) as b:
        yield b
    assert b.proc is not None and b.proc.returncode == 0, b.logs()[-5000:]


@pytest.fixture(scope="module")
def admin(broker: AclBroker) -> AdminClient:
    return AdminClient(broker.confluent("admin"))


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(admin: AdminClient, name: str, partitions: int = 2) -> None:
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(FAIL_FAST)


def binding(principal: str, resource_type: ResourceType, name: str,
            operation: AclOperation, permission: AclPermissionType = AclPermissionType.ALLOW,
            pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> AclBinding:
    return AclBinding(resource_type, name, pattern, f"User:{principal}", "*", operation,
                      permission)


def grant(admin: AdminClient, *bindings: AclBinding) -> None:
    for future in admin.create_acls(list(bindings), request_timeout=FAIL_FAST).values():
        future.result(FAIL_FAST)


def revoke(admin: AdminClient, *bindings: AclBinding) -> None:
    filters = [AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal,
                                b.host, b.operation, b.permission_type) for b in bindings]
    for future in admin.delete_acls(filters, request_timeout=FAIL_FAST).values():
        future.result(FAIL_FAST)


def confluent_produce(broker: AclBroker, user: str, topic: str, **extra: Any
                      ) -> KafkaError | None:
    """One record; the delivery report's error (None: delivered)."""
    reports: list[KafkaError | None] = []
    producer = Producer({**broker.confluent(user), "enable.idempotence": False,
                         "message.timeout.ms": int(FAIL_FAST * 1000), **extra})
    producer.produce(topic, b"v", on_delivery=lambda err, _msg: reports.append(err))
    producer.flush(FAIL_FAST + 5)
    assert len(reports) == 1, "no delivery report"
    return reports[0]


# ---------------------------------------------------------------------- producers
def test_producer_without_write_gets_topic_authorization_failed(
        broker: AclBroker, admin: AdminClient) -> None:
    topic = unique("no-write")
    create_topic(admin, topic)
    grant(admin, binding("bob", ResourceType.TOPIC, topic, AclOperation.DESCRIBE))
    err = confluent_produce(broker, "bob", topic)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err

    producer = kafka.KafkaProducer(**broker.kafka_python("bob"), max_block_ms=10_000,
                                   retries=0)
    try:
        with pytest.raises(kafka.errors.TopicAuthorizationFailedError):
            producer.send(topic, b"v").get(timeout=FAIL_FAST)
    finally:
        producer.close(timeout=5)

    async def aio() -> None:
        p = aiokafka.AIOKafkaProducer(**broker.aiokafka("bob"))
        await p.start()
        try:
            with pytest.raises(aiokafka.errors.TopicAuthorizationFailedError):
                await asyncio.wait_for(p.send_and_wait(topic, b"v"), FAIL_FAST)
        finally:
            await p.stop()
    asyncio.run(aio())
    # and with Write it goes through, on every client
    grant(admin, binding("bob", ResourceType.TOPIC, topic, AclOperation.WRITE))
    assert confluent_produce(broker, "bob", topic) is None


def test_super_user_needs_no_acl(broker: AclBroker, admin: AdminClient) -> None:
    topic = unique("super")
    create_topic(admin, topic)
    assert confluent_produce(broker, "admin", topic) is None
    consumer = Consumer({**broker.confluent("admin"), "group.id": unique("g-super"),
                         "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        got = None
        for _ in range(40):
            msg = consumer.poll(0.5)
            if msg is not None:
                got = msg
                break
        assert got is not None and got.error() is None and got.value() == b"v"
    finally:
        consumer.close()


def test_prefixed_allow_and_literal_deny_deny_wins(broker: AclBroker,
                                                   admin: AdminClient) -> None:
    prefix = unique("team")
    open_topic, secret = f"{prefix}-orders", f"{prefix}-secret"
    for t in (open_topic, secret):
        create_topic(admin, t)
    grant(admin,
          binding("carol", ResourceType.TOPIC, f"{prefix}-", AclOperation.WRITE,
                  pattern=ResourcePatternType.PREFIXED),
          binding("carol", ResourceType.TOPIC, secret, AclOperation.WRITE,
                  AclPermissionType.DENY))
    assert confluent_produce(broker, "carol", open_topic) is None
    err = confluent_produce(broker, "carol", secret)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err


def test_removed_acl_stops_the_next_request(broker: AclBroker, admin: AdminClient) -> None:
    topic = unique("revoked")
    create_topic(admin, topic)
    allow = binding("alice", ResourceType.TOPIC, topic, AclOperation.WRITE)
    grant(admin, allow)
    reports: list[KafkaError | None] = []
    producer = Producer({**broker.confluent("alice"), "enable.idempotence": False,
                         "message.timeout.ms": int(FAIL_FAST * 1000), "linger.ms": 0})
    producer.produce(topic, b"before", on_delivery=lambda e, _m: reports.append(e))
    producer.flush(FAIL_FAST)
    revoke(admin, allow)
    # the same producer, the same connection: the next request is refused
    producer.produce(topic, b"after", on_delivery=lambda e, _m: reports.append(e))
    producer.flush(FAIL_FAST + 5)
    assert reports[0] is None
    assert reports[1] is not None and \
        reports[1].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, reports


def test_idempotent_producer_without_cluster_or_topic_write_is_fatal(
        broker: AclBroker) -> None:
    """InitProducerId for an idempotent producer needs IdempotentWrite on the cluster or
    Write on some topic (KIP-679); librdkafka treats the refusal as fatal."""
    errors: list[KafkaError] = []
    producer = Producer({**broker.confluent("dave"), "enable.idempotence": True,
                         "message.timeout.ms": int(FAIL_FAST * 1000),
                         "error_cb": errors.append})
    reports: list[KafkaError | None] = []
    raised: list[KafkaError] = []
    try:  # librdkafka raises the fatal error from produce()/flush() once it is known
        producer.produce(unique("idem"), b"v", on_delivery=lambda e, _m: reports.append(e))
        producer.flush(FAIL_FAST + 5)
        producer.poll(0.5)
    except KafkaException as e:
        raised.append(e.args[0])
    fatal = [e for e in (*errors, *raised) if e.fatal()]
    assert fatal, f"no fatal error for an idempotent producer without ACLs: {errors} {reports}"
    assert any(e.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED or
               "CLUSTER_AUTHORIZATION_FAILED" in e.str() for e in fatal), fatal


def test_transactional_producer_without_transactional_id_acl_is_fatal(
        broker: AclBroker, admin: AdminClient) -> None:
    topic = unique("txn")
    create_topic(admin, topic)
    txn_id = unique("txn-id")
    grant(admin, binding("alice", ResourceType.TOPIC, topic, AclOperation.WRITE))
    producer = Producer({**broker.confluent("alice"), "transactional.id": txn_id,
                         "transaction.timeout.ms": 10_000})
    with pytest.raises(KafkaException) as info:
        producer.init_transactions(FAIL_FAST)
    error = info.value.args[0]
    assert error.code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, error
    assert error.fatal() or not error.retriable(), error

    kp = kafka.KafkaProducer(**broker.kafka_python("alice"), transactional_id=txn_id,
                             max_block_ms=10_000)
    try:
        with pytest.raises(kafka.errors.TransactionalIdAuthorizationFailedError):
            kp.init_transactions()
    finally:
        kp.close(timeout=5)

    # granted: the same transactional id initialises and commits
    grant(admin, binding("alice", ResourceType.TRANSACTIONAL_ID, txn_id,
                         AclOperation.WRITE))
    ok = Producer({**broker.confluent("alice"), "transactional.id": txn_id})
    ok.init_transactions(FAIL_FAST)
    ok.begin_transaction()
    ok.produce(topic, b"in-txn")
    ok.commit_transaction(FAIL_FAST)


# ---------------------------------------------------------------------- consumers
def _confluent_consume_error(broker: AclBroker, user: str, topic: str, group: str
                             ) -> KafkaError | None:
    consumer = Consumer({**broker.confluent(user), "group.id": group,
                         "auto.offset.reset": "earliest", "session.timeout.ms": 6000})
    try:
        consumer.subscribe([topic])
        for _ in range(int(FAIL_FAST * 2)):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is not None:
                return msg.error()
            if msg is not None:
                return None
        pytest.fail(f"{user}: no message and no error within {FAIL_FAST} s (a hang)")
    finally:
        consumer.close()


def test_consumer_without_read_on_topic_or_group(broker: AclBroker,
                                                 admin: AdminClient) -> None:
    topic = unique("guarded")
    create_topic(admin, topic, 1)
    assert confluent_produce(broker, "admin", topic) is None
    group = unique("g-bob")
    # Read on the group only: the topic is refused
    grant(admin, binding("bob", ResourceType.GROUP, group, AclOperation.READ))
    err = _confluent_consume_error(broker, "bob", topic, group)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    # Read on the topic only: the group is refused
    other = unique("g-other")
    grant(admin, binding("carol", ResourceType.TOPIC, topic, AclOperation.READ))
    err = _confluent_consume_error(broker, "carol", topic, other)
    assert err is not None and err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, err
    # both: the record arrives
    grant(admin, binding("bob", ResourceType.TOPIC, topic, AclOperation.READ))
    assert _confluent_consume_error(broker, "bob", topic, group) is None


def test_kafka_python_and_aiokafka_consumers_raise(broker: AclBroker,
                                                   admin: AdminClient) -> None:
    topic = unique("guarded-py")
    create_topic(admin, topic, 1)
    assert confluent_produce(broker, "admin", topic) is None
    group = unique("g-py")
    consumer = kafka.KafkaConsumer(topic, **broker.kafka_python("bob"), group_id=group,
                                   auto_offset_reset="earliest")
    try:
        with pytest.raises(kafka.errors.GroupAuthorizationFailedError):
            for _ in range(int(FAIL_FAST)):
                consumer.poll(timeout_ms=1000)
    finally:
        consumer.close()

    async def aio(user: str, error: type[Exception]) -> None:
        c = aiokafka.AIOKafkaConsumer(topic, **broker.aiokafka(user), group_id=group,
                                      auto_offset_reset="earliest")
        try:
            with pytest.raises(error):
                await c.start()
                await asyncio.wait_for(c.getone(), FAIL_FAST)
        finally:
            await c.stop()
    # aiokafka asks for the topic's metadata first: without Describe on it, that is the
    # error; with Read on the topic (which implies Describe) the group is refused
    asyncio.run(aio("dave", aiokafka.errors.TopicAuthorizationFailedError))
    grant(admin, binding("carol", ResourceType.TOPIC, topic, AclOperation.READ))
    asyncio.run(aio("carol", aiokafka.errors.GroupAuthorizationFailedError))
