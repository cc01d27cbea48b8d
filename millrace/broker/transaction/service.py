"""``TransactionCoordinatorService``: the asyncio adapter around the pure
``TransactionCoordinator``.

Java counterpart: the I/O half of ``TransactionStateManager`` (``appendTransactionToLog``,
loading partitions) plus the scheduler that runs the coordinator's timers.

For each request the service takes one coordinator step at ``time.milliseconds()``; if
the step wrote a record it appends it to ``__transaction_state`` through the injected
``TransactionLog`` (a ``ReplicatedOffsetsLog`` over that topic), waits until the ISR has it
(Kafka writes the transaction log with acks=-1), checks that this broker still
coordinates the partition at the same coordinator epoch, replays the record -- only
then does the transactional id's state change -- and answers.  A failed write answers
with the step's ``on_failure`` (storage errors mapped as Kafka's ``appendTransactionToLog``
maps them).  Replays that leave a transaction in PrepareCommit/PrepareAbort hand its
markers to the ``TransactionMarkerChannelManager``, whose completion is one more step
(CompleteCommit/CompleteAbort).  A timer task polls the coordinator every
``tick_interval_ms`` (timed-out transactions, expired ids, retried completions); the timer
and the writes that outlive a cancelled request are ``CoordinatorRuntime``'s.

Threading: everything runs on the broker's event-loop thread.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Iterator
from typing import Any, Protocol

from millrace.broker.config import KafkaConfig
from millrace.broker.coordinator_runtime import CoordinatorRuntime
from millrace.broker.metadata import ClusterMetadata
from millrace.broker.security.inter_broker import inter_broker_security
from millrace.broker.transaction.coordinator import (
    EndTxnResult,
    TransactionConfig,
    TransactionCoordinator,
    TxnMarkerEntry,
    TxnResult,
)
from millrace.broker.transaction.transaction_marker_channel_manager import (
    BrokerMarkerSender,
    SendMarkers,
    TransactionMarkerChannelManager,
)
from millrace.common.errors import Errors, KafkaError
from millrace.common.time import Time


class TransactionLog(Protocol):
    """``__transaction_state`` as the coordinator sees it (a ``ReplicatedOffsetsLog`` over
    that topic): plain batches appended through the partition leader, replayed in order."""

    def append(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> int: ...
    async def wait_replicated(self, partition: int, end_offset: int) -> int: ...
    def replay(self, partition: int) -> Iterator[tuple[bytes, bytes | None]]: ...
    def num_partitions(self) -> int: ...

log = logging.getLogger("millrace.broker.transaction")

# Storage errors as the transaction APIs report them (``appendTransactionToLog``).
_STORAGE_ERRORS: dict[int, int] = {
    Errors.UNKNOWN_TOPIC_OR_PARTITION: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_ENOUGH_REPLICAS: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.REQUEST_TIMED_OUT: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_LEADER_OR_FOLLOWER: Errors.NOT_COORDINATOR,
    Errors.KAFKA_STORAGE_ERROR: Errors.NOT_COORDINATOR,
    Errors.MESSAGE_TOO_LARGE: Errors.UNKNOWN_SERVER_ERROR,
    Errors.RECORD_LIST_TOO_LARGE: Errors.UNKNOWN_SERVER_ERROR,
}


def _storage_error(exc_or_code: BaseException | int) -> int:
    code = exc_or_code.code if isinstance(exc_or_code, KafkaError) else (
        exc_or_code if isinstance(exc_or_code, int) else Errors.NOT_COORDINATOR)
    return _STORAGE_ERRORS.get(code, code)


class TransactionCoordinatorService:
    """Owned by the event-loop thread; handlers call the ``async`` request methods."""

    def __init__(self, config: KafkaConfig, time: Time, txn_log: TransactionLog,
                 metadata: ClusterMetadata, generate_producer_id: Any, *,
                 send_markers: SendMarkers | None = None,
                 tick_interval_ms: int = 1000) -> None:
        self._time = time
        self._log = txn_log
        self._metadata = metadata
        self._runtime = CoordinatorRuntime(tick_interval_ms)
        self.coordinator = TransactionCoordinator(
            TransactionConfig.from_kafka_config(config), txn_log.num_partitions(),
            generate_producer_id)
        self._sender = send_markers or BrokerMarkerSender(
            metadata, config.node_id, config["controller.socket.timeout.ms"],
            security=inter_broker_security(config))
        self.markers = TransactionMarkerChannelManager(
            metadata, self._sender, is_current=self.coordinator.is_current,
            on_complete=self._markers_written)

    # ------------------------------------------------------------------ lifecycle
    async def start(self, partitions: dict[int, int] | None = None) -> None:
        """Load ``partitions`` (partition -> coordinator epoch; default: every one at
        its current leader epoch -- the single node leads them all), start the timer."""
        if partitions is None:
            partitions = {}
            for p in range(self.coordinator.num_partitions):
                state = self._metadata.partition_state(
                    "__transaction_state", p)
                partitions[p] = max(0, state.leader_epoch) if state is not None else 0
        await self.load_partitions(partitions)
        self._runtime.start(self.run_once)

    async def load_partitions(self, partitions: dict[int, int]) -> None:
        """Become coordinator for ``partitions`` at their epochs: replay each from its
        log (requests answer COORDINATOR_LOAD_IN_PROGRESS meanwhile), then resend the
        markers of transactions found in PrepareCommit/PrepareAbort."""
        coord = self.coordinator
        fresh = {p: e for p, e in partitions.items() if coord.epochs.get(p) != e}
        if not fresh:
            return
        coord.begin_loading(fresh)
        total = 0
        for partition in fresh:
            if partition not in coord.loading:
                continue
            total += coord.load(partition, self._log.replay(partition))
            await asyncio.sleep(0)
        log.info("transaction coordinator loaded %d partition(s), %d transactional id(s) "
                 "from %d record(s)", len(fresh), len(coord.transactions), total)
        self._dispatch_markers()

    def unload_partitions(self, partitions: Iterable[int]) -> None:
        coord = self.coordinator
        gone = [p for p in partitions if p in coord.epochs or p in coord.loading]
        for partition in gone:
            coord.unload(partition)
        if gone:
            log.info("transaction coordinator unloaded partition(s) %s", sorted(gone))

    async def stop(self) -> None:
        await self._runtime.stop()
        await self.markers.stop()
        self._runtime.cancel_background()
        for partition in list(self.coordinator.epochs) + list(self.coordinator.loading):
            self.coordinator.unload(partition)
        if isinstance(self._sender, BrokerMarkerSender):
            self._sender.close()

    def run_once(self) -> None:
        """Fire the coordinator's timers; each result is written in the background."""
        try:
            results = self.coordinator.poll(self._time.milliseconds())
        except Exception:
            log.exception("transaction coordinator tick failed")
            return
        for result in results:
            self._runtime.spawn(self.execute(result))

    def partition_for(self, transactional_id: str) -> int:
        return self.coordinator.partition_for(transactional_id)

    # ------------------------------------------------------------------ requests
    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               expected: tuple[int, int] | None) -> Any:
        return await self.execute(self.coordinator.init_producer_id(
            transactional_id, timeout_ms, expected, self._time.milliseconds()))

    async def add_partitions_to_txn(self, transactional_id: str, producer_id: int,
                                    producer_epoch: int,
                                    partitions: Iterable[tuple[str, int]],
                                    client_transaction_version: int = 0) -> int:
        result: int = await self.execute(self.coordinator.add_partitions_to_txn(
            transactional_id, producer_id, producer_epoch, partitions,
            self._time.milliseconds(), client_transaction_version))
        return result

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                      committed: bool, client_transaction_version: int = 0) -> EndTxnResult:
        result: EndTxnResult = await self.execute(self.coordinator.end_txn(
            transactional_id, producer_id, producer_epoch, committed,
            self._time.milliseconds(), client_transaction_version))
        return result

    # ------------------------------------------------------------------ machinery
    async def execute(self, result: TxnResult) -> Any:
        """Make the step's records durable, replay them, return its answer.

        The write runs in a task of its own, shielded from the caller: a handler is
        cancelled when its client's connection closes (a producer killed during its
        EndTxn), and a write cut off between its append and its replay would leave the
        transactional id's pending transition set for good -- every later request
        answered CONCURRENT_TRANSACTIONS and the timeout abort skipping it.  Kafka's
        append callback likewise runs whether or not anyone is left to answer."""
        if not result.records:
            return result.response
        return await self._runtime.shielded(self._persist_and_replay(result))

    async def _persist_and_replay(self, result: TxnResult) -> Any:
        assert result.on_failure is not None
        coord = self.coordinator
        partition = result.partition
        try:
            end = self._log.append(partition, [(r.key, r.value) for r in result.records])
        except Exception as exc:
            log.warning("writing to __transaction_state-%d failed: %s", partition, exc)
            return result.on_failure(_storage_error(exc))
        error = await self._log.wait_replicated(partition, end)
        if error:
            return result.on_failure(_storage_error(error))
        if coord.epochs.get(partition) != result.coordinator_epoch:
            return result.on_failure(Errors.NOT_COORDINATOR)
        for rec in result.records:
            coord.replay(rec.partition, rec.key, rec.value)
        self._dispatch_markers()
        return result.response

    def _dispatch_markers(self) -> None:
        for entry in self.coordinator.take_markers():
            self.markers.add_txn_markers_to_send(entry)

    def _markers_written(self, entry: TxnMarkerEntry) -> None:
        result = self.coordinator.complete_markers(entry, self._time.milliseconds())
        self._runtime.spawn(self.execute(result))
