"""Crash consistency of the storage layer (reliability matrix row 11, single process).

A child process appends batches to three partition logs through a real ``LogManager`` and
prints each acknowledged offset; the test kills it with SIGKILL at random moments, over
several rounds.  After every kill the logs are reopened through ``LogManager`` (recovery,
no clean-shutdown marker) and checked: every acknowledged record is there (a killed process
loses nothing that reached the page cache), every batch passes its CRC, offsets run
0..LEO-1 without gaps and keep increasing across rounds, every index entry names its batch.
Then torn tails, garbage and damaged index files are written by hand and must be truncated
or rebuilt.  The leader epoch cache (each round appends at its own epoch) must name exactly
the first offset of each epoch the batches carry.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from millrace.record.batch import RecordBatchBuilder, iter_batches, validate_batch
from millrace.storage import Log, LogConfig, LogManager
from millrace.storage.log_manager import CLEAN_SHUTDOWN_FILE
from tests.unit.storage.storagegen import records

pytestmark = pytest.mark.integration

REPO_ROOT = str(Path(__file__).resolve().parents[2])
PARTITIONS = 3
TOPIC = "crash"
PROPS = {"segment.bytes": "30000", "index.interval.bytes": "700"}

CHILD = r"""
import random, sys, time
import millrace
assert millrace.__file__.startswith(%(root)r), millrace.__file__
from millrace.record.batch import RecordBatchBuilder
from millrace.record.compression import CompressionType
from millrace.storage import LogConfig, LogManager

log_dir, round_no = sys.argv[1], int(sys.argv[2])
lm = LogManager([log_dir], LogConfig.from_props(%(props)r))
lm.startup()
logs = [lm.get_or_create_log(%(topic)r, p) for p in range(%(partitions)d)]
rnd = random.Random(round_no)
out = sys.stdout
out.write("READY\n")
out.flush()
i = 0
while True:
    lg = logs[i %% len(logs)]
    b = RecordBatchBuilder(compression=rnd.choice([CompressionType.NONE, CompressionType.GZIP]))
    for j in range(rnd.randint(1, 30)):
        b.append(int(time.time() * 1000), f"{round_no}:{i}:{j}".encode(),
                 rnd.randbytes(rnd.randint(0, 400)))
    info = lg.append_as_leader(b.build(), round_no)
    lg.update_high_watermark(lg.log_end_offset)
    out.write(f"{lg.partition} {info.last_offset}\n")
    out.flush()
    if i %% 40 == 0:
        lm.flush_dirty_logs()
        lm.checkpoint_all()
    if i %% 101 == 0:
        lg.flush()
    i += 1
