"""The CLI end to end, as a user would: create a topic, produce lines from a file,
consume them back, describe the group with lag, reset offsets, consume again."""

from __future__ import annotations

import json
import subprocess
import sys
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
        r = _cli(b, "groups", "reset-offsets", "--group", "readers", "--topic", "clicks",
                 "--to-offset", "7", "--execute")
        assert r.returncode == 0, r.stderr
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
