"""Run ``millrace broker`` as a real child process on a free loopback port.

Used by the demo's embedded broker, by integration, compatibility and crash tests and by
benchmarks (those import it through ``millrace.testing.broker_process``)::

    with BrokerProcess(tmp_path) as broker:
        Producer({"bootstrap.servers": broker.bootstrap})
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """True when ``host:port`` cannot be bound now (another process listens there)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


class BrokerProcess:
    def __init__(self, data_dir: Path | str, port: int | None = None,
                 overrides: dict[str, str] | None = None, start_timeout: float = 30.0,
                 *, new_session: bool = False) -> None:
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.overrides = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.data_dir / "logs"),
            "offsets.topic.num.partitions": "4",
            "group.initial.rebalance.delay.ms": "0",
            **(overrides or {}),
        }
        self.start_timeout = start_timeout
        # new_session: the child leads its own session, so a Ctrl-C at the terminal reaches
        # only the parent, which then stops the children in its own order (cluster up)
        self.new_session = new_session
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = self.data_dir / "broker.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> BrokerProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        args = [sys.executable, "-m", "millrace.cli.main", "broker"]
        for k, v in self.overrides.items():
            args += ["--override", f"{k}={v}"]
        # broker.log is appended to across restarts: only look past what is there now.
        seen = self.log_path.stat().st_size if self.log_path.exists() else 0
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        try:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                         env={**os.environ, "PYTHONUNBUFFERED": "1"},
                                         start_new_session=self.new_session)
        finally:
            log.close()
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{self.logs()}")
            if b"started; cluster.id" in self.log_path.read_bytes()[seen:]:
                return self
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"broker did not start within {self.start_timeout}s:\n{self.logs()}")

    def logs(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait: a clean shutdown."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
            raise RuntimeError(f"broker ignored SIGTERM for {timeout}s:\n{self.logs()}") from None

    def kill(self) -> None:
        """SIGKILL: a crash at an arbitrary instant."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        if et is not None:
            self.kill()
        else:
            self.stop()
