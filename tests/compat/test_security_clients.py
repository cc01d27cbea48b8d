"""Third-party clients over TLS and SASL: confluent-kafka (librdkafka), kcat, kafka-python
and aiokafka each produce to and consume (in a group) from our broker on every listener
kind they support, and each is refused, with its own authentication error, for a wrong
password -- after which the broker still serves good clients.

The broker is ``security_fixtures.secured_broker``: one per module, five listeners.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import shutil
import subprocess
import time
import uuid
import warnings
from collections.abc import Iterator

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import (  # noqa: E402
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)

from tests.compat.security_fixtures import SecuredBroker  # noqa: E402

pytestmark = [pytest.mark.compat, pytest.mark.integration]

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
N = 10  # records per round trip

# (listener, mechanism) pairs each client runs a round trip over
LIBRDKAFKA_CASES = [
    ("SSL", None), ("MTLS", None),
    *[(listener, mechanism) for listener in ("SASL_PLAINTEXT", "SASL_SSL")
      for mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")],
]
PYTHON_CLIENT_CASES = [("SASL_SSL", "PLAIN"), ("SASL_SSL", "SCRAM-SHA-256"), ("SSL", None)]

# What the broker answers a failed SASL exchange (reference security.md 3.4, 3.5): PLAIN
# names the problem, SCRAM only the mechanism (it does not tell whether the user exists).
FAILURE_MESSAGES = {
    "PLAIN": "Authentication failed: Invalid username or password",
    "SCRAM-SHA-256": "Authentication failed during authentication due to invalid "
                     "credentials with SASL mechanism SCRAM-SHA-256",
    "SCRAM-SHA-512": "Authentication failed during authentication due to invalid "
                     "credentials with SASL mechanism SCRAM-SHA-512",
}


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _records(topic: str) -> list[tuple[bytes, bytes]]:
    return [(f"k{i}".encode(), f"{topic}-v{i}".encode()) for i in range(N)]


def _case_id(case: tuple[str, str | None]) -> str:
    listener, mechanism = case
    return listener if mechanism is None else f"{listener}-{mechanism}"


# ---------------------------------------------------------------------------- confluent-kafka
def _confluent_produce(conf: dict[str, str], topic: str,
                       records: list[tuple[bytes, bytes]]) -> list[int]:
    """The offsets of ``records``, all acknowledged by the broker."""
    errors: list[KafkaError] = []
    offsets: list[int] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(err)
        else:
            offset = msg.offset()
            assert offset is not None
            offsets.append(offset)

    producer = Producer({**conf, "acks": "all", "linger.ms": 5, "message.timeout.ms": 10000,
                         "error_cb": errors.append})
    for key, value in records:
        producer.produce(topic, key=key, value=value, on_delivery=on_delivery)
    assert producer.flush(15) == 0, "the producer could not deliver within 15 s"
    assert not errors, errors
    return sorted(offsets)


def _confluent_round_trip(conf: dict[str, str], topic: str) -> None:
    records = _records(topic)
    assert _confluent_produce(conf, topic, records) == list(range(N))
    errors: list[KafkaError] = []
    consumer = Consumer({**conf, "group.id": _unique("sec-g"), "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "error_cb": errors.append})
    got: list[tuple[bytes | None, bytes | None]] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 20
        while len(got) < N and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append((msg.key(), msg.value()))
        assert got == records
        consumer.commit(asynchronous=False)  # through the group coordinator, same listener
        committed = consumer.committed([TopicPartition(topic, 0)], timeout=10)
        assert committed[0].offset == N
    finally:
        consumer.close()
    assert not errors, errors


@pytest.mark.parametrize("case", LIBRDKAFKA_CASES, ids=_case_id)
def test_confluent_kafka_round_trip(secured_broker: SecuredBroker,
                                    case: tuple[str, str | None]) -> None:
    listener, mechanism = case
    _confluent_round_trip(secured_broker.librdkafka(listener, mechanism),
                          _unique(f"ck-{_case_id(case).lower()}"))


def _confluent_refused(conf: dict[str, str], topic: str,
                       timeout_ms: int = 2000) -> list[KafkaError]:
    """Produce one record that must never be delivered; the client's error events."""
    errors: list[KafkaError] = []
    reports: list[KafkaError | None] = []
    producer = Producer({**conf, "message.timeout.ms": timeout_ms,
                         "error_cb": errors.append})
    producer.produce(topic, value=b"must not arrive",
                     on_delivery=lambda err, _msg: reports.append(err))
    assert producer.flush(timeout_ms / 1000 + 5) == 0, "no delivery report at all"
    assert len(reports) == 1 and reports[0] is not None, "the record was delivered"
    assert reports[0].code() == KafkaError._MSG_TIMED_OUT, reports[0]
    return errors


