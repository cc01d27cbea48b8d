"""A ``TransactionCoordinator`` driven like its service drives it: each step's records
are 'written' to an in-memory log per partition and replayed, so tests read like the
protocol (no sockets, no asyncio)."""

from __future__ import annotations

from typing import Any

from millrace.broker.transaction.coordinator import (
    TransactionConfig,
    TransactionCoordinator,
    TxnResult,
)

PARTITIONS = 4
EPOCH = 7


class Harness:
    def __init__(self, config: TransactionConfig | None = None, first_pid: int = 1000) -> None:
        self.next_pid = first_pid
        self.log: dict[int, list[tuple[bytes, bytes | None]]] = {}
        self.fail_writes: int | None = None   # error code every write fails with
        self.coord = self.new_coordinator(config)

    def _pid(self) -> int:
        pid = self.next_pid
        self.next_pid += 1
        return pid

    def new_coordinator(self, config: TransactionConfig | None = None,
                        epoch: int = EPOCH) -> TransactionCoordinator:
        coord = TransactionCoordinator(config or TransactionConfig(), PARTITIONS, self._pid)
        coord.begin_loading({p: epoch for p in range(PARTITIONS)})
        for p in range(PARTITIONS):
            coord.load(p, list(self.log.get(p, [])))
        return coord

    def run(self, result: TxnResult) -> Any:
        """Persist the step's records, replay them, return its answer."""
        if not result.records:
            return result.response
        if self.fail_writes is not None:
            assert result.on_failure is not None
            return result.on_failure(self.fail_writes)
        for rec in result.records:
            self.log.setdefault(rec.partition, []).append((rec.key, rec.value))
            self.coord.replay(rec.partition, rec.key, rec.value)
        return result.response

    def complete_all_markers(self, now_ms: int) -> list[Any]:
        """Pretend every leader wrote its marker: complete each queued transaction."""
        entries = self.coord.take_markers()
        for entry in entries:
            self.run(self.coord.complete_markers(entry, now_ms))
        return entries
