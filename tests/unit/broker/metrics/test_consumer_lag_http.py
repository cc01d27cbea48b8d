"""``lag_routes``: the consumer-lag JSON view served by aiohttp on 127.0.0.1 (aiohttp's
test server, a real socket) over an in-process broker's monitor."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import quote

from aiohttp import test_utils, web

from millrace.broker.metrics.consumer_lag import ConsumerLagMonitor, LagConfig
from millrace.broker.metrics.lag_http import lag_routes
from millrace.protocol import ApiKey
from tests.unit.broker.brokergen import NODE, Broker, produce
from tests.unit.broker.group.groupgen import commit_req


async def no_remote(node: int, body: Any) -> Any:
    raise AssertionError("nothing is led elsewhere")


def test_the_group_list_a_group_and_an_unknown_group(broker: Broker) -> None:
    broker.create_topic("t")
    s = broker.services
    monitor = ConsumerLagMonitor(s.group_coordinator, s.replica_manager, s.metadata,
                                 broker.time, LagConfig(), node_id=NODE, send=no_remote)
    monitor.listen()

    async def main() -> None:
        await s.group_coordinator.start()
        app = web.Application()
        app.add_routes(lag_routes(monitor))
        client = test_utils.TestClient(test_utils.TestServer(app, host="127.0.0.1"))
        await client.start_server()
        try:
            await produce(broker, "t", *[b"x"] * 5)
            for group in ("g", "a/b"):
                await broker.call(ApiKey.OFFSET_COMMIT, 8, commit_req(group, {("t", 0): 2}))

            got = await client.get("/v1/consumer-groups")
            assert got.status == 200
            listing = await got.json()
            assert listing["broker"] == NODE
            assert [(g["group"], g["totallag"], g["maxlag"]["lag"])
                    for g in listing["groups"]] == [("a/b", 3, 3), ("g", 3, 3)]

            got = await client.get("/v1/consumer-groups/g")
            assert got.status == 200
            view = await got.json()
            assert view == monitor.describe("g")
            assert [(p["topic"], p["partition"], p["committed_offset"], p["log_end_offset"],
                     p["lag"]) for p in view["partitions"]] == [("t", 0, 2, 5, 3)]
            assert {"status", "status_code", "complete", "totallag", "maxlag"} <= set(view)

            got = await client.get("/v1/consumer-groups/" + quote("a/b", safe=""))
            assert got.status == 200
            assert (await got.json())["group"] == "a/b"

            got = await client.get("/v1/consumer-groups/nope")
            assert got.status == 404
            body = await got.json()
            assert (body["group"], body["status"], body["status_code"]) == ("nope",
                                                                           "NOTFOUND", 0)
            assert "does not exist" in body["error"]
        finally:
            await client.close()
            await s.group_coordinator.stop()

    asyncio.run(main())