def test_confluent_kafka_mtls_refused_without_client_certificate(
        secured_broker: SecuredBroker) -> None:
    """ssl.client.auth=required: the broker ends the handshake with TLS 1.3's
    'certificate required' alert, which librdkafka reports as a transport error (a bare
    disconnect would only be logged, with no error event)."""
    conf = secured_broker.librdkafka("MTLS")
    del conf["ssl.certificate.location"], conf["ssl.key.location"]
    errors = _confluent_refused(conf, _unique("ck-mtls-nocert"))
    tls = [e for e in errors if e.code() in (KafkaError._TRANSPORT, KafkaError._SSL)]
    assert tls, errors
    assert all("certificate required" in e.str() for e in tls), tls


@pytest.mark.parametrize("mechanism,user", [
    ("PLAIN", None), ("SCRAM-SHA-256", None), ("SCRAM-SHA-512", None),
    ("SCRAM-SHA-256", "mallory"),  # unknown user: the same answer as a wrong password
])
def test_confluent_kafka_wrong_password(secured_broker: SecuredBroker, mechanism: str,
                                        user: str | None) -> None:
    conf = secured_broker.librdkafka("SASL_SSL", mechanism, password="wrong-password")
    if user is not None:
        conf["sasl.username"] = user
    errors = _confluent_refused(conf, _unique("ck-badpw"))
    auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    assert auth, errors
    assert all(FAILURE_MESSAGES[mechanism] in e.str() for e in auth), auth
    good = secured_broker.librdkafka("SASL_SSL", mechanism)
    assert _confluent_produce(good, _unique("ck-after-badpw"), _records("x")) == \
        list(range(N))


# ---------------------------------------------------------------------------- kcat
def _kcat(conf: dict[str, str], *args: str, input: bytes | None = None,
          check: bool = True) -> subprocess.CompletedProcess[bytes]:
    if KCAT is None:
        pytest.fail("kcat is not installed: scripts/test.sh installs Debian's kcat package")
    settings = [x for k, v in conf.items() if k != "bootstrap.servers"
                for x in ("-X", f"{k}={v}")]
    proc = subprocess.run([KCAT, "-b", conf["bootstrap.servers"], *settings, *args],
                          input=input, capture_output=True, timeout=30, check=False)
    if check:
        assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return proc


@pytest.mark.parametrize("case", [("SASL_SSL", "SCRAM-SHA-512"), ("SSL", None)],
                         ids=_case_id)
def test_kcat_produce_consume(secured_broker: SecuredBroker,
                              case: tuple[str, str | None]) -> None:
    conf = secured_broker.librdkafka(*case)
    topic = _unique(f"kcat-{_case_id(case).lower()}")
    lines = "".join(f"key{i}:line {i}\n" for i in range(N)).encode()
    _kcat(conf, "-t", topic, "-P", "-K:", input=lines)
    out = _kcat(conf, "-t", topic, "-C", "-e", "-o", "beginning", "-f", "%k=%s@%o\n")
    assert out.stdout.decode().splitlines() == [f"key{i}=line {i}@{i}" for i in range(N)]


