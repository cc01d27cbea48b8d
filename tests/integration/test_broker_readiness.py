"""``/readyz`` of a single node's services (``KafkaServer.build_services`` in process,
real log dir), served by a real ``BrokerHttpServer`` on 127.0.0.1: ready once serving; not ready, with the reason,
while starting, once a log dir is offline (as storage reports an I/O error) and while
shutting down; ``/healthz`` stays 200 throughout."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from millrace.broker.config import parse_http_listener
from millrace.broker.metrics.http_server import bind_http_listeners
from millrace.broker.metrics.service import MetricsService
from tests.unit.broker.brokergen import Broker

pytestmark = pytest.mark.integration


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(str(tmp_path))
    yield b
    b.close()


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_readyz_follows_start_up_a_failed_log_dir_and_shutdown(broker: Broker) -> None:
    services = broker.services
    config = services.config
    config.http_listeners = [parse_http_listener("http://127.0.0.1:0")]
    sockets = bind_http_listeners(config)
    failure: list[str] = []

    async def body() -> None:
        service = MetricsService(services, {}, sockets,
                                 failure=lambda: failure[0] if failure else None)
        await service.start()
        try:
            url = service.urls()[0]
            loop = asyncio.get_running_loop()

            async def fetch(path: str) -> tuple[int, str]:
                return await loop.run_in_executor(None, get, url + path)

            status, text = await fetch("/readyz")
            assert status == 503 and "starting" in json.loads(text)["reasons"][0]
            service.serving = True
            assert await fetch("/readyz") == (200, json.dumps({"ready": True}, indent=1) + "\n")

            log_dir = config.log_dirs[0]
            services.log_manager.failure_channel.maybe_add_offline_log_dir(
                log_dir, "append to orders-0", OSError(28, "No space left on device"))
            failure.append(f"Shutdown broker because all log dirs in {log_dir} have failed")
            status, text = await fetch("/readyz")
            reasons = json.loads(text)["reasons"]
            assert status == 503
            assert reasons[0].startswith("Shutdown broker because all log dirs")
            assert reasons[1] == f"log dirs offline: {log_dir}"
            assert (await fetch("/healthz"))[0] == 200

            failure.clear()
            service.stopping = True
            status, text = await fetch("/readyz")
            assert status == 503 and json.loads(text)["reasons"][0] == "shutting down"
        finally:
            await service.stop()

    asyncio.run(body())


def test_readiness_lists_nothing_for_a_serving_broker_with_its_dirs_online(
        broker: Broker) -> None:
    async def body() -> list[str]:
        service = MetricsService(broker.services, {}, [], failure=lambda: None)
        service.serving = True
        return service.readiness()

    assert asyncio.run(body()) == []
