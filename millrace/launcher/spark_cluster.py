"""Run a Spark standalone cluster (a master and N workers) from the ``pyspark`` distribution.

The pipeline runs on Spark's own cluster managers, never on anything of ours; for
development, tests and benchmarks on one machine this starts the standalone one that
ships inside the ``pyspark`` package (no download)::

    with SparkStandaloneCluster(tmp_path / "spark", workers=2) as spark:
        local_session(master=spark.master_url)

Theory of operation:

- ``SPARK_HOME`` is the installed ``pyspark`` package: it carries ``bin/spark-class`` and the
  jars.  ``spark-class`` ends in ``exec java ...``, so the child's pid is the JVM's (a
  SIGKILL kills the server itself, not a wrapper shell).
- Every process binds loopback: ``--host 127.0.0.1`` and ``SPARK_LOCAL_IP=127.0.0.1``.  Left
  alone a worker registers under the machine's non-loopback address, and the executors it
  starts inherit that.
- Everything lives under ``directory``: ``master/`` and ``worker-<i>/`` hold each server's
  log (``*.log``), the worker's ``work/`` (an application's executor directories, their
  stdout and stderr) and ``local/`` (shuffle and block files).  Nothing is written inside
  the package (a worker's default work dir is ``$SPARK_HOME/work``).
- The master's web UI serves ``/json/``: its status, its workers (id, host, port, state,
  cores used) and its applications.  Ready means the master reports ``ALIVE``; a worker
  is ready once the master lists it ``ALIVE`` at its own port.
- A worker runs each application's executor as a child JVM
  (``CoarseGrainedExecutorBackend``); ``executor_pids`` finds them under ``/proc``, which is
  how a fault test kills an executor without killing its worker.  A worker killed with
  SIGKILL leaves its executors orphaned; they exit on their own once they lose the
  driver or the worker, ``kill_worker`` kills them too so nothing outlives a test.

Thread ownership: one instance is driven from one thread (a test, the CLI or a benchmark).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self

from millrace.launcher.broker_process import free_port
from millrace.launcher.child_process import ChildProcess, Launched

HOST = "127.0.0.1"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
# the heap of the master and worker daemons themselves (Spark's default is 1g each);
# executors get spark.executor.memory out of the worker's --memory
DAEMON_MEMORY = "256m"
# a daemon's start on a busy 2-core machine: a JVM, Spark's classes, the registration
START_TIMEOUT_S = 180.0
_WORKER_PORT = re.compile(r"Starting Spark worker [0-9.]+:(\d+)")


def spark_home() -> Path:
    """The ``pyspark`` package's directory: Spark's distribution, as ``SPARK_HOME``."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def spark_missing() -> str | None:
    """Why a Spark cluster cannot be started here (no java, no pyspark), or None."""
    if shutil.which("java") is None:
        return "java is not installed (Spark needs it): install it with scripts/system-deps.sh java"
    try:
        home = spark_home()
    except ImportError:
        return "pyspark is not installed: run scripts/bootstrap.sh"
    if not (home / "bin" / "spark-class").exists():
        return f"{home} has no bin/spark-class: the pyspark installation is incomplete"
    return None