"""


def _config() -> LogConfig:
    return LogConfig.from_props(PROPS)


def _run_and_kill(script: Path, log_dir: Path, round_no: int, delay: float) -> dict[int, int]:
    """Run the writer, SIGKILL it after ``delay`` seconds of writing; acked last offsets."""
    # the writer imports this checkout's millrace, not whichever the venv has installed
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (REPO_ROOT, os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.Popen([sys.executable, str(script), str(log_dir), str(round_no)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    acked: dict[int, int] = {}
    ready = threading.Event()

    def reader() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("READY"):
                ready.set()
                continue
            parts = line.split()
            if len(parts) == 2:
                acked[int(parts[0])] = int(parts[1])

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    try:
        assert ready.wait(30), "writer did not start"
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        t.join(10)
        assert proc.stderr is not None
        err = proc.stderr.read()
        assert proc.returncode == -signal.SIGKILL, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for f in (proc.stdout, proc.stderr):
            if f is not None:
                f.close()
    return acked


def _check_log(lg: Log) -> list[tuple[int, int]]:
    """Every batch valid, offsets 0..LEO-1, indexes naming their batches; returns the
    (round, i) of each record in offset order."""
    data = lg.read_all_bytes()
    assert len(data) == sum(s.size for s in lg.segments)
    first_of_epoch: dict[int, int] = {}
    for pos, h in iter_batches(data):
        validate_batch(data, pos)
        first_of_epoch.setdefault(h.partition_leader_epoch, h.base_offset)
    # the leader epoch cache names exactly where each round's epoch begins (an entry
    # written just before a killed append is dropped on load)
    assert [tuple(e) for e in lg.leader_epoch_cache.entries()] == sorted(first_of_epoch.items())
    recs = records(data)
    assert [r.offset for r in recs] == list(range(lg.log_end_offset))
    for seg in lg.segments:
        oi = seg.offset_index
        for n in range(oi.entries):
            off, pos = oi.entry(n)
            assert seg.batch_at(pos)[0].last_offset == off
        ti = seg.time_index
        for n in range(ti.entries):
            assert seg.base_offset <= ti.entry(n)[1] < seg.read_next_offset()
        if seg.size and seg is not lg.segments[-1]:
            assert ti.last_entry()[0] == seg.max_timestamp > 0
    order = []
    for r in recs:
        assert r.key is not None
        rnd, i, _ = r.key.decode().split(":")
        order.append((int(rnd), int(i)))
    return order


def _open(log_dir: Path) -> LogManager:
    lm = LogManager([str(log_dir)], _config())
    lm.startup()
    return lm


def _crash(lm: LogManager) -> None:
    """Drop a LogManager the way a crash would: no flush, no checkpoints, no marker."""
    for lg in lm.all_logs():
        lg.close()
    lm._close_all()


def test_kill9_rounds_then_torn_tails_and_damaged_indexes(tmp_path: Path,
                                                          caplog: pytest.LogCaptureFixture
                                                          ) -> None:
    script = tmp_path / "writer.py"
    script.write_text(CHILD % {"props": PROPS, "topic": TOPIC, "partitions": PARTITIONS,
                               "root": REPO_ROOT})
    log_dir = tmp_path / "logs"
    rng = random.Random(20240611)
    all_acked: dict[int, int] = {}
    for round_no in range(1, 6):
        acked = _run_and_kill(script, log_dir, round_no, rng.uniform(0.05, 0.6))
        assert acked, "the writer acknowledged nothing"
        all_acked.update(acked)
        assert not (log_dir / CLEAN_SHUTDOWN_FILE).exists()
        lm = _open(log_dir)
        assert not lm.had_clean_shutdown[str(log_dir)]
        for p in range(PARTITIONS):
            lg = lm.get_log(TOPIC, p)
            assert lg is not None
            assert lg.log_end_offset > all_acked.get(p, -1), "acknowledged records lost"
            order = _check_log(lg)
            assert order == sorted(order)  # rounds and appends keep their order
        if round_no % 2:
            lm.shutdown()  # clean: the next writer starts from a marker
        else:
            _crash(lm)

    # --- torn tail, garbage, a batch with a bad CRC: written by hand
    lm = _open(log_dir)
    ends = {p: lm.get_log(TOPIC, p).log_end_offset for p in range(PARTITIONS)}  # type: ignore[union-attr]
    actives = {p: lm.get_log(TOPIC, p).segments[-1].path for p in range(PARTITIONS)}  # type: ignore[union-attr]
    lm.shutdown()
    os.unlink(log_dir / CLEAN_SHUTDOWN_FILE)
    b = RecordBatchBuilder()
    b.append(0, b"9:0:0", b"x" * 100)
    whole = bytearray(b.build())
    bad_crc = bytearray(whole)
    bad_crc[-1] ^= 0x55
    tails = {0: bytes(whole[: len(whole) // 2]),            # torn batch
             1: random.Random(7).randbytes(5000),            # garbage
             2: bytes(bad_crc)}                              # whole but corrupt
    for p, tail in tails.items():
        with open(actives[p], "ab") as f:
            f.write(tail)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="millrace.storage"):
        lm = _open(log_dir)
    for p, tail in tails.items():
        lg = lm.get_log(TOPIC, p)
        assert lg is not None
        assert lg.log_end_offset == ends[p]
        assert lg.truncated_on_load == len(tail)
        assert f"truncating {len(tail)} bytes" in caplog.text
        _check_log(lg)
        assert lg.append_as_leader(whole, 9).first_offset == ends[p]  # offsets continue
        lg.update_high_watermark(lg.log_end_offset)
        ends[p] += 1
    lm.shutdown()

    # --- damaged indexes, with a clean shutdown marker (found by the sanity check)
    pdir = log_dir / f"{TOPIC}-0"
    segs = sorted(n[:-4] for n in os.listdir(pdir) if n.endswith(".log"))
    assert len(segs) >= 3
    good = {n: (pdir / n).read_bytes() for n in os.listdir(pdir) if n.endswith("index")}
    os.unlink(pdir / f"{segs[0]}.index")
    (pdir / f"{segs[1]}.timeindex").write_bytes(b"\x00" * len(good[f"{segs[1]}.timeindex"]))
    (pdir / f"{segs[-1]}.index").write_bytes(good[f"{segs[-1]}.index"][:-3] or b"\x01")
    (pdir / f"{segs[2]}.index").write_bytes(
        bytes(reversed(good[f"{segs[2]}.index"])) or b"\xff" * 8)
    with open(pdir / "00000000000000099999.index", "wb") as f:  # orphan
        f.write(b"\x00" * 8)
    assert (log_dir / CLEAN_SHUTDOWN_FILE).exists()
    lm = _open(log_dir)
    lg = lm.get_log(TOPIC, 0)
    assert lg is not None and lg.log_end_offset == ends[0]
    _check_log(lg)
    for off in range(0, lg.log_end_offset, 7):
        _, h = next(iter_batches(lg.read(off, 1).read()))
        assert h.base_offset <= off <= h.last_offset
    lm.shutdown()
    assert not (pdir / "00000000000000099999.index").exists()
    for name, content in good.items():
        assert (pdir / name).read_bytes() == content, f"{name} not rebuilt identically"
