"""``TransactionMarkerChannelManager``: writes a finished transaction's markers on the
leaders of its partitions, then lets the coordinator record the transaction complete.

Java counterpart: ``TransactionMarkerChannelManager`` (with its per-broker
``TxnMarkerQueue``) + ``TransactionMarkerRequestCompletionHandler``.  The wire is the
interface: each leader gets a real WriteTxnMarkers v1 request -- also when the leader is
this broker, which then answers through its own listener, as Kafka does.

One task per transaction (``add_txn_markers_to_send``), in rounds:

1. stop if the coordinator no longer wants these markers (``is_current``: the
   ``__transaction_state`` partition moved or its coordinator epoch changed -- the next
   coordinator resends them after loading);
2. drop partitions whose topic or partition no longer exists in the metadata (the
   producer could not have written there either);
3. group the rest by current leader and queue one marker (producer id/epoch, commit or
   abort, coordinator epoch, its partitions on that leader) per leader, concurrently;
   partitions without a leader wait for the next round;
4. per partition: NONE (and UNSUPPORTED_FOR_MESSAGE_FORMAT / UNSUPPORTED_VERSION, as
   Kafka) is done; retriable errors (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS*,
   REQUEST_TIMED_OUT, UNKNOWN_TOPIC_OR_PARTITION, KAFKA_STORAGE_ERROR) and an unreachable
   leader are retried after a backoff (doubling up to ``max_backoff_ms``) with the leader
   looked up again; INVALID_PRODUCER_EPOCH / TRANSACTION_COORDINATOR_FENCED mean a newer
   producer epoch or coordinator took over: this coordinator gives the transaction up.
5. when no partition is left, ``on_complete(entry)`` (which writes CompleteCommit/Abort).

Batching (``TxnMarkerQueue``, one per destination broker): at most one WriteTxnMarkers
request is in flight to a broker; markers queued for it meanwhile, by any number of
transactions, all go out in its next request, one ``markers[]`` entry each.  The response
is split by producer id (as Kafka's ``errorsByProducerId``), so a request never carries
two markers of one producer id -- a second one waits for the request after.  Each
transaction gets back only its own marker's per-partition errors; an unreachable broker
fails every marker of that request, each transaction retrying on its own.  A marker
whose transaction's task was cancelled (superseded or stopped) is skipped when drained.

Owned by the event-loop thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from millrace.broker.broker_channel import BrokerChannels
from millrace.broker.metadata import ClusterMetadata
from millrace.broker.security.inter_broker import PLAINTEXT_CHANNEL, ChannelSecurity
from millrace.broker.transaction.coordinator import TxnMarkerEntry
from millrace.common.errors import BrokerNotAvailableError, Errors
from millrace.protocol.types import WriteTxnMarkersRequest, WriteTxnMarkersResponse

log = logging.getLogger("millrace.broker.transaction")

WRITE_TXN_MARKERS_VERSION = 1

SendMarkers = Callable[[int, WriteTxnMarkersRequest], Awaitable[WriteTxnMarkersResponse]]

_DONE = frozenset({Errors.NONE, Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT,
                   Errors.UNSUPPORTED_VERSION})
_ABANDON = frozenset({Errors.INVALID_PRODUCER_EPOCH, Errors.TRANSACTION_COORDINATOR_FENCED})
_RETRY = frozenset({Errors.NOT_LEADER_OR_FOLLOWER, Errors.NOT_ENOUGH_REPLICAS,
                    Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND, Errors.REQUEST_TIMED_OUT,
                    Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.KAFKA_STORAGE_ERROR})


PartitionErrors = dict[tuple[str, int], int]
_Queued = tuple[TxnMarkerEntry, list[tuple[str, int]], asyncio.Future[PartitionErrors]]


def marker_request(markers: list[tuple[TxnMarkerEntry, list[tuple[str, int]]]]
                   ) -> WriteTxnMarkersRequest:
    """One request carrying, per transaction, its marker for the given partitions."""
    cls = WriteTxnMarkersRequest
    writable = []
    for entry, partitions in markers:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(partitions):
            by_topic.setdefault(topic, []).append(partition)
        writable.append(cls.WritableTxnMarker(
            producer_id=entry.producer_id, producer_epoch=entry.producer_epoch,
            transaction_result=entry.committed,
            topics=[cls.WritableTxnMarker.WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                    for t, ps in by_topic.items()],
            coordinator_epoch=entry.coordinator_epoch))
    return cls(markers=writable)


class TxnMarkerQueue:
    """The markers waiting for one destination broker and the task sending them: one
    request in flight at a time, the next one carrying everything queued meanwhile.

    Owned by the event-loop thread."""

    def __init__(self, destination: int, send: SendMarkers) -> None:
        self.destination = destination
        self._send = send
        self._queued: list[_Queued] = []
        self._sender: asyncio.Task[None] | None = None

    def add_markers(self, entry: TxnMarkerEntry, partitions: list[tuple[str, int]]
                    ) -> asyncio.Future[PartitionErrors]:
        """Queue ``entry``'s marker for ``partitions``; the future gets its
        per-partition errors, or the exception of an unreachable broker."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[PartitionErrors] = loop.create_future()
        self._queued.append((entry, partitions, future))
        if self._sender is None:
            self._sender = loop.create_task(self._drain())
        return future

    async def _drain(self) -> None:
        try:
            while batch := self._take_batch():
                await self._send_batch(batch)
        finally:
            self._sender = None

    def _take_batch(self) -> list[_Queued]:
        batch: list[_Queued] = []
        later: list[_Queued] = []
        producer_ids: set[int] = set()
        for queued in self._queued:
            entry, _, future = queued
            if future.done():  # its transaction's task was cancelled
                continue
            if entry.producer_id in producer_ids:
                later.append(queued)
            else:
                producer_ids.add(entry.producer_id)
                batch.append(queued)
        self._queued = later
        return batch

    async def _send_batch(self, batch: list[_Queued]) -> None:
        request = marker_request([(entry, partitions) for entry, partitions, _ in batch])
        try:
            try:
                response = await self._send(self.destination, request)
            except Exception as exc:
                for *_, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                return
            errors = _errors_by_producer_id(response)
            for entry, _, future in batch:
                if not future.done():
                    future.set_result(errors.get(entry.producer_id, {}))
        finally:  # the sender was cancelled: nobody answers these
            for *_, future in batch:
                future.cancel()

    async def close(self) -> None:
        sender = self._sender
        if sender is not None:
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sender
        for *_, future in self._queued:
            future.cancel()
        self._queued.clear()


