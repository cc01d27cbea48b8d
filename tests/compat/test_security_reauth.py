"""KIP-368 re-authentication with real clients: with ``connections.max.reauth.ms`` the
broker sends a session lifetime; librdkafka and kafka-python re-authenticate before it
runs out and keep their connection, while aiokafka (which ignores the lifetime) is
disconnected on its first request after expiry and reconnects by itself.  Every client
keeps producing across several lifetimes without an error."""

from __future__ import annotations

import asyncio
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from millrace.launcher.broker_process import BrokerProcess, free_port

pytestmark = [pytest.mark.compat, pytest.mark.integration]

REAUTH_MS = 2_000
RUN_S = 6.5  # three session lifetimes
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_alice="alice-secret";')
EXPIRED = "SASL session of User:alice expired"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data: Path = tmp_path_factory.mktemp("reauth")
    plain, sasl = free_port(), free_port()
    overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.jaas.config": JAAS,
        "connections.max.reauth.ms": str(REAUTH_MS),
    }
    with BrokerProcess(data, port=plain, overrides=overrides) as b:
        b.sasl_port = sasl  # type: ignore[attr-defined]
        yield b
    assert b.proc is not None and b.proc.returncode == 0, b.logs()[-5000:]


def _sasl_bootstrap(broker: BrokerProcess) -> str:
    return f"127.0.0.1:{broker.sasl_port}"  # type: ignore[attr-defined]


def _expiries(broker: BrokerProcess, since: int) -> int:
    return broker.logs()[since:].count(EXPIRED)


def test_librdkafka_reauthenticates_and_keeps_its_connection(broker: BrokerProcess) -> None:
    from confluent_kafka import Producer

    start = len(broker.logs())
    errors: list[str] = []
    producer = Producer({"bootstrap.servers": _sasl_bootstrap(broker),
                         "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
                         "sasl.username": "alice", "sasl.password": "alice-secret",
                         "error_cb": lambda e: errors.append(str(e))})
    topic = f"reauth-rdkafka-{uuid.uuid4().hex[:6]}"
    delivered: list[bool] = []
    deadline = time.monotonic() + RUN_S
    while time.monotonic() < deadline:
        producer.produce(topic, b"x", on_delivery=lambda err, _m: delivered.append(err is None))
        producer.poll(0.1)
    assert producer.flush(15) == 0
    assert delivered and all(delivered)
    assert errors == []
    # librdkafka re-authenticated in time: the broker never had to close an expired session
    assert _expiries(broker, start) == 0, broker.logs()[start:][-3000:]


def test_kafka_python_reauthenticates(broker: BrokerProcess) -> None:
    # kafka-python loads its message schemas with importlib.resources.read_text
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaProducer

    start = len(broker.logs())
    producer = KafkaProducer(bootstrap_servers=_sasl_bootstrap(broker),
                             security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                             sasl_plain_username="alice", sasl_plain_password="alice-secret")
    topic = f"reauth-kp-{uuid.uuid4().hex[:6]}"
    try:
        deadline = time.monotonic() + RUN_S
        sent = 0
        while time.monotonic() < deadline:
            producer.send(topic, b"x").get(timeout=15)
            sent += 1
            time.sleep(0.1)
    finally:
        producer.close()
    assert sent > 10
    assert _expiries(broker, start) == 0, broker.logs()[start:][-3000:]


def test_aiokafka_is_disconnected_at_expiry_and_reconnects(broker: BrokerProcess) -> None:
    from aiokafka import AIOKafkaProducer

    start = len(broker.logs())
    topic = f"reauth-aio-{uuid.uuid4().hex[:6]}"

    async def run() -> int:
        producer = AIOKafkaProducer(bootstrap_servers=_sasl_bootstrap(broker),
                                    security_protocol="SASL_PLAINTEXT",
                                    sasl_mechanism="PLAIN", sasl_plain_username="alice",
                                    sasl_plain_password="alice-secret")
        await producer.start()
        sent = 0
        try:
            deadline = time.monotonic() + RUN_S
            while time.monotonic() < deadline:
                try:
                    await producer.send_and_wait(topic, b"x")
                    sent += 1
                except Exception:  # the request the broker closed on: retried below
                    pass
                await asyncio.sleep(0.1)
        finally:
            await producer.stop()
        return sent

    sent = asyncio.run(run())
    assert sent > 10
    # aiokafka ignores SessionLifetimeMs: the broker closed its expired session
    assert _expiries(broker, start) >= 1
