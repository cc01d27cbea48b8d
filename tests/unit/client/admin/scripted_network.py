"""An ``AdminNetwork`` without sockets: requests are answered by scripted handlers.

Each request body is encoded and decoded at the negotiated version before a handler sees
it, and each answer likewise before the admin code sees it, so the tests also prove that
requests are filled in correctly for that version and that parsing only relies on fields
the version has.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from millrace.client.admin._admin_network import AdminNetwork
from millrace.client.cluster import Cluster, Node
from millrace.common.errors import UnsupportedVersionError
from millrace.common.time import MockTime
from millrace.protocol.api import REQUEST_CLASS_TO_API

Handler = Callable[[Any, int, Node | None], Any]

NODE = Node(0, "broker0", 9092)


class ScriptedNetwork(AdminNetwork):
    def __init__(self, handlers: dict[str, Handler], versions: dict[str, int] | None = None,
                 nodes: list[Node] | None = None) -> None:
        # No super().__init__(): that would open a selector.
        self._time = MockTime()
        self.bootstrap_text = "broker0:9092"
        self.request_timeout_ms = 30_000
        self.retry_backoff_ms = 100
        self._coordinators = {}
        self.handlers = handlers
        self.versions = versions or {}
        self.nodes = nodes or [NODE]
        self.sent: list[tuple[str, int, Node | None]] = []
        self.controller: Node | None = self.nodes[0]
        # what a metadata refresh finds: the controller it names from then on
        self.controller_after_refresh: Node | None = None
        self.refreshes = 0

    def send(self, body: Any, deadline_ms: int, node: Node | None = None, *,
             min_version: int | None = None, max_version: int | None = None
             ) -> tuple[Any, int]:
        api = REQUEST_CLASS_TO_API[type(body)]
        version = min(self.versions.get(api.name, api.versions.high),
                      api.versions.high if max_version is None else max_version)
        if min_version is not None and version < min_version:
            raise UnsupportedVersionError(f"{api.name} v{min_version}+ is needed; the broker "
                                          f"has up to v{version}")
        request = api.request.decode(api.request.encode(body, version), version)
        self.sent.append((api.name, version, node))
        response = self.handlers[api.name](request, version, node)
        return api.response.decode(api.response.encode(response, version), version), version

    def cluster(self, deadline_ms: int) -> Cluster:
        return Cluster(self.nodes, controller=self.controller)

    def refresh_metadata(self, deadline_ms: int) -> None:
        self.refreshes += 1
        if self.controller_after_refresh is not None:
            self.controller = self.controller_after_refresh

    def backoff(self, deadline_ms: int) -> None:
        assert isinstance(self._time, MockTime)
        self._time.sleep(self.retry_backoff_ms)

    def close(self) -> None:
        pass

    def names_sent(self) -> list[str]:
        return [name for name, _, _ in self.sent]
