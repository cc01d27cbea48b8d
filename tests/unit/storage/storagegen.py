"""Helpers for the storage tests: batches built with the real RecordBatchBuilder, logs on tmp_path."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from millrace.common.time import MockTime
from millrace.record.batch import Record, RecordBatch, RecordBatchBuilder, iter_batches
from millrace.record.compression import CompressionType
from millrace.storage import Log, LogConfig

T0 = 1_700_000_000_000


def batch(values: Sequence[bytes | None] | int = 1, *, ts: int = T0,
          keys: Sequence[bytes | None] | None = None,
          compression: CompressionType = CompressionType.NONE, ts_step: int = 0,
          **kwargs: object) -> bytes:
    """One v2 batch; ``values`` may be a count (values b"v0", b"v1", ...)."""
    if isinstance(values, int):
        values = [f"v{i}".encode() for i in range(values)]
    b = RecordBatchBuilder(compression=compression, **kwargs)  # type: ignore[arg-type]
    for i, v in enumerate(values):
        key = keys[i] if keys is not None else f"k{i}".encode()
        b.append(ts + i * ts_step, key, v)
    return b.build()


def records(data: bytes) -> list[Record]:
    """Every record of the whole batches in ``data``."""
    out: list[Record] = []
    for pos, _ in iter_batches(data):
        out.extend(RecordBatch(data, pos).records())
    return out


def config(**props: object) -> LogConfig:
    """LogConfig from keyword args with underscores for dots: segment_bytes=100."""
    return LogConfig.from_props({k.replace("_", "."): str(v) for k, v in props.items()})


def open_log(tmp_path: Path, name: str = "topic-0", cfg: LogConfig | None = None,
             time: MockTime | None = None, **kwargs: object) -> Log:
    return Log(os.path.join(tmp_path, name), cfg or LogConfig(), time=time or MockTime(T0),
               **kwargs)  # type: ignore[arg-type]


def fill(log: Log, n_batches: int, per_batch: int = 1, *, ts: int = T0, ts_step: int = 0,
         epoch: int = 0, value_size: int = 0) -> None:
    for i in range(n_batches):
        if value_size:
            values: Sequence[bytes | None] | int = [bytes([65 + i % 26]) * value_size] * per_batch
        else:
            values = per_batch
        log.append_as_leader(batch(values, ts=ts + i * ts_step), epoch, now_ms=ts + i * ts_step)
    log.update_high_watermark(log.log_end_offset)


def all_offsets(log: Log) -> list[int]:
    return [r.offset for r in records(log.read_all_bytes())]


def contiguous(offsets: Iterable[int]) -> bool:
    offs = list(offsets)
    return offs == list(range(offs[0], offs[0] + len(offs))) if offs else True
