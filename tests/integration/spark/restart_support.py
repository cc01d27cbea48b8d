"""What the restart tests share: the pipeline's driver as a child process on a Spark
standalone cluster, the wait for a killed driver's application to end, and a PostgreSQL
restart that keeps the data.

``Driver`` runs ``restart_driver.py`` (``millrace pipeline run`` with the test hooks the
environment asks for) in a session of its own, so one ``killpg`` reaches the driver's
Python, its JVM and Spark's Python workers.  The executors are not in that group: they are
children of the workers, and they end when the master drops the application, which it does
once it sees the driver's connection close.  ``wait_application_gone`` waits for exactly
that in the master's ``/json/`` (no active application, no executor JVM left), so two
drivers never share the cluster or the checkpoint.

Thread ownership: everything here is driven from the test's thread.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pipeline_events import create_topic, pipeline_args

from millrace.client.errors import KafkaTimeoutError
from millrace.common.errors import TopicExistsError
from millrace.launcher.spark_cluster import SparkStandaloneCluster
from millrace.spark.sinks import open_database
from millrace.testing.postgres import PostgresServer, server_bin_dir

T = TypeVar("T")
HERE = Path(__file__).resolve().parent
WAIT_S = 300.0  # a bound on every wait: Spark on a loaded 2-core machine is slow


def until(what: str, condition: Callable[[], T | None], timeout: float = WAIT_S,
          diagnostics: Callable[[], str] = lambda: "") -> T:
    """Poll ``condition`` until it returns something truthy, and return it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"gave up after {timeout:.0f}s waiting for {what}\n{diagnostics()}")


def create_topic_on_cluster(bootstrap: str, topic: str, partitions: int,
                            attempts: int = 3) -> None:
    """``create_topic`` on a cluster that has just started: asked again when the answer
    timed out (no controller elected yet, or a loaded machine); a topic that the timed-out
    request did create counts as created."""
    for attempt in range(1, attempts + 1):
        try:
            create_topic(bootstrap, topic, partitions)
            return
        except TopicExistsError:
            if attempt == 1:
                raise
            return
        except KafkaTimeoutError:
            if attempt == attempts:
                raise


def restart_pipeline_args(master: str, bootstrap: str, topic: str, database: str,
                          checkpoint: Path, batch: int, tag: str,
                          trigger: str = "available-now") -> list[str]:
    """The order pipeline into ``orders_<tag>`` and ``revenue_<tag>`` on ``master``."""
    return ["--master", master, *pipeline_args(bootstrap, topic, tag, database, checkpoint,
                                               batch, trigger, f"orders_{tag}",
                                               f"revenue_{tag}")]


class Driver:
    """One pipeline driver (``restart_driver.py``) in its own process group."""

    def __init__(self, args: list[str], log: Path, **hooks: str) -> None:
        self.log = log
        with open(log, "ab") as out:
            out.write(f"--- driver {args} {hooks}\n".encode())
            self.proc = subprocess.Popen(
                [sys.executable, str(HERE / "restart_driver.py"), *args],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **hooks})

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def running(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL to the whole group, and wait until every member is gone."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

        def group_gone() -> bool:
            try:
                os.killpg(self.proc.pid, 0)
            except ProcessLookupError:
                return True
            return False
        until("the driver's process group to be gone", group_gone, 30)

    def wait(self, timeout: float = WAIT_S) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"the driver did not end in {timeout:.0f}s:\n"
                                 f"{self.output()[-6000:]}") from None

    def events(self) -> list[dict[str, Any]]:
        """The JSON lines it printed (batches, then the summary)."""
        found = []
        for line in self.output().splitlines():
            if line.startswith('{"event"'):
                found.append(json.loads(line))
        return found

    def summary(self) -> dict[str, Any]:
        last = [e for e in self.events() if e["event"] == "summary"]
        assert last, f"no summary:\n{self.output()[-6000:]}"
        return last[-1]


def app_name(tag: str) -> str:
    """The application name ``Pipeline.run`` gives its session on the master."""
    return f"millrace-pipeline-{tag}"


def active_apps(cluster: SparkStandaloneCluster, name: str) -> list[dict[str, Any]]:
    try:
        apps = cluster.applications()
    except (OSError, ValueError):
        return []
    return [app for app in apps if app.get("name") == name]


def wait_application_gone(cluster: SparkStandaloneCluster, name: str) -> None:
    """The killed driver's application has ended: the master no longer lists it active
    and no executor JVM is left on any worker."""
    until(f"the master to drop application {name} and its executors to exit",
          lambda: not active_apps(cluster, name) and not cluster.executor_pids(),
          diagnostics=lambda: json.dumps(cluster.master.state().get("activeapps"))
          + f" executors {cluster.executor_pids()}")


def committed(database: str, name: str) -> int:
    with open_database(database) as db:
        return db.committed_batches(name)


def wait_committed(driver: Driver, database: str, name: str, at_least: int) -> int:
    """Wait until ``name`` has ``at_least`` batch records (summed over its sinks)."""
    def enough() -> int | None:
        if not driver.running():
            raise AssertionError(f"the driver ended ({driver.proc.returncode}) before "
                                 f"{at_least} commits:\n{driver.output()[-6000:]}")
        n = committed(database, name)
        return n if n >= at_least else None
    try:
        return until(f"{at_least} batch records of {name}", enough)
    except BaseException:
        driver.kill()  # never leave a driver running behind a failed check
        raise


def restart_postgres(server: PostgresServer) -> None:
    """``pg_ctl restart -m fast``: every session ended, the data kept (``stop()`` would
    delete the cluster).  The server's log file is given again so that the new postmaster
    does not hold ``pg_ctl``'s output pipe open."""
    server._run(str(server_bin_dir() / "pg_ctl"), "-D", str(server.data_dir),
                "-l", str(server.log_path), "-m", "fast", "-w", "-t", "60", "restart",
                timeout=70)