class TransactionMarkerChannelManager:
    def __init__(self, metadata: ClusterMetadata, send: SendMarkers, *,
                 is_current: Callable[[TxnMarkerEntry], bool],
                 on_complete: Callable[[TxnMarkerEntry], None],
                 backoff_ms: int = 100, max_backoff_ms: int = 1000) -> None:
        self._metadata = metadata
        self._send = send
        self._is_current = is_current
        self._on_complete = on_complete
        self._backoff_s = backoff_ms / 1000
        self._max_backoff_s = max_backoff_ms / 1000
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._queues: dict[int, TxnMarkerQueue] = {}

    @property
    def in_flight(self) -> frozenset[str]:
        return frozenset(self._tasks)

    def add_txn_markers_to_send(self, entry: TxnMarkerEntry) -> None:
        old = self._tasks.pop(entry.transactional_id, None)
        if old is not None:
            old.cancel()
        task = asyncio.get_running_loop().create_task(self._run(entry))
        self._tasks[entry.transactional_id] = task
        task.add_done_callback(lambda t: self._forget(entry.transactional_id, t))

    def _forget(self, transactional_id: str, task: asyncio.Task[None]) -> None:
        if self._tasks.get(transactional_id) is task:
            del self._tasks[transactional_id]

    async def stop(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        for queue in self._queues.values():
            await queue.close()

    def _queue_for_broker(self, broker_id: int) -> TxnMarkerQueue:
        queue = self._queues.get(broker_id)
        if queue is None:
            queue = self._queues[broker_id] = TxnMarkerQueue(broker_id, self._send)
        return queue

    # ------------------------------------------------------------------ one transaction
    async def _run(self, entry: TxnMarkerEntry) -> None:
        remaining = set(entry.partitions)
        backoff = self._backoff_s
        while True:
            if not self._is_current(entry):
                log.info("markers of %s (producer %d epoch %d) no longer wanted here",
                         entry.transactional_id, entry.producer_id, entry.producer_epoch)
                return
            remaining = {tp for tp in remaining if self._exists(*tp)}
            if not remaining:
                break
            outcome = await self.send_round(entry, remaining)
            if outcome is None:
                log.info("markers of %s abandoned: a newer producer epoch or coordinator "
                         "took over", entry.transactional_id)
                return
            remaining = outcome
            if not remaining:
                break
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self._max_backoff_s)
        if self._is_current(entry):
            self._on_complete(entry)

    async def send_round(self, entry: TxnMarkerEntry, partitions: set[tuple[str, int]]
                         ) -> set[tuple[str, int]] | None:
        """One marker per leader, each queued for that leader's next request; the
        partitions still to do, or None to give up."""
        by_leader: dict[int, list[tuple[str, int]]] = {}
        retry: set[tuple[str, int]] = set()
        for tp in partitions:
            state = self._metadata.partition_state(*tp)
            if state is None or state.leader < 0:
                retry.add(tp)
            else:
                by_leader.setdefault(state.leader, []).append(tp)
        leaders = list(by_leader)
        answers = await asyncio.gather(
            *(self._queue_for_broker(node).add_markers(entry, by_leader[node])
              for node in leaders),
            return_exceptions=True)
        abandon = False
        for node, answer in zip(leaders, answers, strict=True):
            sent = by_leader[node]
            if isinstance(answer, BaseException):
                if not isinstance(answer, BrokerNotAvailableError | OSError):
                    log.warning("WriteTxnMarkers to broker %d failed: %r", node, answer)
                retry.update(sent)
                continue
            for tp in sent:
                code = answer.get(tp, Errors.UNKNOWN_SERVER_ERROR)
                if code in _DONE:
                    continue
                if code in _ABANDON:
                    abandon = True
                elif code not in _RETRY:
                    log.warning("marker for %s-%d of %s: unexpected error %d; retrying",
                                tp[0], tp[1], entry.transactional_id, code)
                retry.add(tp)
        return None if abandon else retry

    def _exists(self, topic: str, partition: int) -> bool:
        info = self._metadata.topics.get(topic)
        return info is not None and 0 <= partition < info.partitions


def _errors_by_producer_id(response: WriteTxnMarkersResponse) -> dict[int, PartitionErrors]:
    errors: dict[int, PartitionErrors] = {}
    for marker in response.markers:
        mine = errors.setdefault(marker.producer_id, {})
        for topic in marker.topics:
            for p in topic.partitions:
                mine[(topic.name, p.partition_index)] = p.error_code
    return errors


class BrokerMarkerSender:
    """The production ``SendMarkers``: one ``BrokerChannel`` per leader, endpoints from
    the metadata's broker registrations."""

    def __init__(self, metadata: ClusterMetadata, node_id: int,
                 request_timeout_ms: int = 30_000,
                 security: ChannelSecurity = PLAINTEXT_CHANNEL) -> None:
        self._channels = BrokerChannels(
            metadata.broker_endpoint, client_id=f"broker-{node_id}-txn-marker-sender",
            request_timeout_ms=request_timeout_ms, security=security)

    async def __call__(self, node: int, request: WriteTxnMarkersRequest
                       ) -> WriteTxnMarkersResponse:
        response: WriteTxnMarkersResponse = await self._channels.send(
            node, request, WRITE_TXN_MARKERS_VERSION)
        return response

    def close(self) -> None:
        self._channels.close()
