"""A full disk under one broker's log dir (the fault ``disk-full``).

The broker's ``log.dirs`` (``<cluster dir>/broker-<id>/logs``) gets a file system of its
own, a small tmpfs (``mount_small_log_dir``, before the cluster starts: mounting over a
live log dir would hide its files from the broker), so that filling it harms nothing
else on the machine.  ``DiskFull.inject`` fills it: a filler file
(``.millrace-disk-full-filler``, which the broker's log manager ignores) written until
the kernel answers ENOSPC.  The broker's next write in the dir -- an append, a
follower's fetch, a segment roll, the checkpoint it writes every second -- fails;
its log dir goes offline and the broker stops (exit status 1, "Shutdown broker because
all log dirs in ... have failed"), so the controller moves its leadership and drops it
from the ISRs.  ``inject`` returns once that happened (or after a bound).  ``heal``
deletes the filler and starts the broker again on its files, which it recovers.

A tmpfs lives in memory: its files survive a broker restart but not ``umount``, which
``unmount_small_log_dir`` does at the end of a run (after the brokers stopped).

Needs root (or CAP_SYS_ADMIN) for ``mount``; without it ``mount_small_log_dir`` raises
``DiskFaultError`` saying so.  ``DiskFull`` refuses to fill a log dir that is not a mount
point of its own, so it never fills the machine's real disk.
"""

from __future__ import annotations

import errno
import os
import subprocess
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from millrace.launcher.local_cluster import LocalCluster
from millrace.testing.faults.nemesis import Fault, NemesisContext, NemesisError, register

DEFAULT_SIZE = 64 * 1024 * 1024
FILLER = ".millrace-disk-full-filler"
FAILURE_LINE = "Shutdown broker because"
_CHUNK = 1024 * 1024


class DiskFaultError(Exception):
    """A small log dir could not be mounted or unmounted (the message says why)."""


def mount_small_log_dir(cluster: LocalCluster, broker_id: int,
                        size: int = DEFAULT_SIZE) -> Path:
    """Mount a ``size``-byte tmpfs at broker ``broker_id``'s log dir; call it after
    constructing ``cluster`` and before ``start()``.  Returns the log dir."""
    if broker_id in cluster.brokers and cluster.running(broker_id):
        raise DiskFaultError(f"broker {broker_id} is running: mount its log dir before "
                             "it starts")
    return mount_tmpfs(cluster.log_dir(broker_id), size)


def mount_tmpfs(path: Path, size: int = DEFAULT_SIZE) -> Path:
    """Mount a ``size``-byte tmpfs at ``path`` (created if missing, and empty); the
    building block of ``mount_small_log_dir``, also for a lone ``BrokerProcess``."""
    if size < 1024 * 1024:
        raise ValueError(f"a log dir needs at least 1 MiB, got {size} bytes")
    path.mkdir(parents=True, exist_ok=True)
    if os.path.ismount(path):
        raise DiskFaultError(f"{path} is already a mount point")
    if any(path.iterdir()):
        raise DiskFaultError(f"{path} is not empty: a tmpfs mounted there would hide its "
                             "files from the broker")
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755",
                             "tmpfs", str(path)], capture_output=True, text=True)
    if result.returncode != 0:
        raise DiskFaultError(
            f"cannot mount a {size}-byte tmpfs at {path} (needs root or CAP_SYS_ADMIN): "
            f"{(result.stderr or result.stdout).strip()}")
    return path


def unmount_small_log_dir(path: Path | str) -> None:
    """Unmount a log dir mounted by ``mount_small_log_dir`` (its files are gone after).
    Stop the broker first; a busy file system is detached lazily rather than left."""
    path = Path(path)
    if not os.path.ismount(path):
        return
    result = subprocess.run(["umount", str(path)], capture_output=True, text=True)
    if result.returncode != 0:
        lazy = subprocess.run(["umount", "-l", str(path)], capture_output=True, text=True)
        if lazy.returncode != 0:
            raise DiskFaultError(f"cannot unmount {path}: {result.stderr.strip()}; "
                                 f"umount -l: {lazy.stderr.strip()}")


