"""``TransactionCoordinatorService`` on a real event loop with an in-memory
``TransactionLog`` whose replication the test releases by hand."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

from millrace.broker.config import KafkaConfig
from millrace.broker.transaction.coordinator import InitProducerIdResult
from millrace.broker.transaction.service import TransactionCoordinatorService
from millrace.broker.transaction.transaction_metadata import TransactionState
from millrace.common.errors import Errors
from millrace.common.time import MockTime

TID = "copier-1"
PARTITIONS = 4


class GatedTransactionLog:
    """``TransactionLog`` over lists; ``wait_replicated`` waits for ``release``."""

    def __init__(self) -> None:
        self.records: dict[int, list[tuple[bytes, bytes | None]]] = {
            p: [] for p in range(PARTITIONS)}
        self.gate = asyncio.Event()
        self.waiting = 0

    def append(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> int:
        self.records[partition].extend(records)
        return len(self.records[partition])

    async def wait_replicated(self, partition: int, end_offset: int) -> int:
        self.waiting += 1
        await self.gate.wait()
        return Errors.NONE

    def replay(self, partition: int) -> Iterator[tuple[bytes, bytes | None]]:
        yield from list(self.records[partition])

    def num_partitions(self) -> int:
        return PARTITIONS


async def no_markers(broker: int, request: Any) -> Any:
    raise AssertionError("no transaction ends here")


def service(log: GatedTransactionLog) -> TransactionCoordinatorService:
    ids = iter(range(1000, 2000))
    config = KafkaConfig({"transaction.state.log.num.partitions": PARTITIONS})
    metadata: Any = SimpleNamespace(partition_state=lambda topic, p: None)
    return TransactionCoordinatorService(config, MockTime(), log, metadata,
                                         lambda: next(ids), send_markers=no_markers,
                                         tick_interval_ms=3_600_000)


def test_a_write_survives_its_cancelled_request() -> None:
    """The handler of a client whose connection closed is cancelled while its record
    waits for the ISR; the record is replayed all the same, so the next InitProducerId
    is not refused with CONCURRENT_TRANSACTIONS for ever (a copier killed by -9)."""
    async def main() -> None:
        log = GatedTransactionLog()
        svc = service(log)
        await svc.start({p: 0 for p in range(PARTITIONS)})
        try:
            request = asyncio.create_task(svc.init_producer_id(TID, 30_000, None))
            while log.waiting == 0:
                await asyncio.sleep(0)
            request.cancel()                       # connection_lost of the killed client
            await asyncio.sleep(0)
            assert request.cancelled()
            log.gate.set()                         # the ISR catches up
            for _ in range(5):
                await asyncio.sleep(0)
            md = svc.coordinator.transactions[TID]
            assert (md.state, md.producer_id, md.producer_epoch, md.pending_state) == (
                TransactionState.EMPTY, 1000, 0, None)
            again = await svc.init_producer_id(TID, 30_000, None)
            assert again == InitProducerIdResult(Errors.NONE, 1000, 1)
        finally:
            await svc.stop()

    asyncio.run(main())
