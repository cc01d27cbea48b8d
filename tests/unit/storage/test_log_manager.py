from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from millrace.common.errors import InvalidTopicError, KafkaStorageError
from millrace.common.time import MockTime
from millrace.storage import LogConfig, LogManager, OffsetCheckpointFile
from millrace.storage.log_manager import CLEAN_SHUTDOWN_FILE
from tests.unit.storage.storagegen import T0, all_offsets, batch, config, contiguous, fill


def _manager(dirs: list[Path], cfg: LogConfig | None = None) -> LogManager:
    lm = LogManager([str(d) for d in dirs], cfg or config(segment_bytes=600),
                    time=MockTime(T0))
    lm.startup()
    return lm


def test_logs_spread_over_dirs_and_survive_a_clean_restart(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    lm = _manager(dirs)
    for p in range(4):
        fill(lm.get_or_create_log("orders", p), 5 + p, value_size=80)
    assert lm.get_or_create_log("orders", 0) is lm.get_log("orders", 0)
    per_dir = {d: len(logs) for d, logs in lm.logs_by_dir().items()}
    assert sorted(per_dir.values()) == [2, 2]
    lm.get_log("orders", 1).delete_records_before(3)  # type: ignore[union-attr]
    lm.shutdown()
    for d in dirs:
        assert (d / CLEAN_SHUTDOWN_FILE).exists()
        rp = OffsetCheckpointFile(str(d / "recovery-point-offset-checkpoint")).read()
        hw = OffsetCheckpointFile(str(d / "replication-offset-checkpoint")).read()
        assert rp == hw and len(rp) == 2
    starts = {}
    for d in dirs:
        starts.update(OffsetCheckpointFile(str(d / "log-start-offset-checkpoint")).read())
    assert starts[("orders", 1)] == 3
    lm = _manager(dirs)
    assert all(lm.had_clean_shutdown.values())
    assert not any((d / CLEAN_SHUTDOWN_FILE).exists() for d in dirs)  # removed at startup
    for p in range(4):
        lg = lm.get_log("orders", p)
        assert lg is not None and lg.log_end_offset == 5 + p and lg.high_watermark == 5 + p
    assert lm.get_log("orders", 1).log_start_offset == 3  # type: ignore[union-attr]
    lm.shutdown()


def test_unclean_shutdown_recovers_torn_tails(tmp_path: Path, caplog: pytest.LogCaptureFixture
                                              ) -> None:
    lm = _manager([tmp_path])
    lg = lm.get_or_create_log("t", 0)
    fill(lg, 12, value_size=80)
    lm.checkpoint_all()  # recovery point 0: nothing flushed
    active = lg.segments[-1].path
    for log_ in lm.all_logs():
        log_.close()  # "crash": no flush, no marker
    lm._close_all()
    with open(active, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x0c\x00\x00\x00\x50garbage")
    with caplog.at_level(logging.WARNING, logger="millrace.storage"):
        lm = _manager([tmp_path])
    assert not lm.had_clean_shutdown[str(tmp_path)]
    assert "truncating 19 bytes" in caplog.text
    lg2 = lm.get_log("t", 0)
    assert lg2 is not None and lg2.log_end_offset == 12
    assert lg2.recovery_point == 12  # recovered data was fsync'd
    assert all_offsets(lg2) == list(range(12))
    assert lg2.append_as_leader(batch(1), 0).first_offset == 12
    lm.shutdown()


def test_corrupt_checkpoint_means_full_recovery(tmp_path: Path) -> None:
    lm = _manager([tmp_path])
    fill(lm.get_or_create_log("t", 0), 5)
    lm.shutdown()
    (tmp_path / "recovery-point-offset-checkpoint").write_text("garbage")
    lm = _manager([tmp_path])
    assert not lm.had_clean_shutdown[str(tmp_path)]
    assert lm.get_log("t", 0).log_end_offset == 5  # type: ignore[union-attr]
    lm.shutdown()


def test_delete_log(tmp_path: Path) -> None:
    lm = _manager([tmp_path])
    fill(lm.get_or_create_log("t", 0), 3)
    fill(lm.get_or_create_log("t", 1), 3)
    assert lm.delete_log("t", 0)
    assert not lm.delete_log("t", 0)
    assert lm.get_log("t", 0) is None
    assert sorted(n for n in os.listdir(tmp_path) if not n.startswith(".")
                  and os.path.isdir(tmp_path / n)) == ["t-1"]
    assert ("t", 0) not in OffsetCheckpointFile(
        str(tmp_path / "recovery-point-offset-checkpoint")).read()
    # a deletion interrupted by a crash is finished at startup
    os.makedirs(tmp_path / "t-9.0123abcd-delete")
    lm.shutdown()
    lm = _manager([tmp_path])
    assert not (tmp_path / "t-9.0123abcd-delete").exists()
    assert [(lg.topic, lg.partition) for lg in lm.all_logs()] == [("t", 1)]
    lm.shutdown()


def test_topic_names_and_dir_lock(tmp_path: Path) -> None:
    lm = _manager([tmp_path])
    for bad in ("", "a/b", "..", "x" * 250, "sp ace"):
        with pytest.raises(InvalidTopicError):
            lm.get_or_create_log(bad, 0)
    with pytest.raises(KafkaStorageError):
        _manager([tmp_path])  # the dir is locked by lm
    lm.shutdown()
    _manager([tmp_path]).shutdown()


def test_cleanup_and_flush_dirty_logs(tmp_path: Path) -> None:
    lm = _manager([tmp_path], config(segment_bytes=400, retention_ms=1000,
                                     file_delete_delay_ms=0, flush_ms=5000))
    lg = lm.get_or_create_log("t", 0)
    fill(lg, 10, value_size=80)
    assert len(lg.segments) > 2
    assert lm.flush_dirty_logs(T0) == 1  # rolled segments get flushed
    assert lg.recovery_point == lg.segments[-1].base_offset
    assert lm.flush_dirty_logs(T0) == 0
    assert lm.flush_dirty_logs(T0 + 5000) == 1  # flush.ms passed
    assert lg.recovery_point == lg.log_end_offset
    n = len(lg.segments)
    assert lm.cleanup_logs(T0 + 10**6) == n - 1
    assert len(lg.segments) == 1 and contiguous(all_offsets(lg))
    lm.update_config("t", config(retention_ms=5))
    assert lg.config.retention_ms == 5
    lm.shutdown()


def test_checkpoints_are_rewritten_only_when_their_offsets_change(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lm = _manager([tmp_path])
    lg = lm.get_or_create_log("t", 0)
    fill(lg, 3, value_size=80)
    written: list[str] = []
    real_write = OffsetCheckpointFile.write

    def write(self: OffsetCheckpointFile, offsets: dict[tuple[str, int], int]) -> None:
        written.append(os.path.basename(self.path))
        real_write(self, offsets)

    monkeypatch.setattr(OffsetCheckpointFile, "write", write)
    lm.checkpoint_all()
    assert sorted(written) == ["log-start-offset-checkpoint",
                               "recovery-point-offset-checkpoint",
                               "replication-offset-checkpoint"]
    written.clear()
    lm.checkpoint_all()
    assert written == []  # nothing changed: nothing written
    lg.delete_records_before(1)
    lm.checkpoint_all()
    assert written == ["log-start-offset-checkpoint"]  # only the file whose offsets moved
    assert OffsetCheckpointFile(str(tmp_path / "log-start-offset-checkpoint")).read() == {
        ("t", 0): 1}
    lm.shutdown()
