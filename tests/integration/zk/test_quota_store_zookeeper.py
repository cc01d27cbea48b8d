"""``ZkQuotaStore`` against a real ZooKeeper, in Kafka's layout: the znodes and the change
notification a write makes, byte for byte as Kafka's readers expect; a user's SCRAM
credentials kept beside its quotas; emptied quota znodes removed (with an emptied
``clients`` dir and user); znodes written the way ``kafka-configs`` writes them read back;
a writer that lost a race with another re-reads, so neither write is lost."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from millrace.broker.quota.entity import DEFAULT, QuotaEntity
from millrace.broker.quota.quota_store import ZkQuotaStore
from millrace.broker.zk import KafkaZkClient

pytestmark = [pytest.mark.integration]

Factory = Callable[[], KafkaZkClient]


def znode_json(zk: KafkaZkClient, path: str) -> object:
    got = zk.zk.get_data(path)
    assert got is not None, f"{path} does not exist"
    return json.loads(got[0])


def notifications(zk: KafkaZkClient) -> list[str | None]:
    return [path for _, path in zk.get_config_change_notifications()]


def test_a_user_quota_is_written_beside_its_scram_credentials(
        zk_client_factory: Factory) -> None:
    zk = zk_client_factory()
    zk.set_or_create_entity_configs("users", "alice%40corp", {"SCRAM-SHA-256": "cred"})
    store = ZkQuotaStore(zk)
    written = store.alter(QuotaEntity("alice@corp", None),
                          {"producer_byte_rate": 1048576.0, "request_percentage": 200.0})
    assert written == {"producer_byte_rate": 1048576.0, "request_percentage": 200.0}
    assert znode_json(zk, "/config/users/alice%40corp") == {"version": 1, "config": {
        "SCRAM-SHA-256": "cred", "producer_byte_rate": "1048576",
        "request_percentage": "200.0"}}
    assert notifications(zk)[-1] == "users/alice%40corp"
    # removing every quota keeps the znode and the credential
    store.alter(QuotaEntity("alice@corp", None),
                {"producer_byte_rate": None, "request_percentage": None})
    assert znode_json(zk, "/config/users/alice%40corp") == {
        "version": 1, "config": {"SCRAM-SHA-256": "cred"}}
    assert store.read_all() == {}


def test_user_client_entities_and_their_cleanup(zk_client_factory: Factory) -> None:
    zk = zk_client_factory()
    store = ZkQuotaStore(zk)
    entity = QuotaEntity("bob", DEFAULT)
    store.alter(entity, {"consumer_byte_rate": 2048.0})
    assert znode_json(zk, "/config/users/bob/clients/<default>") == {
        "version": 1, "config": {"consumer_byte_rate": "2048"}}
    assert notifications(zk)[-1] == "users/bob/clients/<default>"
    store.alter(QuotaEntity(None, "app 1"), {"controller_mutation_rate": 2.5})
    assert znode_json(zk, "/config/clients/app%201") == {
        "version": 1, "config": {"controller_mutation_rate": "2.5"}}
    assert store.read_all() == {entity: {"consumer_byte_rate": 2048.0},
                                QuotaEntity(None, "app 1"): {"controller_mutation_rate": 2.5}}
    # the last quota of users/bob/clients/<default> goes: so do clients/ and bob
    store.alter(entity, {"consumer_byte_rate": None})
    assert zk.zk.exists("/config/users/bob") is None
    assert notifications(zk)[-1] == "users/bob/clients/<default>"
    # an emptied client id znode goes too
    store.alter(QuotaEntity(None, "app 1"), {"controller_mutation_rate": None})
    assert zk.zk.exists("/config/clients/app%201") is None


def test_a_user_holding_other_client_quotas_is_kept(zk_client_factory: Factory) -> None:
    zk = zk_client_factory()
    store = ZkQuotaStore(zk)
    store.alter(QuotaEntity("carol", "a"), {"producer_byte_rate": 1.0})
    store.alter(QuotaEntity("carol", "b"), {"producer_byte_rate": 2.0})
    store.alter(QuotaEntity("carol", "a"), {"producer_byte_rate": None})
    assert sorted(zk.zk.get_children("/config/users/carol/clients")) == ["b"]
    store.alter(QuotaEntity("carol", None), {"request_percentage": 50.0})
    store.alter(QuotaEntity("carol", "b"), {"producer_byte_rate": None})
    # carol's own quota keeps her znode; her clients dir is gone
    assert sorted(zk.zk.get_children("/config/users/carol")) == []
    assert store.get(QuotaEntity("carol", None)) == {"request_percentage": 50.0}


def test_znodes_written_as_kafka_configs_writes_them_are_read(
        zk_client_factory: Factory) -> None:
    zk = zk_client_factory()
    zk.set_or_create_entity_configs("users", "<default>", {"producer_byte_rate": "1024"})
    zk.set_or_create_entity_configs("users", "CN%3Dx/clients/<default>",
                                    {"request_percentage": "1.0E2"})
    zk.set_or_create_entity_configs("clients", "<default>", {"consumer_byte_rate": "5",
                                                            "not_a_quota": "x"})
    zk.set_or_create_entity_configs("users", "dave", {"SCRAM-SHA-512": "cred"})
    zk.set_or_create_entity_configs("topics", "t", {"retention.ms": "1"})
    store = ZkQuotaStore(zk)
    expected = {QuotaEntity(DEFAULT, None): {"producer_byte_rate": 1024.0},
                QuotaEntity("CN=x", DEFAULT): {"request_percentage": 100.0},
                QuotaEntity(None, DEFAULT): {"consumer_byte_rate": 5.0}}
    assert store.load() == expected
    got = store.read_entities(["topics/t", "users/dave", "users/CN%3Dx/clients/<default>",
                               "clients/gone"])
    assert got == [(QuotaEntity("dave", None), {}),
                   (QuotaEntity("CN=x", DEFAULT), {"request_percentage": 100.0}),
                   (QuotaEntity(None, "gone"), {})]


def test_a_writer_that_lost_a_race_re_reads_and_both_land(
        zk_client_factory: Factory) -> None:
    """Between A's read and A's write, B writes the same user (a SCRAM credential, as
    AlterUserScramCredentials would): A's write at the version it read fails, A re-reads,
    and both the credential and A's quota are there."""
    zk_a, zk_b = zk_client_factory(), zk_client_factory()
    zk_b.set_or_create_entity_configs("users", "eve", {"producer_byte_rate": "1"})
    store = ZkQuotaStore(zk_a, sleep=lambda _s: None)
    reads = 0
    real_get = zk_a.zk.get_data

    def get_data_then_b_writes(path: str) -> object:
        nonlocal reads
        got = real_get(path)
        reads += 1
        if reads == 1:
            zk_b.set_or_create_entity_configs("users", "eve", {"producer_byte_rate": "1",
                                                               "SCRAM-SHA-256": "cred"})
        return got

    zk_a.zk.get_data = get_data_then_b_writes  # type: ignore[method-assign]
    store.alter(QuotaEntity("eve", None), {"consumer_byte_rate": 7.0})
    assert reads == 2  # read, lost the race, read again
    assert znode_json(zk_b, "/config/users/eve") == {"version": 1, "config": {
        "producer_byte_rate": "1", "SCRAM-SHA-256": "cred", "consumer_byte_rate": "7"}}