@contextmanager
def small_log_dirs(cluster: LocalCluster, brokers: Iterable[int],
                   size: int = DEFAULT_SIZE) -> Iterator[dict[int, Path]]:
    """Mount small log dirs for ``brokers`` of a not yet started ``cluster``; at exit
    kill whatever of the cluster still runs and unmount them all."""
    mounted: dict[int, Path] = {}
    try:
        for b in brokers:
            mounted[b] = mount_small_log_dir(cluster, b, size)
        yield mounted
    finally:
        cluster.kill_all()
        errors = []
        for path in mounted.values():
            try:
                unmount_small_log_dir(path)
            except DiskFaultError as e:
                errors.append(str(e))
        if errors:
            raise DiskFaultError("; ".join(errors))


def small_log_dir(cluster: LocalCluster, broker_id: int) -> Path:
    """Broker ``broker_id``'s log dir if it is a file system of its own (one that may be
    filled); NemesisError otherwise, so that the machine's own disk is never filled."""
    log_dir = cluster.log_dir(broker_id)
    if not os.path.ismount(log_dir):
        raise NemesisError(f"broker {broker_id}'s log dir {log_dir} is not a small file "
                           "system of its own (mount_small_log_dir before the cluster "
                           "starts); refusing to fill the machine's disk")
    return log_dir


def fill(directory: Path) -> int:
    """Write ``directory/FILLER`` until the file system is full (ENOSPC); returns the
    bytes written.  Any other error is raised."""
    written = 0
    fd = os.open(directory / FILLER, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        chunk = b"\0" * _CHUNK
        size = _CHUNK
        while size:
            try:
                written += os.write(fd, chunk[:size])
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                size //= 16  # the last blocks: smaller writes until not even 1 byte fits
    finally:
        os.close(fd)
    return written


def free(directory: Path) -> bool:
    """Delete the filler; True if there was one."""
    try:
        os.unlink(directory / FILLER)
    except FileNotFoundError:
        return False
    return True


class DiskFull(Fault):
    """Fill the log dir of a leader or a follower (``role``: "leader", "follower" or
    "any", drawn with the seeded rng) of a random partition; heal by freeing the space
    and restarting the broker."""

    def __init__(self, role: str = "any", exit_timeout_s: float = 60.0) -> None:
        if role not in ("any", "leader", "follower"):
            raise ValueError(f"role must be 'any', 'leader' or 'follower', got {role!r}")
        self.role = role
        self.name = "disk-full" if role == "any" else f"disk-full-{role}"  # type: ignore[misc]
        self.exit_timeout_s = exit_timeout_s
        self.victim = -1
        self.log_dir: Path | None = None

    def inject(self, ctx: NemesisContext) -> str:
        role = self.role if self.role != "any" else ctx.rng.choice(("leader", "follower"))
        self.victim, what = ctx.random_leader() if role == "leader" else ctx.random_follower()
        log_dir = self.log_dir = small_log_dir(ctx.cluster, self.victim)
        broker = ctx.cluster.broker(self.victim)
        seen = broker.log_path.stat().st_size if broker.log_path.exists() else 0
        written = fill(log_dir)
        # The broker's own writes (at least its checkpoint every second) meet the full disk;
        # wait until it has stopped, so the fault is in effect when inject returns.
        deadline = time.monotonic() + self.exit_timeout_s
        while ctx.cluster.running(self.victim) and time.monotonic() < deadline:
            time.sleep(0.1)
        if ctx.cluster.running(self.victim):
            outcome = f"still running after {self.exit_timeout_s:.0f}s"
        else:
            assert broker.proc is not None
            outcome = f"exited with status {broker.proc.returncode}"
            tail = broker.log_path.read_bytes()[seen:].decode(errors="replace")
            line = next((ln for ln in tail.splitlines() if FAILURE_LINE in ln), None)
            if line is not None:
                outcome += f" ({line[line.index(FAILURE_LINE):][:200]})"
        return (f"filled the log dir of broker {self.victim} ({what}) with {written} bytes; "
                f"broker {outcome}")

    def heal(self, ctx: NemesisContext) -> None:
        if self.log_dir is not None:
            free(self.log_dir)
        if self.victim >= 0 and not ctx.cluster.running(self.victim):
            ctx.cluster.restart_broker(self.victim)


register("disk-full", DiskFull)
register("disk-full-leader", lambda: DiskFull("leader"))
register("disk-full-follower", lambda: DiskFull("follower"))
