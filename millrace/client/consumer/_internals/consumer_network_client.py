"""The consumer's thread-safe front to ``NetworkClient`` (Java ``ConsumerNetworkClient``).

``NetworkClient`` belongs to one thread at a time.  The consumer has two: the application
thread (poll, commits, rebalances) and the heartbeat thread.  This class lets both use one
``NetworkClient`` safely:

* ``send`` never touches the ``NetworkClient``: it queues the request as *unsent* (its own
  small lock) and wakes the selector, so a heartbeat can be queued while the application
  thread sits in a long fetch poll.
* ``poll`` takes ``_lock`` (which guards the ``NetworkClient``), writes unsent requests to
  nodes that are ready (connecting to the others), does one round of I/O, fails unsent
  requests whose node failed to connect or that waited longer than their timeout, and
  releases the lock.
* Response callbacks only queue ``(future, response)``; the futures are completed after the
  lock is released (``_fire_pending``), so a listener may take other locks (the
  coordinator's) without any lock-order inversion: nobody holding ``_lock`` ever waits for
  another lock.
* ``poll_no_wakeup(blocking=False)`` is the heartbeat thread's poll: it skips the I/O when the
  application thread is polling anyway (that poll will write the heartbeat).  When the
  heartbeat thread completes futures it wakes the selector, in case the application thread
  waits for one of them.
* ``wakeup`` makes the next (or the current) ``poll`` on the application thread raise
  ``WakeupError``.

Futures fail with ``DisconnectError`` (retriable) when the connection drops or the
request times out, with ``UnsupportedVersionError`` when no version fits, and with the
node's authentication error (``SaslAuthenticationError``, ``SslAuthenticationError``)
when it could not be authenticated.  The application thread's ``poll`` also raises a
standing authentication failure recorded in ``Metadata`` (Java:
``metadata.maybeThrowAnyException()``), so a consumer with a wrong password fails its
``poll`` at once; the heartbeat thread's polls (``disable_wakeup``) do not.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from millrace.client.cluster import Node
from millrace.client.consumer._internals.request_future import RequestFuture, Timer
from millrace.client.consumer.errors import DisconnectError, WakeupError
from millrace.client.metadata import Metadata
from millrace.client.network_client import ClientRequest, ClientResponse, NetworkClient
from millrace.common.time import Time

log = logging.getLogger(__name__)

MAX_POLL_TIMEOUT_MS = 5000


class ConsumerNetworkClient:
    def __init__(self, client: NetworkClient, metadata: Metadata, time: Time,
                 request_timeout_ms: int = 30_000, retry_backoff_ms: int = 100) -> None:
        self._client = client
        self._metadata = metadata
        self._time = time
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self._lock = threading.RLock()  # guards _client
        self._unsent_lock = threading.Lock()
        self._unsent: dict[int, deque[tuple[ClientRequest, RequestFuture[ClientResponse]]]] \
            = {}  # guarded by _unsent_lock
        self._nodes: dict[int, Node] = {}  # guarded by _unsent_lock
        self._pending: deque[tuple[RequestFuture[ClientResponse], ClientResponse]] = deque()
        self._wakeup = False
        self._wakeup_disabled = 0
        self._closed = False

    # ------------------------------------------------------------------ sending
    def send(self, node: Node, body: Any, *, timeout_ms: int | None = None,
             min_version: int | None = None, max_version: int | None = None
             ) -> RequestFuture[ClientResponse]:
        """Queue ``body`` for ``node``; the future completes when the answer is handled."""
        future: RequestFuture[ClientResponse] = RequestFuture()
        pending = self._pending

        def on_response(response: ClientResponse) -> None:
            pending.append((future, response))

        request = ClientRequest(node.id, body, on_response, created_ms=self._time.milliseconds(),
                                request_timeout_ms=timeout_ms or self.request_timeout_ms,
                                min_version=min_version, max_version=max_version)
        with self._unsent_lock:
            queue = self._unsent.get(node.id)
            if queue is None:
                queue = self._unsent[node.id] = deque()
            queue.append((request, future))
            self._nodes[node.id] = node
        self._client.wakeup()
        return future

    def _try_send(self, now_ms: int) -> None:
        client = self._client
        with self._unsent_lock:
            for node_id, queue in list(self._unsent.items()):
                node = self._nodes[node_id]
                while queue and client.ready(node, now_ms):
                    request, _ = queue.popleft()
                    client.send(request, now_ms)
                if not queue:
                    del self._unsent[node_id]

    def _fail_unsent(self, now_ms: int) -> None:
        """Fail unsent requests whose node could not be connected or that waited too long."""
        client = self._client
        with self._unsent_lock:
            for node_id, queue in list(self._unsent.items()):
                node = self._nodes[node_id]
                failed = client.connection_failed(node)
                auth_error = client.authentication_error(node_id) if failed else None
                keep: deque[tuple[ClientRequest, RequestFuture[ClientResponse]]] = deque()
                for request, future in queue:
                    expired = now_ms - request.created_ms > request.request_timeout_ms
                    if failed or expired:
                        assert request.callback is not None
                        request.callback(ClientResponse(request, now_ms, disconnected=True,
                                                        timed_out=expired and not failed,
                                                        authentication_error=auth_error))
                    else:
                        keep.append((request, future))
                if keep:
                    self._unsent[node_id] = keep
                else:
                    del self._unsent[node_id]

    # ------------------------------------------------------------------ polling
    def poll(self, timeout_ms: float, condition: Callable[[], bool] | None = None, *,
             disable_wakeup: bool = False, blocking: bool = True) -> bool:
        """One round of I/O, waiting at most ``timeout_ms`` (0 when ``condition()`` says
        the caller need not block).  Returns False only when ``blocking=False`` and another
        thread was polling."""
        self._fire_pending()
        if not self._lock.acquire(blocking=blocking):
            return False
        fired_elsewhere = False
        try:
            if self._closed:
                return True
            now = self._time.milliseconds()
            self._try_send(now)
            if self._pending or (condition is not None and not condition()):
                timeout_ms = 0
            timeout = int(min(max(timeout_ms, 0), MAX_POLL_TIMEOUT_MS))
            self._client.poll(timeout, now)
            now = self._time.milliseconds()
            self._fail_unsent(now)
            self._try_send(now)
            if not disable_wakeup:
                self.maybe_trigger_wakeup()
                auth_error = self._metadata.authentication_error()
                if auth_error is not None:
                    raise auth_error
        finally:
            self._lock.release()
            fired_elsewhere = self._fire_pending() and not blocking
        if fired_elsewhere:
            self._client.wakeup()  # the application thread may wait for what we completed
        return True

    def poll_until(self, future: RequestFuture[Any], timeout_ms: float) -> bool:
        """Poll until ``future`` is done or the timeout passes (at least once)."""
        timer = Timer(self._time, timeout_ms)
        while True:
            self.poll(timer.remaining_ms, lambda: not future.is_done)
            timer.update()
            if future.is_done or timer.is_expired():
                return future.is_done

    def poll_no_wakeup(self, blocking: bool = False) -> bool:
        return self.poll(0, disable_wakeup=True, blocking=blocking)

    def transmit_sends(self) -> None:
        """Write queued requests now (e.g. the next fetch) without waiting for answers."""
        self.poll(0, disable_wakeup=True)

    def sleep(self, ms: float) -> None:
        """Wait ``ms`` while still doing I/O (a retry backoff)."""
        timer = Timer(self._time, ms)
        while timer.not_expired():
            self.poll(timer.remaining_ms)
            timer.update()

    def _fire_pending(self) -> bool:
        pending = self._pending
        fired = False
        while pending:
            try:
                future, response = pending.popleft()
            except IndexError:
                break
            fired = True
            try:
                if response.version_mismatch is not None:
                    future.raise_(response.version_mismatch)
                elif response.authentication_error is not None:
                    future.raise_(response.authentication_error)
                elif response.disconnected:
                    what = "timed out" if response.timed_out else "was disconnected"
                    future.raise_(DisconnectError(
                        f"{response.request!r} {what} before a response was received"))
                else:
                    future.complete(response)
            except Exception:
                log.exception("uncaught error completing %r", response.request)
        return fired

    # ------------------------------------------------------------------ wakeup
    def wakeup(self) -> None:
        self._wakeup = True
        self._client.wakeup()

    def maybe_trigger_wakeup(self) -> None:
        if self._wakeup and self._wakeup_disabled == 0:
            self._wakeup = False
            raise WakeupError("the consumer was woken up")

    def disable_wakeups(self) -> None:
        self._wakeup_disabled += 1

    # ------------------------------------------------------------------ cluster helpers
    def least_loaded_node(self) -> Node | None:
        with self._lock:
            return self._client.least_loaded_node(self._time.milliseconds())

    def is_unavailable(self, node: Node) -> bool:
        """True while the node's connection failed and it is in reconnect backoff."""
        with self._lock:
            return self._client.connection_failed(node) and \
                self._client.is_blacked_out(node, self._time.milliseconds())

    def has_pending_requests(self, node_id: int | None = None) -> bool:
        with self._unsent_lock:
            if node_id is None and self._unsent:
                return True
            if node_id is not None and self._unsent.get(node_id):
                return True
        with self._lock:
            return self._client.has_in_flight_requests(node_id)

    def disconnect(self, node_id: int) -> None:
        """Close a connection; its in-flight requests fail with ``DisconnectError``."""
        with self._lock:
            self._client.disconnect(node_id)
            now = self._time.milliseconds()
            with self._unsent_lock:
                queue = self._unsent.pop(node_id, None) or ()
            for request, _ in queue:
                assert request.callback is not None
                request.callback(ClientResponse(request, now, disconnected=True))
        self._fire_pending()

    @property
    def metadata(self) -> Metadata:
        return self._metadata

    def await_metadata_update(self, timeout_ms: float) -> bool:
        """Ask for a metadata refresh and poll until it arrives (or the timeout)."""
        version = self._metadata.request_update()
        timer = Timer(self._time, timeout_ms)
        while self._metadata.update_version <= version:
            self.poll(timer.remaining_ms)
            timer.update()
            if timer.is_expired():
                break
        return self._metadata.update_version > version

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._client.close()
            now = self._time.milliseconds()
            with self._unsent_lock:
                queues, self._unsent = list(self._unsent.values()), {}
            for queue in queues:
                for request, _ in queue:
                    assert request.callback is not None
                    request.callback(ClientResponse(request, now, disconnected=True))
        self._fire_pending()

    @property
    def closed(self) -> bool:
        return self._closed
