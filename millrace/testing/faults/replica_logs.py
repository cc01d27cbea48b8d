"""Every replica's log, read from the files the brokers left on disk.

After a run the cluster is stopped and each broker's partition directory is copied to a
scratch directory (opening a ``Log`` may recover it: the broker's own files stay as they
were) and read batch by batch: the records' values at their offsets, and each batch's
bytes, so replicas can be compared byte for byte.  The high watermark of each replica
comes from its ``replication-offset-checkpoint`` (written at shutdown).  This is how
Kafka's system tests tell a real loss from a consumer's miss: look at the data files.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from millrace.launcher.local_cluster import LocalCluster
from millrace.record.batch import RecordBatch, iter_batches
from millrace.storage.checkpoint import REPLICATION_OFFSET_CHECKPOINT, OffsetCheckpointFile
from millrace.storage.config import LogConfig
from millrace.storage.log import Log


@dataclass
class ReplicaLog:
    broker: int
    topic: str
    partition: int
    log_start_offset: int
    log_end_offset: int
    high_watermark: int  # -1 when the checkpoint has no entry
    # (base offset, last offset, the batch's bytes), in log order
    batches: list[tuple[int, int, bytes]] = field(default_factory=list)
    # (offset, value) of every record, in log order (control records left out)
    records: list[tuple[int, bytes | None]] = field(default_factory=list)

    def bytes_below(self, offset: int) -> list[tuple[int, bytes]]:
        """The batches that end before ``offset``, as (base offset, bytes)."""
        return [(base, data) for base, last, data in self.batches if last < offset]


def read_replica_log(directory: Path, scratch: Path, broker: int, topic: str,
                     partition: int, high_watermark: int) -> ReplicaLog:
    copy = scratch / f"broker-{broker}" / directory.name
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(directory, copy)
    log = Log(str(copy), LogConfig(), had_clean_shutdown=True)
    try:
        data = log.read_all_bytes()
        out = ReplicaLog(broker, topic, partition, log.log_start_offset, log.log_end_offset,
                         high_watermark)
    finally:
        log.close()
    for pos, header in iter_batches(data):
        batch = RecordBatch(data, pos)
        out.batches.append((header.base_offset, header.last_offset,
                            bytes(data[pos:pos + header.size])))
        if batch.is_control:
            continue
        for r in batch.record_list():
            out.records.append((r.offset, r.value))
    return out


def read_replica_logs(cluster: LocalCluster, topics: list[str], scratch: Path
                      ) -> dict[tuple[str, int], dict[int, ReplicaLog]]:
    """``{(topic, partition): {broker: ReplicaLog}}`` for every replica found on disk."""
    out: dict[tuple[str, int], dict[int, ReplicaLog]] = {}
    for broker_id, broker in sorted(cluster.brokers.items()):
        log_dir = broker.data_dir / "logs"
        checkpoint = log_dir / REPLICATION_OFFSET_CHECKPOINT
        hws = OffsetCheckpointFile(str(checkpoint)).read() if checkpoint.exists() else {}
        for d in sorted(log_dir.iterdir()) if log_dir.exists() else []:
            topic, _, index = d.name.rpartition("-")
            if not d.is_dir() or topic not in topics or not index.isdigit():
                continue
            p = int(index)
            out.setdefault((topic, p), {})[broker_id] = read_replica_log(
                d, scratch, broker_id, topic, p, hws.get((topic, p), -1))
    return out
