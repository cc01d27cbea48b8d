"""The storage layer and a single-node broker on a real, full file system (a 1 MiB tmpfs).

What a full disk must never do: acknowledge a write it could not make, leave a partial
batch, a half-written segment or checkpoint behind, or let the broker carry on as if
nothing happened.  Every I/O error takes the log dir offline (``LogDirFailureChannel``);
a restart after the space is freed recovers exactly what was written before.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition

from millrace.common.errors import KafkaStorageError
from millrace.common.time import MockTime
from millrace.launcher.broker_process import BrokerProcess
from millrace.storage import LogManager
from millrace.storage.checkpoint import CheckpointFile, OffsetCheckpointFile
from millrace.storage.log_manager import CLEAN_SHUTDOWN_FILE
from millrace.testing.faults.disk import (
    FAILURE_LINE,
    fill,
    free,
    mount_tmpfs,
    unmount_small_log_dir,
)
from tests.unit.storage.storagegen import T0, batch, config
from tests.unit.storage.storagegen import fill as append_batches

pytestmark = [pytest.mark.integration]


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs of its own (needs root: a failure to mount says so)."""
    path = mount_tmpfs(tmp_path / "fs", 1024 * 1024)
    try:
        yield path
    finally:
        unmount_small_log_dir(path)


def manager(d: Path) -> LogManager:
    lm = LogManager(str(d), config(segment_bytes=600), time=MockTime(T0))
    lm.startup()
    return lm


def files(d: Path) -> list[str]:
    return sorted(str(p.relative_to(d)) for p in d.rglob("*") if p.is_file())


def test_an_append_on_a_full_disk_is_refused_cut_and_recovered(small_fs: Path) -> None:
    logs = small_fs / "logs"
    lm = manager(logs)
    lg = lm.get_or_create_log("t", 0)
    append_batches(lg, 4, value_size=50)
    before, end = lg.read_all_bytes(), lg.log_end_offset
    active = lg.active_segment.path
    active_size = os.path.getsize(active)
    fill(small_fs)

    with pytest.raises(KafkaStorageError, match="No space left on device"):
        lg.append_as_leader(batch([b"x" * 300] * 3), 0)
    assert lm.failure_channel.has_offline_log_dir(str(logs))
    assert os.path.getsize(active) == active_size  # the partial write was cut
    assert lg.log_end_offset == end
    with pytest.raises(KafkaStorageError, match="offline"):  # nothing more is attempted
        lg.append_as_leader(batch(1), 0)
    with pytest.raises(KafkaStorageError, match="offline"):
        lg.read(0, 1 << 20)
    with pytest.raises(KafkaStorageError, match="offline"):
        lm.get_or_create_log("t", 1)
    lm.shutdown()
    assert not (logs / CLEAN_SHUTDOWN_FILE).exists()  # the next start recovers

    assert free(small_fs)
    lm = manager(logs)
    assert lm.had_clean_shutdown == {str(logs): False}
    lg = lm.get_log("t", 0)  # type: ignore[assignment]
    assert lg is not None and lg.log_end_offset == end and lg.read_all_bytes() == before
    lg.append_as_leader(batch(1), 0)
    assert lg.log_end_offset == end + 1
    lm.shutdown()
    assert (logs / CLEAN_SHUTDOWN_FILE).exists()


def test_a_segment_roll_on_a_full_disk_leaves_no_half_written_segment(small_fs: Path) -> None:
    logs = small_fs / "logs"
    lm = manager(logs)
    lg = lm.get_or_create_log("t", 0)
    for i in range(12):  # a producer id, so the roll writes a real snapshot
        lg.append_as_leader(batch([b"y" * 60], producer_id=7, producer_epoch=0,
                                  base_sequence=i), 0)
    lg.update_high_watermark(lg.log_end_offset)
    assert len(lg.segments) > 1
    before, end = lg.read_all_bytes(), lg.log_end_offset
    fill(small_fs)
    with pytest.raises(KafkaStorageError, match=r"segment roll .* failed"):
        lg.roll()
    assert lm.failure_channel.has_offline_log_dir(str(logs))
    lm.shutdown()
    assert not [f for f in files(logs) if f.endswith(".tmp")]  # no half-written temp file

    free(small_fs)
    lm = manager(logs)
    lg = lm.get_log("t", 0)  # type: ignore[assignment]
    assert lg is not None and lg.log_end_offset == end and lg.read_all_bytes() == before
    # the producer's state survived: its next sequence is accepted, a retry is a duplicate
    lg.append_as_leader(batch([b"z"], producer_id=7, producer_epoch=0, base_sequence=12), 0)
    dup = lg.append_as_leader(batch([b"z"], producer_id=7, producer_epoch=0,
                                    base_sequence=12), 0)
    assert dup.num_batches == 0 and lg.log_end_offset == end + 1
    lm.shutdown()


