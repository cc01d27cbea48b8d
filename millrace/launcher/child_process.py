"""``ChildProcess``: what the launchers share about one server child process.

A server (``millrace broker``, ZooKeeper) runs with its output appended to a log file;
``launch`` starts it and waits until a ``ready`` check passes (or the child exits, or the
start timeout passes: both raise with the log); ``stop`` is SIGTERM and wait (a paused
child is resumed first, or it would never see the signal); ``kill`` is SIGKILL, a crash
at an arbitrary instant; ``pause`` / ``resume`` are SIGSTOP / SIGCONT.  As a context
manager (``Launched``, which a whole Spark cluster is too) it starts, and stops cleanly on
success or kills on an exception.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Self


class Launched:
    """Started on entering a ``with`` block; stopped cleanly on leaving it, or killed when
    the block raised (a test that failed half-way leaves nothing running)."""

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> object:
        raise NotImplementedError

    def kill(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        if et is not None:
            self.kill()
        else:
            self.stop()


class ChildProcess(Launched):
    name = "child"  # what error messages call it

    def __init__(self, log_path: Path, start_timeout: float, new_session: bool) -> None:
        self.log_path = log_path
        self.start_timeout = start_timeout
        # new_session: the child leads its own session, so a Ctrl-C at the terminal
        # reaches only the parent, which then stops the children in its own order
        self.new_session = new_session
        self.proc: subprocess.Popen[bytes] | None = None

    def launch(self, args: list[str], env: Mapping[str, str], ready: Callable[[], bool],
               cwd: Path | None = None) -> None:
        """Start ``args`` with output appended to the log; return once ``ready()``."""
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        try:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, cwd=cwd, env=dict(env),
                                         start_new_session=self.new_session)
        finally:
            log.close()
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n"
                                   f"{self.logs()}")
            if ready():
                return
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"{self.name} did not start within {self.start_timeout}s:\n"
                           f"{self.logs()}")

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def logs(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait: a clean shutdown."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.resume()  # a stopped process would never see the SIGTERM
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
            raise RuntimeError(f"{self.name} ignored SIGTERM for {timeout}s:\n"
                               f"{self.logs()}") from None

    def kill(self) -> None:
        """SIGKILL: a crash at an arbitrary instant."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def pause(self) -> None:
        """SIGSTOP: the server freezes with its sockets open (clients time out)."""
        if self.running():
            assert self.proc is not None
            self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after ``pause``."""
        if self.running():
            assert self.proc is not None
            self.proc.send_signal(signal.SIGCONT)
