"""IP quota entities (KIP-612) in ZooKeeper: ``ZkQuotaStore`` writes ``/config/ips/<ip>``
and ``/config/ips/<default>`` as Kafka does (``connection_creation_rate`` a whole number,
an ``ips/<ip>`` change notification, an emptied znode removed), reads znodes written the
way ``kafka-configs --entity-type ips`` writes them and ignores a name that is no IP
address; the client quota watchers never see an ip entity.  Two brokers' services: an ip
quota altered through broker 1's handler reaches broker 2's connection quotas through
the config change notification, and so does its removal."""

from __future__ import annotations

import asyncio
import ipaddress
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from millrace.broker.connection_quotas import ConnectionQuotas, Refusal
from millrace.broker.quota.entity import DEFAULT, IpQuotaEntity, QuotaEntity
from millrace.broker.quota.quota_store import ZkQuotaStore
from millrace.broker.services import BrokerServices
from millrace.broker.zk import KafkaZkClient
from millrace.broker.zk_broker import start_config_change_listener
from millrace.common.config import INT_MAX
from millrace.common.time import MockTime
from tests.integration.zk.test_quota_zk_brokers import _alter, _with_brokers

pytestmark = [pytest.mark.integration]

Factory = Callable[[], KafkaZkClient]
RATE = "connection_creation_rate"


def _znode_json(zk: KafkaZkClient, path: str) -> object:
    got = zk.zk.get_data(path)
    assert got is not None, f"{path} does not exist"
    return json.loads(got[0])


def test_ip_quotas_are_written_and_removed_as_kafka_does(zk_client_factory: Factory) -> None:
    zk = zk_client_factory()
    store = ZkQuotaStore(zk)
    assert store.alter(IpQuotaEntity("10.0.0.1"), {RATE: 2.0}) == {RATE: 2.0}
    assert _znode_json(zk, "/config/ips/10.0.0.1") == {
        "version": 1, "config": {RATE: "2"}}
    assert [p for _, p in zk.get_config_change_notifications()][-1] == "ips/10.0.0.1"
    store.alter(IpQuotaEntity(DEFAULT), {RATE: 30.0})
    assert _znode_json(zk, "/config/ips/<default>") == {"version": 1, "config": {RATE: "30"}}
    with pytest.raises(ValueError, match="Invalid configuration key producer_byte_rate"):
        store.alter(IpQuotaEntity("10.0.0.1"), {"producer_byte_rate": 1.0})
    assert store.read_all() == {IpQuotaEntity("10.0.0.1"): {RATE: 2.0},
                                IpQuotaEntity(DEFAULT): {RATE: 30.0}}
    store.alter(IpQuotaEntity("10.0.0.1"), {RATE: None})
    assert zk.zk.exists("/config/ips/10.0.0.1") is None


def test_ip_znodes_written_as_kafka_configs_writes_them_are_read(
        zk_client_factory: Factory) -> None:
    zk = zk_client_factory()
    zk.set_or_create_entity_configs("ips", "<default>", {RATE: "5"})
    zk.set_or_create_entity_configs("ips", "::1", {RATE: "7", "not_a_quota": "x"})
    zk.set_or_create_entity_configs("ips", "kafka.example.com", {RATE: "1"})  # not an IP
    zk.set_or_create_entity_configs("users", "alice", {"producer_byte_rate": "1024"})
    store = ZkQuotaStore(zk)
    assert store.load() == {QuotaEntity("alice", None): {"producer_byte_rate": 1024.0}}
    assert store.load_ip_quotas() == {IpQuotaEntity(DEFAULT): {RATE: 5.0},
                                      IpQuotaEntity("::1"): {RATE: 7.0}}
    assert store.read_entities(["ips/::1", "ips/10.9.9.9", "ips/kafka.example.com"]) == [
        (IpQuotaEntity("::1"), {RATE: 7.0}), (IpQuotaEntity("10.9.9.9"), {})]


async def _rate_becomes(quotas: ConnectionQuotas, ip: str, rate: int) -> None:
    """Wait (up to 10 s) until the connection quotas hold ``ip`` to ``rate``."""
    loop = asyncio.get_running_loop()
    until = loop.time() + 10
    while quotas.rate_for_ip(ipaddress.ip_address(ip)) != rate:
        assert loop.time() < until, f"{ip}'s rate is not {rate}"
        await asyncio.sleep(0.05)


async def _reaches_the_other(one: BrokerServices, two: BrokerServices) -> None:
    quotas = ConnectionQuotas(two.config, MockTime())  # broker 2's, as start_serving feeds it
    quotas.load_ip_rates(two.quota_store.load_ip_quotas())
    two.quota_store.watch_ip_quotas(quotas.update_ip_rate)
    heard_clients: list[object] = []
    two.quota_store.watch(lambda e, _v: heard_clients.append(e))
    for services in (one, two):
        start_config_change_listener(services, asyncio.get_running_loop())

    assert [quotas.accept("PLAINTEXT", "10.0.0.7") for _ in range(20)] == [None] * 20
    await _alter(one, [("ip", "10.0.0.7")], RATE, 1.0)
    await _rate_becomes(quotas, "10.0.0.7", 1)
    # a rate of 1 over Kafka's window (11 x 1 s): a burst of 10 from the quota's start
    assert [quotas.accept("PLAINTEXT", "10.0.0.7") for _ in range(11)] == \
        [None] * 10 + [Refusal(RATE, 1)]
    assert quotas.accept("PLAINTEXT", "10.0.0.8") is None  # another address: no quota
    await _alter(one, [("ip", "10.0.0.7")], RATE, None)
    await _rate_becomes(quotas, "10.0.0.7", INT_MAX)
    assert quotas.accept("PLAINTEXT", "10.0.0.7") is None
    assert heard_clients == []  # the client quota watchers never hear of ip entities


def test_an_ip_quota_set_through_one_broker_reaches_the_others_connection_quotas(
        connect: str, tmp_path: Path) -> None:
    asyncio.run(_with_brokers(connect, tmp_path, _reaches_the_other))