def test_kcat_wrong_password(secured_broker: SecuredBroker) -> None:
    bad = secured_broker.librdkafka("SASL_SSL", "SCRAM-SHA-512", password="wrong-password")
    topic = _unique("kcat-badpw")
    started = time.monotonic()
    proc = _kcat(bad, "-t", topic, "-P", input=b"must not arrive\n", check=False)
    assert time.monotonic() - started < 15
    stderr = proc.stderr.decode(errors="replace")
    assert proc.returncode != 0, stderr
    assert "Authentication" in stderr and FAILURE_MESSAGES["SCRAM-SHA-512"] in stderr, stderr
    good = secured_broker.librdkafka("SASL_SSL", "SCRAM-SHA-512")
    _kcat(good, "-t", topic, "-P", input=b"after\n")
    out = _kcat(good, "-t", topic, "-C", "-e", "-o", "beginning", "-f", "%s@%o\n")
    assert out.stdout == b"after@0\n"  # offset 0: nothing of the refused producer's


# ---------------------------------------------------------------------------- kafka-python
@pytest.mark.parametrize("case", PYTHON_CLIENT_CASES, ids=_case_id)
def test_kafka_python_round_trip(secured_broker: SecuredBroker,
                                 case: tuple[str, str | None]) -> None:
    kafka = pytest.importorskip("kafka")
    conf = secured_broker.kafka_python(*case)
    topic = _unique(f"kp-{_case_id(case).lower()}")
    records = _records(topic)
    producer = kafka.KafkaProducer(**conf, acks="all", linger_ms=5, bootstrap_timeout_ms=10000)
    try:
        futures = [producer.send(topic, key=k, value=v) for k, v in records]
        producer.flush(15)
        assert [f.get(timeout=10).offset for f in futures] == list(range(N))
    finally:
        producer.close()
    consumer = kafka.KafkaConsumer(topic, **conf, group_id=_unique("kp-g"),
                                   auto_offset_reset="earliest", enable_auto_commit=False,
                                   consumer_timeout_ms=15000, bootstrap_timeout_ms=10000)
    try:
        got = []
        for msg in consumer:
            got.append((msg.key, msg.value))
            if len(got) == N:
                break
        assert got == records
        consumer.commit()
        assert consumer.committed(kafka.TopicPartition(topic, 0)) == N
    finally:
        consumer.close()


@contextlib.contextmanager
def _logged_exceptions(logger: str) -> Iterator[list[tuple[type | None, str]]]:
    """(class, text) of every exception ``logger`` (or a child) logs as an argument, and
    (None, message) of its other records.  Only text is kept and the records stay out of
    pytest's handlers: a logged exception holds its traceback, whose frames would keep a
    failed client (and its sockets) alive."""
    found: list[tuple[type | None, str]] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            args = record.args if isinstance(record.args, tuple) else ()
            errors = [(type(a), str(a)) for a in args if isinstance(a, BaseException)]
            found.extend(errors or [(None, record.getMessage())])

    log = logging.getLogger(logger)
    handler, level, propagate = Collect(), log.level, log.propagate
    log.addHandler(handler)
    log.setLevel(logging.WARNING)
    log.propagate = False
    try:
        yield found
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
        log.propagate = propagate


def _messages_of(found: list[tuple[type | None, str]], kind: type) -> list[str]:
    return [text for cls, text in found if cls is not None and issubclass(cls, kind)]


