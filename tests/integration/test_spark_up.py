"""``millrace spark up`` as a user runs it: a child process that starts a Spark standalone
master and two workers from the pyspark distribution, prints where they are, keeps every
process on loopback with its files under ``--dir`` (none inside the package), refuses a
second cluster on the same ports with one line, and stops cleanly on SIGTERM with no JVM
left behind.  A job on it is the business of the pipeline's cluster tests
(``tests/integration/spark/test_cluster_*.py``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from millrace.launcher.broker_process import free_port
from millrace.launcher.spark_cluster import get_json, spark_home, spark_missing

pytestmark = [pytest.mark.integration, pytest.mark.slow]

if (why := spark_missing()) is not None:
    pytest.skip(why, allow_module_level=True)


def spark_up(directory: Path, port: int, webui_port: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "millrace.cli.main", "spark", "up", "--workers", "2",
         "--dir", str(directory), "--port", str(port), "--webui-port", str(webui_port),
         "--memory", "512m", "--output", "json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie is not alive
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


def test_spark_up_serves_on_loopback_and_stops_on_sigterm(tmp_path: Path) -> None:
    port, webui_port = free_port(), free_port()
    proc = spark_up(tmp_path / "spark", port, webui_port)
    info: dict[str, Any] = {}
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # printed once every worker has registered
        assert line, proc.communicate(timeout=30)
        info = json.loads(line)
        assert info["master"] == f"spark://127.0.0.1:{port}"
        assert info["web_ui"] == f"http://127.0.0.1:{webui_port}"
        master = get_json(f"{info['web_ui']}/json/")
        assert master["status"] == "ALIVE"
        workers = master["workers"]
        assert sorted(w["port"] for w in workers) == sorted(w["port"] for w in info["workers"])
        # registered under loopback, not the machine's other address
        assert {w["host"] for w in workers} == {"127.0.0.1"}
        assert all(w["state"] == "ALIVE" and w["memory"] == 512 for w in workers)
        for i in (1, 2):
            worker_dir = tmp_path / "spark" / f"worker-{i}"
            assert (worker_dir / "work").is_dir()
            # the master lists a worker before the worker has logged the master's answer
            log = worker_dir / "worker.log"
            deadline = time.monotonic() + 60
            while "Successfully registered with master" not in log.read_text():
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
        assert not (spark_home() / "work").exists()

        second = spark_up(tmp_path / "other", port, webui_port)
        out, err = second.communicate(timeout=60)
        assert second.returncode == 1 and out == ""
        assert f"--port {port}: 127.0.0.1:{port} is in use" in err

        pids = [info["pid"], *(w["pid"] for w in info["workers"])]
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=90)
        assert proc.returncode == 0, err
        assert "stopping worker 1" in err and "stopping master" in err
        assert err.rstrip().endswith("stopped")
        assert not any(alive(pid) for pid in pids)
    finally:
        stop_everything(proc, info)


def stop_everything(proc: subprocess.Popen[str], info: dict[str, Any]) -> None:
    """After a failure: SIGTERM (the command stops its JVMs), then SIGKILL for whatever
    is left -- the JVMs too, which run in sessions of their own."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(90)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    for pid in [info.get("pid"), *(w["pid"] for w in info.get("workers", []))]:
        if pid is not None and alive(pid):
            os.kill(pid, signal.SIGKILL)
