"""The CLI end to end, as a user would: create a topic, produce lines from a file,
consume them back, describe the group with lag, reset offsets (a dry run, then
--execute), consume again; and the producer's progress bar on a terminal, which stays on
stderr while JSON goes to stdout."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import struct
import subprocess
import sys
import termios
import threading
from pathlib import Path

import pytest

from millrace.testing.broker_process import BrokerProcess

pytestmark = [pytest.mark.integration]


def _cli(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "millrace.cli.main", *args,
                           "--bootstrap-server", broker.bootstrap],
                          capture_output=True, text=True, timeout=90, check=False)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_user_journey(tmp_path: Path) -> None:
    lines = tmp_path / "lines.txt"
    lines.write_text("".join(f"user{i}:clicked {i}\n" for i in range(10)))
    with BrokerProcess(tmp_path / "broker") as b:
        assert _cli(b, "topics", "create", "--topic", "clicks", "--partitions", "1"
                    ).returncode == 0
        r = _cli(b, "produce", "--topic", "clicks", "--file", str(lines), "--parse-key",
                 "--key-separator", ":", "--header", "source=file")
        assert r.returncode == 0 and "sent 10 records" in r.stderr
        r = _cli(b, "consume", "--topic", "clicks", "--group", "readers", "--from-beginning",
                 "--max-messages", "10", "--print-key", "--print-offset",
                 "--key-separator", "|")
        assert r.returncode == 0
        assert r.stdout.splitlines() == [f"Offset:{i}|user{i}|clicked {i}" for i in range(10)]
        r = _cli(b, "groups", "describe", "--group", "readers", "--output", "json")
        assert r.returncode == 0
        [group] = json.loads(r.stdout)
        assert [(o["topic"], o["partition"], o["offset"], o["log_end_offset"], o["lag"])
                for o in group["offsets"]] == [("clicks", 0, 10, 10, 0)]
        r = _cli(b, "groups", "describe", "--group", "readers")
        rows = [line.split() for line in r.stdout.splitlines() if line.strip()]
        assert rows[-2:] == [["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET",
                              "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID",
                              "STATUS"],
                             ["readers", "clicks", "0", "10", "10", "0", "-", "-", "-", "-"]]
        r = _cli(b, "groups", "reset-offsets", "--group", "readers", "--topic", "clicks",
                 "--to-offset", "7")
        assert r.returncode == 0 and "Dry run" in r.stderr
        assert [line.split() for line in r.stdout.splitlines() if line.strip()] == [
            ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], ["readers", "clicks", "0", "7"]]
        r = _cli(b, "groups", "describe", "--group", "readers", "--output", "json")
        assert [o["offset"] for o in json.loads(r.stdout)[0]["offsets"]] == [10]  # unchanged
        r = _cli(b, "groups", "reset-offsets", "--group", "readers", "--topic", "clicks",
                 "--to-offset", "7", "--execute")
        assert r.returncode == 0, r.stderr
        assert "Dry run" not in r.stderr
        r = _cli(b, "groups", "describe", "--group", "readers")
        assert r.stdout.split()[-7:-4] == ["7", "10", "3"]  # CURRENT, LOG-END, LAG
        r = _cli(b, "consume", "--topic", "clicks", "--group", "readers",
                 "--max-messages", "3", "--output", "json")
        got = [json.loads(line) for line in r.stdout.splitlines()]
        assert [(g["offset"], g["key"], g["value"], g["headers"]) for g in got] == [
            (i, f"user{i}", f"clicked {i}", [["source", "file"]]) for i in (7, 8, 9)]
        # --max-messages commits only what was printed, not the rest of the last poll
        r = _cli(b, "groups", "describe", "--group", "readers", "--output", "json")
        [group] = json.loads(r.stdout)
        assert [o["offset"] for o in group["offsets"]] == [10]
        r = _cli(b, "groups", "reset-offsets", "--group", "readers", "--topic", "clicks",
                 "--to-earliest", "--execute")
        assert r.returncode == 0, r.stderr
        r = _cli(b, "consume", "--topic", "clicks", "--group", "readers", "--max-messages", "1")
        assert r.stdout.splitlines() == ["clicked 0"]
        r = _cli(b, "groups", "describe", "--group", "readers", "--output", "json")
        [group] = json.loads(r.stdout)
        assert [(o["offset"], o["lag"]) for o in group["offsets"]] == [(1, 9)]
        r = _cli(b, "consume", "--topic", "missing-topic-x", "--max-messages", "1",
                 "--idle-timeout", "1500", "--from-beginning")
        assert r.returncode == 0 and "Processed a total of 0 messages" in r.stderr
        r = _cli(b, "produce", "--topic", "clicks", "--file", str(tmp_path / "nope.txt"))
        assert r.returncode == 1 and r.stderr.count("\n") == 1  # one clear error line


def _on_a_terminal(argv: list[str]) -> tuple[int, str, str]:
    """Run with stderr on a pseudo-terminal (100 columns) and stdout on a pipe."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    chunks: list[bytes] = []

    def read_terminal() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed its end
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=read_terminal, daemon=True)
    reader.start()
    try:
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=slave, timeout=120,
                              check=False)
    finally:
        os.close(slave)
        reader.join(10)
        os.close(master)
    return proc.returncode, proc.stdout.decode(), b"".join(chunks).decode(errors="replace")


def test_producer_progress_bar_stays_on_the_terminal(tmp_path: Path) -> None:
    lines = tmp_path / "big.txt"
    lines.write_text("".join(f"record number {i:06d}\n" for i in range(50_000)))
    with BrokerProcess(tmp_path / "broker") as b:
        code, out, terminal = _on_a_terminal([
            sys.executable, "-m", "millrace.cli.main", "produce", "--topic", "bulk",
            "--file", str(lines), "--output", "json", "--bootstrap-server", b.bootstrap])
        assert code == 0, terminal
        assert json.loads(out) == {"topic": "bulk", "sent": 50_000, "failed": 0,
                                   "first_error": None}
        assert "big.txt -> bulk" in terminal and "Traceback" not in terminal
        # piped, the same command draws nothing: stderr holds only the summary line
        r = _cli(b, "produce", "--topic", "bulk", "--file", str(lines))
        assert r.returncode == 0 and r.stderr == "sent 50000 records to bulk\n"
        r = _cli(b, "groups", "list", "--output", "json")
        assert r.returncode == 0 and json.loads(r.stdout) == []