def test_kafka_python_wrong_password(secured_broker: SecuredBroker) -> None:
    """kafka-python 3.0 retries a failed authentication until the bootstrap times out and
    then raises KafkaTimeoutError; the SASL failure itself is what it logged.

    It also loses most of those answers over TLS: when the broker's response and its
    close arrive before one read, ``KafkaSSLTransport._sock_recv`` reports 'socket
    disconnected' and drops the bytes it read (Kafka answers and closes the same way).
    So the producer is built again, each time with short backoffs, until one attempt
    read the answer -- usually the first producer does."""
    kafka = pytest.importorskip("kafka")
    mechanism = "SCRAM-SHA-256"
    bad = secured_broker.kafka_python("SASL_SSL", mechanism, password="wrong-password")
    deadline = time.monotonic() + 10
    with _logged_exceptions("kafka") as logged:
        while True:
            started = time.monotonic()
            with pytest.raises(kafka.errors.KafkaError) as raised:
                kafka.KafkaProducer(**bad, bootstrap_timeout_ms=2000, reconnect_backoff_ms=20,
                                    reconnect_backoff_max_ms=50)
            assert time.monotonic() - started < 5
            # The constructor raised before anyone could close() the producer: collect
            # it (its wake-up socket pair) now rather than have it warn in a later test.
            del raised
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ResourceWarning)
                gc.collect()
            failures = _messages_of(logged, kafka.errors.SaslAuthenticationFailedError)
            if failures or time.monotonic() > deadline:
                break
    assert failures, logged
    assert all(FAILURE_MESSAGES[mechanism] in text for text in failures), failures
    producer = kafka.KafkaProducer(**secured_broker.kafka_python("SASL_SSL", mechanism),
                                   bootstrap_timeout_ms=10000)
    try:
        assert producer.send(_unique("kp-after-badpw"), b"v").get(timeout=10).offset == 0
    finally:
        producer.close()


# ---------------------------------------------------------------------------- aiokafka
@pytest.mark.parametrize("case", PYTHON_CLIENT_CASES, ids=_case_id)
def test_aiokafka_round_trip(secured_broker: SecuredBroker,
                             case: tuple[str, str | None]) -> None:
    aiokafka = pytest.importorskip("aiokafka")
    topic = _unique(f"aio-{_case_id(case).lower()}")
    records = _records(topic)

    async def run() -> None:
        conf = secured_broker.aiokafka(*case)
        producer = aiokafka.AIOKafkaProducer(**conf, acks="all")
        await producer.start()
        try:
            offsets = [(await producer.send_and_wait(topic, v, key=k)).offset
                       for k, v in records]
        finally:
            await producer.stop()
        assert offsets == list(range(N))
        consumer = aiokafka.AIOKafkaConsumer(topic, **conf, group_id=_unique("aio-g"),
                                             auto_offset_reset="earliest",
                                             enable_auto_commit=False)
        await consumer.start()
        got: list[tuple[bytes, bytes]] = []
        try:
            async with asyncio.timeout(20):
                async for msg in consumer:
                    got.append((msg.key, msg.value))
                    if len(got) == N:
                        break
            await consumer.commit()
            assert await consumer.committed(aiokafka.TopicPartition(topic, 0)) == N
        finally:
            await consumer.stop()
        assert got == records

    asyncio.run(run())


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_aiokafka_wrong_password(secured_broker: SecuredBroker, mechanism: str) -> None:
    """aiokafka's start() raises KafkaConnectionError ('Unable to bootstrap') and logs the
    SaslAuthenticationFailed that ended its only bootstrap attempt."""
    aiokafka = pytest.importorskip("aiokafka")
    from aiokafka.errors import KafkaConnectionError, SaslAuthenticationFailed

    async def run() -> int:
        bad = aiokafka.AIOKafkaProducer(
            **secured_broker.aiokafka("SASL_SSL", mechanism, password="wrong-password"),
            request_timeout_ms=5000)
        started = time.monotonic()
        try:
            with pytest.raises(KafkaConnectionError):
                await bad.start()
        finally:
            await bad.stop()
        assert time.monotonic() - started < 10
        good = aiokafka.AIOKafkaProducer(**secured_broker.aiokafka("SASL_SSL", mechanism))
        await good.start()
        try:
            return int((await good.send_and_wait(_unique("aio-after-badpw"), b"v")).offset)
        finally:
            await good.stop()

    with _logged_exceptions("aiokafka") as logged:
        assert asyncio.run(run()) == 0
    failures = _messages_of(logged, SaslAuthenticationFailed)
    assert failures, logged
    assert all(FAILURE_MESSAGES[mechanism] in text for text in failures), failures
