"""The consumer-lag JSON view on the broker's HTTP listener (``millrace groups describe``
and the console read it).

``GET /v1/consumer-groups``: ``{"broker": id, "groups": [summary, ...]}``, a summary per
group this broker coordinates (``ConsumerLagMonitor.list_groups``).

``GET /v1/consumer-groups/{group}``: the group's view (``ConsumerLagMonitor.describe``):
per partition the committed offset, log end, lag, Burrow status and commit window; the
group's status, maxlag, totallag and complete; its generation and its rebalance history
(``rebalances``: time, generation left, state left, members, the coordinator's reason with
the client's KIP-800 reason), oldest first.  A group this broker does not coordinate
(or that does not exist) answers 404 with ``{"error": ..., "group": ..., "status":
"NOTFOUND", "status_code": 0}``.  The group id is one path segment, percent-encoded by
the caller (a group id may hold ``/``).

Thread ownership: the broker's event loop, which also runs the monitor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from millrace.broker.metrics.burrow import Status

if TYPE_CHECKING:
    from millrace.broker.metrics.consumer_lag import ConsumerLagMonitor

GROUPS_PATH = "/v1/consumer-groups"


def lag_routes(monitor: ConsumerLagMonitor) -> list[web.RouteDef]:
    async def list_groups(request: web.Request) -> web.Response:
        return web.json_response({"broker": monitor.node_id,
                                  "groups": monitor.list_groups()})

    async def describe(request: web.Request) -> web.Response:
        group = request.match_info["group"]
        view = monitor.describe(group)
        if view is None:
            return web.json_response(
                {"error": monitor.not_found_reason(group), "group": group,
                 "broker": monitor.node_id, "status": Status.NOTFOUND.name,
                 "status_code": int(Status.NOTFOUND)}, status=404)
        return web.json_response(view)

    return [web.get(GROUPS_PATH, list_groups),
            web.get(GROUPS_PATH + "/{group}", describe)]
