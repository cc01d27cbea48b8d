"""Two brokers' services on one real ZooKeeper (in process, no sockets): a quota altered
through broker 1's AlterClientQuotas handler reaches broker 2's quota store watcher
through the config change notification, and so does its removal; broker 1's own watcher
hears it at once.  A watcher added after ``load()`` but before the config change listener
starts still hears a change made in between (the listener re-reads everything)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from millrace.broker.config import KafkaConfig
from millrace.broker.context import RequestContext
from millrace.broker.handlers import HANDLERS
from millrace.broker.quota.entity import DEFAULT, QuotaEntity, QuotaValues
from millrace.broker.services import BrokerServices
from millrace.broker.zk_broker import build_zk_services, start_config_change_listener
from millrace.common.time import SYSTEM_TIME
from millrace.protocol import API, ApiKey, RequestHeader
from millrace.protocol.types import AlterClientQuotasRequest

pytestmark = [pytest.mark.integration]

Heard = asyncio.Queue[tuple[QuotaEntity, QuotaValues]]
Scenario = Callable[[BrokerServices, BrokerServices], Awaitable[None]]


async def _start(connect: str, node: int, log_dir: Path) -> BrokerServices:
    config = KafkaConfig({"zookeeper.connect": connect, "node.id": node,
                          "log.dirs": str(log_dir), "zookeeper.session.timeout.ms": 6000})
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, build_zk_services, config, SYSTEM_TIME, loop)


def _stop(services: BrokerServices) -> None:
    services.replica_manager.shutdown()
    services.log_manager.shutdown()
    assert services.cluster is not None
    services.cluster.zk.close()


def _watch(services: BrokerServices) -> Heard:
    heard: Heard = asyncio.Queue()
    services.quota_store.watch(lambda entity, values: heard.put_nowait((entity, values)))
    return heard


async def _alter(services: BrokerServices, entity: list[tuple[str, str | None]],
                 key: str, value: float | None) -> None:
    """AlterClientQuotas through the broker's handler; a None name is the default."""
    E = AlterClientQuotasRequest.EntryData
    body = AlterClientQuotasRequest(validate_only=False, entries=[E(
        entity=[E.EntityData(entity_type=t, entity_name=n) for t, n in entity], ops=[E.OpData(key=key, value=value or 0.0, remove=value is None)])])
    api = API[ApiKey.ALTER_CLIENT_QUOTAS]
    ctx = RequestContext(RequestHeader(ApiKey.ALTER_CLIENT_QUOTAS, 1, 1, "t"), api,
                         "127.0.0.1", 1, services)
    response = await HANDLERS[ApiKey.ALTER_CLIENT_QUOTAS](ctx, body)
    assert [e.error_code for e in response.entries] == [0], response


async def _with_brokers(connect: str, tmp_path: Path, scenario: Scenario) -> None:
    started = [await _start(connect, n, tmp_path / f"b{n}") for n in (1, 2)]
    try:
        await scenario(*started)
    finally:
        for services in started:
            _stop(services)


async def _reaches_the_other(one: BrokerServices, two: BrokerServices) -> None:
    brokers = [one, two]
    for services in brokers:
        assert services.quota_store.load() == {}
    heard_one, heard_two = _watch(one), _watch(two)
    for services in brokers:
        start_config_change_listener(services, asyncio.get_running_loop())

    await _alter(one, [("user", "alice")], "producer_byte_rate", 1048576.0)
    alice = QuotaEntity("alice", None)
    assert heard_one.get_nowait() == (alice, {"producer_byte_rate": 1048576.0})  # at once
    assert await asyncio.wait_for(heard_two.get(), 10) == (
        alice, {"producer_byte_rate": 1048576.0})

    await _alter(two, [("user", None)], "request_percentage", 50.0)  # the default user
    default_user = QuotaEntity(DEFAULT, None)
    assert await asyncio.wait_for(heard_one.get(), 10) == (
        default_user, {"request_percentage": 50.0})
    assert heard_two.get_nowait() == (default_user, {"request_percentage": 50.0})

    await _alter(one, [("user", "alice")], "producer_byte_rate", None)
    assert heard_one.get_nowait() == (alice, {})
    assert await asyncio.wait_for(heard_two.get(), 10) == (alice, {})
    await asyncio.sleep(0.5)  # nothing more: each change heard once
    assert heard_one.empty() and heard_two.empty()


def test_a_quota_altered_through_one_broker_reaches_the_other(connect: str,
                                                               tmp_path: Path) -> None:
    asyncio.run(_with_brokers(connect, tmp_path, _reaches_the_other))


async def _not_missed(one: BrokerServices, two: BrokerServices) -> None:
    assert two.quota_store.load() == {}
    heard = _watch(two)
    await _alter(one, [("user", "bob")], "consumer_byte_rate", 2048.0)  # before two listens
    start_config_change_listener(two, asyncio.get_running_loop())
    assert await asyncio.wait_for(heard.get(), 10) == (QuotaEntity("bob", None),
                                                       {"consumer_byte_rate": 2048.0})


def test_a_change_between_load_and_the_listener_is_not_missed(connect: str,
                                                              tmp_path: Path) -> None:
    asyncio.run(_with_brokers(connect, tmp_path, _not_missed))