def get_json(url: str, timeout: float = 2.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.load(response)


def spark_env(directory: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a Spark daemon: loopback only, logs and scratch under ``directory``."""
    env = dict(os.environ if base is None else base)
    env.update({
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": HOST,
        "SPARK_LOCAL_HOSTNAME": HOST,
        "SPARK_LOG_DIR": str(directory.resolve()),
        "SPARK_LOCAL_DIRS": str((directory / "local").resolve()),
        "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
        "SPARK_NO_DAEMONIZE": "1",
    })
    return env


def _spark_class(main_class: str, *args: str) -> list[str]:
    return [str(spark_home() / "bin" / "spark-class"), main_class, *args]


class SparkMasterProcess(ChildProcess):
    """Spark's standalone master on ``127.0.0.1:<port>``, web UI on ``<webui_port>``."""

    name = "Spark master"

    def __init__(self, directory: Path | str, port: int | None = None,
                 webui_port: int | None = None, *, start_timeout: float = START_TIMEOUT_S,
                 new_session: bool = False) -> None:
        self.directory = Path(directory)
        self.port = port or free_port()
        self.webui_port = webui_port or free_port()
        self.directory.mkdir(parents=True, exist_ok=True)
        super().__init__(self.directory / "master.log", start_timeout, new_session)

    @property
    def url(self) -> str:
        return f"spark://{HOST}:{self.port}"

    @property
    def web_ui_url(self) -> str:
        return f"http://{HOST}:{self.webui_port}"

    def state(self) -> dict[str, Any]:
        """The master's ``/json/`` document: status, workers, applications."""
        doc: dict[str, Any] = get_json(f"{self.web_ui_url}/json/")
        return doc

    def start(self) -> SparkMasterProcess:
        if self.running():
            raise RuntimeError(f"the Spark master is already running (pid {self.pid})")
        (self.directory / "local").mkdir(exist_ok=True)
        args = _spark_class(MASTER_CLASS, "--host", HOST, "--port", str(self.port),
                            "--webui-port", str(self.webui_port))
        self.launch(args, spark_env(self.directory), self.serving, cwd=self.directory)
        return self

    def serving(self) -> bool:
        try:
            return self.state().get("status") == "ALIVE"
        except (OSError, ValueError):
            return False


class SparkWorkerProcess(ChildProcess):
    """A standalone worker offering ``cores`` and ``memory`` to the master's applications."""

    name = "Spark worker"

    def __init__(self, directory: Path | str, master: SparkMasterProcess, *,
                 cores: int = 1, memory: str = "1g", port: int | None = None,
                 webui_port: int | None = None, start_timeout: float = START_TIMEOUT_S,
                 new_session: bool = False) -> None:
        self.directory = Path(directory)
        self.master = master
        self.cores = cores
        self.memory = memory
        self.port = port or free_port()
        self.webui_port = webui_port or free_port()
        self.directory.mkdir(parents=True, exist_ok=True)
        self.work_dir = self.directory / "work"
        super().__init__(self.directory / "worker.log", start_timeout, new_session)

    @property
    def web_ui_url(self) -> str:
        return f"http://{HOST}:{self.webui_port}"

    def start(self) -> SparkWorkerProcess:
        if self.running():
            raise RuntimeError(f"this Spark worker is already running (pid {self.pid})")
        self.work_dir.mkdir(exist_ok=True)
        (self.directory / "local").mkdir(exist_ok=True)
        args = _spark_class(WORKER_CLASS, self.master.url, "--host", HOST,
                            "--port", str(self.port), "--webui-port", str(self.webui_port),
                            "--cores", str(self.cores), "--memory", self.memory,
                            "--work-dir", str(self.work_dir.resolve()))
        self.launch(args, spark_env(self.directory), self.registered, cwd=self.directory)
        return self

    def registered(self) -> bool:
        """True once the master lists this worker ``ALIVE``.  A port taken between
        ``free_port`` and the bind makes Spark try the next one: the log says which."""
        bound = _WORKER_PORT.findall(self.logs())
        if bound:
            self.port = int(bound[-1])
        try:
            workers = self.master.state().get("workers", [])
        except (OSError, ValueError):
            return False
        return any(w.get("port") == self.port and w.get("state") == "ALIVE" for w in workers)

    def executor_pids(self) -> list[int]:
        """The executor JVMs this worker started (its children running the executor class)."""
        if self.pid is None:
            return []
        return [pid for pid, parent, cmdline in _processes()
                if parent == self.pid and EXECUTOR_CLASS in cmdline]

    def kill(self) -> None:
        """SIGKILL the worker and the executors it started (a machine lost at once)."""
        executors = self.executor_pids()
        super().kill()
        for pid in executors:
            _kill(pid)


class SparkStandaloneCluster(Launched):
    """A master and ``workers`` workers on loopback, everything under ``directory``."""

    def __init__(self, directory: Path | str, workers: int = 2, *, cores_per_worker: int = 1,
                 memory_per_worker: str = "1g", master_port: int | None = None,
                 webui_port: int | None = None, new_session: bool = False,
                 start_timeout: float = START_TIMEOUT_S) -> None:
        if workers < 1:
            raise ValueError(f"a Spark cluster needs at least one worker, not {workers}")
        self.directory = Path(directory)
        self.master = SparkMasterProcess(self.directory / "master", master_port, webui_port,
                                         start_timeout=start_timeout, new_session=new_session)
        self.workers = [SparkWorkerProcess(self.directory / f"worker-{i}", self.master,
                                           cores=cores_per_worker, memory=memory_per_worker,
                                           start_timeout=start_timeout,
                                           new_session=new_session)
                        for i in range(1, workers + 1)]

    @property
    def master_url(self) -> str:
        return self.master.url

    @property
    def web_ui_url(self) -> str:
        return self.master.web_ui_url

    def start(self) -> Self:
        try:
            self.master.start()
            for worker in self.workers:
                worker.start()
        except BaseException:
            self.kill()
            raise
        return self

    def stop(self) -> None:
        """SIGTERM the workers (their executors end with them), then the master."""
        for worker in self.workers:
            worker.stop()
        self.master.stop()

    def kill(self) -> None:
        for worker in self.workers:
            worker.kill()
        self.master.kill()

    def executor_pids(self) -> list[int]:
        return [pid for worker in self.workers for pid in worker.executor_pids()]

    def applications(self) -> list[dict[str, Any]]:
        """The master's running applications (id, name, cores, state)."""
        apps: list[dict[str, Any]] = self.master.state().get("activeapps", [])
        return apps

    def describe(self) -> dict[str, Any]:
        return {"master": self.master_url, "web_ui": self.web_ui_url, "pid": self.master.pid,
                "directory": str(self.directory.resolve()),
                "workers": [{"pid": w.pid, "port": w.port, "web_ui": w.web_ui_url,
                             "cores": w.cores, "memory": w.memory} for w in self.workers]}


def _processes() -> list[tuple[int, int, str]]:
    """(pid, parent pid, command line) of every process readable under ``/proc``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        # the command name in (...) may hold spaces and parentheses: split after the last ")"
        fields = stat[stat.rfind(")") + 2:].split()
        found.append((int(entry), int(fields[1]), cmdline))
    return found


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
