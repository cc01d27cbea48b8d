"""``DelayedFetch``: a fetch long-poll (Kafka's ``DelayedFetch``).

``ReplicaManager.fetch_messages`` reads once; when that read gathered fewer than
``min_bytes``, hit no error, and the request allows waiting, the fetch parks in the fetch
purgatory keyed by its partitions.  Each read is bounded as the first was (the high
watermark, or the last stable offset for read_committed), so a read_committed fetch waits
on the LSO: markers and high-watermark moves wake it like appends.  Each append to one of them (or a high-watermark
move, a deletion) lets it read again; it answers as soon as a read reaches ``min_bytes``
or finds an error, or with a last read at ``max_wait_ms``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from millrace.broker.purgatory import DelayedOperation


@dataclass(slots=True)
class FetchPartitionData:
    """One partition's fetch result (Kafka's ``FetchPartitionData``)."""

    error: int
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: Any = b""  # bytes, or a FileRegion sent with sendfile
    # read_committed only: (producer id, first offset) of the aborted transactions the
    # records overlap; None for read_uncommitted
    aborted_transactions: list[tuple[int, int]] | None = None


@dataclass(slots=True)
class LogReadResults:
    partitions: list[FetchPartitionData]
    bytes_read: int
    has_error: bool


class DelayedFetch(DelayedOperation):
    def __init__(self, delay_ms: int, min_bytes: int,
                 read: Callable[[], LogReadResults]) -> None:
        super().__init__(delay_ms)
        self.min_bytes = min_bytes
        self._read = read
        self.result: LogReadResults | None = None

    def try_complete(self) -> bool:
        result = self._read()
        if result.bytes_read >= self.min_bytes or result.has_error:
            self.result = result
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        if self.result is None:  # expired: answer with what is there now
            self.result = self._read()
