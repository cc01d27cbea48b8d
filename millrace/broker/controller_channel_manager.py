"""``ControllerChannelManager``: the controller's ordered request queues, one per broker.

Java counterpart: ``ControllerChannelManager`` with one ``RequestSendThread`` per broker.
The controller's decisions become LeaderAndIsr, UpdateMetadata and StopReplica requests
that every broker must apply **in the order they were made**; so each live broker gets
a queue and a task that sends its requests one at a time, retrying a failed send (after
``retry_backoff_ms``) until it succeeds or the broker leaves the cluster
(``remove_broker``).  Each request may carry a callback for its response; the controller
uses them (e.g. StopReplica for topic deletion).

Owned by the event-loop thread.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from millrace.broker.broker_channel import BrokerChannel
from millrace.broker.security.inter_broker import PLAINTEXT_CHANNEL, ChannelSecurity
from millrace.broker.tasks import stop_task
from millrace.common.errors import BrokerNotAvailableError

log = logging.getLogger(__name__)

ResponseCallback = Callable[[Any], None]


@dataclass(slots=True)
class QueuedRequest:
    body: Any
    version: int
    callback: ResponseCallback | None = None


class _BrokerQueue:
    def __init__(self, channel: BrokerChannel, retry_backoff_ms: int) -> None:
        self.channel = channel
        self.queue: asyncio.Queue[QueuedRequest] = asyncio.Queue()
        self.retry_backoff_s = retry_backoff_ms / 1000
        # Set before the task is cancelled: Python 3.11's wait_for (inside the channel's
        # send) can swallow a cancellation that arrives as the response does, and the
        # task would then wait on the queue forever, hanging the broker's shutdown.
        self.stopped = False
        self.task = asyncio.get_running_loop().create_task(
            self._run(), name=f"controller-to-broker-{channel.node_id}")

    async def _run(self) -> None:
        while not self.stopped:
            request = await self.queue.get()
            while True:
                try:
                    response = await self.channel.send(request.body, request.version)
                    break
                except BrokerNotAvailableError as e:
                    log.info("controller: %s; retrying", e)
                    await asyncio.sleep(self.retry_backoff_s)
            if request.callback is not None:
                try:
                    request.callback(response)
                except Exception:
                    log.exception("controller: response callback failed")


class ControllerChannelManager:
    def __init__(self, controller_id: int, *, request_timeout_ms: int = 30_000,
                 retry_backoff_ms: int = 100,
                 security: ChannelSecurity = PLAINTEXT_CHANNEL) -> None:
        self._security = security
        self._controller_id = controller_id
        self._timeout_ms = request_timeout_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._brokers: dict[int, _BrokerQueue] = {}

    def add_broker(self, node_id: int, host: str, port: int) -> None:
        existing = self._brokers.get(node_id)
        if existing is not None:
            existing.channel.update_endpoint(host, port)
            return
        channel = BrokerChannel(node_id, host, port,
                                client_id=f"controller-{self._controller_id}",
                                request_timeout_ms=self._timeout_ms, security=self._security)
        self._brokers[node_id] = _BrokerQueue(channel, self._retry_backoff_ms)

    async def remove_broker(self, node_id: int) -> None:
        q = self._brokers.pop(node_id, None)
        if q is not None:
            q.stopped = True
            await stop_task(q.task)
            q.channel.close()

    def send(self, node_id: int, body: Any, version: int,
             callback: ResponseCallback | None = None) -> bool:
        """Queue ``body`` for ``node_id``; False if that broker is not known (dead)."""
        q = self._brokers.get(node_id)
        if q is None:
            return False
        q.queue.put_nowait(QueuedRequest(body, version, callback))
        return True

    def queued(self, node_id: int) -> int:
        q = self._brokers.get(node_id)
        return 0 if q is None else q.queue.qsize()

    @property
    def brokers(self) -> list[int]:
        return sorted(self._brokers)

    async def shutdown(self) -> None:
        for node_id in list(self._brokers):
            await self.remove_broker(node_id)
