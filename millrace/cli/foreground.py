"""Servers run in the foreground by a command (``cluster up``, ``spark up``) until a signal.

The children run in sessions of their own, so the terminal's Ctrl-C reaches only the
command; ``Signals`` counts SIGINT/SIGTERM instead of raising, so stopping is never
interrupted half-way.  ``watch`` waits for the first signal and says on stderr when a child
exits on its own; ``stop_in_order`` sends each child SIGTERM in turn and waits for it, and
a further signal (or a child that ignores SIGTERM for the timeout) ends the clean stop so
the caller kills what is left.

Thread ownership: the command's main thread (signal handlers run there too).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, Protocol

WATCH_INTERVAL_S = 0.2


class Signals:
    """SIGINT/SIGTERM counted instead of raised, so stopping is never interrupted half-way."""

    def __init__(self) -> None:
        self.count = 0
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1

    def __enter__(self) -> Signals:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


class Server(Protocol):
    """A launcher object: its process (None before the first start) is ``proc``."""

    @property
    def proc(self) -> subprocess.Popen[bytes] | None: ...


@dataclass
class Child:
    """One server the command stops, and the exit codes that mean a clean stop."""

    name: str
    server: Server
    log_path: Path
    good_exit: tuple[int, ...] = (0,)
    stopping_note: str = ""  # e.g. " (controlled shutdown)"


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def watch(children: Sequence[Child], signals: Signals) -> None:
    """Wait for a signal; say so when a child exits on its own."""
    reported: set[str] = set()
    while not signals.count:
        for child in children:
            proc = child.server.proc
            if child.name not in reported and proc is not None and proc.poll() is not None:
                reported.add(child.name)
                say(f"{child.name} exited with code {proc.returncode}; see {child.log_path}")
        time.sleep(WATCH_INTERVAL_S)


def terminate(proc: subprocess.Popen[bytes] | None, signals: Signals, seen: int,
              timeout_s: float) -> int | None:
    """SIGTERM and wait; None when a further signal or the timeout came first."""
    if proc is None or proc.poll() is not None:
        return proc.returncode if proc is not None else 0
    proc.send_signal(signal.SIGCONT)  # a paused child would never see the SIGTERM
    proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while proc.poll() is None:
        if signals.count > seen or time.monotonic() > deadline:
            return None
        time.sleep(0.05)
    return proc.returncode


def stop_in_order(children: Sequence[Child], signals: Signals, timeout_s: float = 60.0) -> bool:
    """SIGTERM each running child in turn and wait for it.  True when every one exited
    with one of its good codes; False at once on a further signal or a timeout (the caller
    then kills what is left)."""
    seen = signals.count
    clean = True
    for child in children:
        proc = child.server.proc
        if proc is None or proc.poll() is not None:
            continue
        say(f"stopping {child.name}{child.stopping_note} ...")
        code = terminate(proc, signals, seen, timeout_s)
        if code is None:
            say("second signal: killing what is left" if signals.count > seen
                else f"{child.name} ignored SIGTERM for {timeout_s:.0f} s: killing what is left")
            return False
        if code not in child.good_exit:
            say(f"{child.name} exited with code {code}; see {child.log_path}")
            clean = False
    return clean


def start_or_explain(start: Callable[[], object], kill: Callable[[], None], what: str,
                     directory: Path) -> None:
    """``start()``; on a failure, kill what started and raise one line naming the logs."""
    from millrace.cli.common import CommandError

    try:
        start()
    except (RuntimeError, OSError) as e:
        kill()
        raise CommandError(f"{what} did not start: {str(e).splitlines()[0]} "
                           f"(logs in {directory})") from None


def serve_until_signal(children: Sequence[Child], signals: Signals,
                       kill: Callable[[], None]) -> bool:
    """``watch`` until a signal, then ``stop_in_order`` and ``kill`` whatever is left
    (everything, at once, if watching itself fails).  True when the stop was clean."""
    try:
        watch(children, signals)
    except BaseException:
        kill()
        raise
    clean = stop_in_order(children, signals)
    kill()
    return clean