def test_a_checkpoint_on_a_full_disk_keeps_the_old_file_whole(small_fs: Path) -> None:
    path = small_fs / "replication-offset-checkpoint"
    cp = OffsetCheckpointFile(str(path))
    cp.write({("t", 0): 5})
    fill(small_fs)
    with pytest.raises(OSError, match="No space left"):
        CheckpointFile(str(path), _Formatter()).write(["x" * 200] * 100)
    assert cp.read() == {("t", 0): 5}
    assert not (small_fs / "replication-offset-checkpoint.tmp").exists()


class _Formatter:
    def to_line(self, entry: str) -> str:
        return entry

    def from_line(self, line: str) -> str | None:
        return line


def test_checkpoints_on_a_full_disk_take_the_dir_offline(small_fs: Path) -> None:
    logs = small_fs / "logs"
    lm = manager(logs)
    heard: list[str] = []
    lm.failure_channel.add_listener(lambda d, why, e: heard.append(why))
    append_batches(lm.get_or_create_log("t", 0), 3)
    fill(small_fs)
    with pytest.raises(KafkaStorageError, match="recovery-point-offset-checkpoint"):
        lm.checkpoint_all()
    assert len(heard) == 1 and "No space left on device" in heard[0]
    assert lm.flush_dirty_logs(T0 + 10**9) == 0  # an offline dir is left alone
    lm.shutdown()
    assert not (logs / CLEAN_SHUTDOWN_FILE).exists()


def test_a_start_on_a_still_full_disk_fails_naming_the_dir(small_fs: Path) -> None:
    logs = small_fs / "logs"
    lm = manager(logs)
    append_batches(lm.get_or_create_log("t", 0), 3)
    lm.shutdown()
    fill(small_fs)
    lm = LogManager(str(logs), config(segment_bytes=600), time=MockTime(T0))
    with pytest.raises(KafkaStorageError,
                       match=re.escape(f"log dir {logs} failed") + ".*No space left"):
        lm.startup()
    free(small_fs)
    lm = manager(logs)  # nothing was damaged: still a clean shutdown
    assert lm.had_clean_shutdown == {str(logs): True}
    assert lm.get_log("t", 0).log_end_offset == 3  # type: ignore[union-attr]
    lm.shutdown()


def test_a_single_node_broker_acknowledges_nothing_after_its_disk_filled(
        tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "broker", overrides={
        "offsets.topic.replication.factor": "1"})
    logs = mount_tmpfs(broker.data_dir / "logs", 8 * 1024 * 1024)
    try:
        broker.start()
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all",
                             "enable.idempotence": True, "message.timeout.ms": 15_000,
                             "linger.ms": 0})
        outcome: dict[bytes, str] = {}

        def delivered(err: object, msg: object) -> None:
            outcome[msg.value()] = "fail" if err else "ok"  # type: ignore[attr-defined]

        for i in range(50):
            producer.produce("t", value=f"before-{i}".encode(), on_delivery=delivered)
        assert producer.flush(30) == 0
        assert all(v == "ok" for v in outcome.values()) and len(outcome) == 50

        fill(logs)
        # 8 KiB records: none fits in the slack of a page the segment already has, so
        # every one of them needs space the disk no longer has
        for i in range(20):
            producer.produce("t", value=f"after-{i}|".encode() + b"x" * 8192,
                             on_delivery=delivered)
        assert producer.flush(60) == 0
        after = {v[:12]: o for v, o in outcome.items() if v.startswith(b"after-")}
        assert len(after) == 20 and set(after.values()) == {"fail"}, after

        assert broker.proc is not None and broker.proc.wait(60) == 1
        assert FAILURE_LINE in broker.logs() and str(logs) in broker.logs()

        free(logs)
        broker.start()
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "check",
                             "enable.auto.commit": False})
        consumer.assign([CkTopicPartition("t", 0, 0)])
        got: list[bytes | None] = []
        while len(got) < 50:
            msg = consumer.poll(30)
            assert msg is not None, f"only {len(got)} of 50 records came back"
            if msg.error() is None:
                got.append(msg.value())
        extra = consumer.poll(2)
        consumer.close()
        assert got == [f"before-{i}".encode() for i in range(50)]
        assert extra is None or extra.error() is not None
        broker.stop()
    finally:
        broker.kill()
        unmount_small_log_dir(logs)
