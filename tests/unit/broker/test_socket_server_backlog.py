"""A bound listener queues connections before the broker serves, as Kafka's acceptors do.

Between ``bind`` and ``start_serving`` the broker registers itself in ZooKeeper; the
controller may dial it at once with its first UpdateMetadata.  That connection must wait
in the accept queue and be served, not be refused (a refusal cost a retry, and a broker
answering clients meanwhile had no metadata)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from millrace.broker.config import KafkaConfig
from millrace.broker.network import SocketServer
from millrace.common.time import MockTime


def test_a_connection_before_start_serving_waits_instead_of_being_refused(
        tmp_path: Path) -> None:
    async def scenario() -> None:
        config = KafkaConfig({"log.dirs": str(tmp_path), "node.id": 1,
                              "listeners": "PLAINTEXT://127.0.0.1:0"})
        server = SocketServer(config, MockTime())
        await server.bind()
        try:
            host, port = server.bound_addresses()[0]
            _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 5)
            writer.close()
        finally:
            await server.shutdown()

    asyncio.run(scenario())
