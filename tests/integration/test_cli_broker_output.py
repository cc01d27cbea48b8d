"""``millrace broker --output json`` (issue 16 item 5): one JSON line on stdout per event
of the broker's life -- started, stopped, error -- while the logs stay on stderr."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration]

BROKER = [sys.executable, "-m", "millrace.cli.main", "broker", "--output", "json"]


def test_a_taken_port_is_one_json_error(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run([*BROKER, "--override", f"log.dirs={logs}", "--override",
                               f"listeners=PLAINTEXT://127.0.0.1:{port}"],
                              capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 1, proc.stderr
    (line,) = proc.stdout.splitlines()
    doc = json.loads(line)
    assert doc["event"] == "error" and doc["exit_code"] == 1
    assert f"cannot listen on PLAINTEXT://127.0.0.1:{port}" in doc["error"]
    assert "in use" in doc["error"]


def test_a_bad_config_is_one_json_error_and_nothing_on_stderr() -> None:
    proc = subprocess.run([*BROKER, "--override", "bogus.key=1"], capture_output=True,
                          text=True, timeout=30, check=False)
    assert proc.returncode == 2
    assert json.loads(proc.stdout) == {"event": "error", "exit_code": 2,
                                       "error": "Unknown configuration key(s): bogus.key"}
    assert proc.stderr == ""


def test_started_and_stopped_lines(tmp_path: Path) -> None:
    proc = subprocess.Popen([*BROKER, "--override", f"log.dirs={tmp_path / 'logs'}",
                             "--override", "listeners=PLAINTEXT://127.0.0.1:0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        started = json.loads(proc.stdout.readline())  # written once the listener accepts
        assert started["event"] == "started" and started["node_id"] == 0
        assert started["cluster_id"]
        (listener,) = started["listeners"]
        host, port = listener.rsplit(":", 1)
        socket.create_connection((host, int(port)), timeout=5).close()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert [json.loads(line) for line in out.splitlines()] == [
        {"event": "stopped", "exit_code": 0}]
    assert "started; cluster.id" in err  # the log is where it always was
