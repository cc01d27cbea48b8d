"""A throw-away PostgreSQL server for tests: ``initdb`` + ``pg_ctl`` on a loopback port.

::

    with PostgresServer(tmp_path) as pg:
        psycopg.connect(pg.url)

The server binaries come from ``$MILLRACE_PG_BIN`` or the newest
``/usr/lib/postgresql/<version>/bin`` (Debian's layout; ``scripts/system-deps.sh
postgresql`` installs it), else from ``PATH``.  The cluster trusts loopback connections
from its one superuser, listens on 127.0.0.1 at a free port with its Unix socket in its
own directory, and runs with ``fsync=off`` (tests crash clients, never this server).

PostgreSQL refuses to run as root: when the effective uid is 0, every server command
runs as the ``postgres`` user (``runuser``, else ``su``) and the cluster lives in a fresh
directory under the system temp dir owned by that user (pytest's own temp dirs are
private to root).  ``stop()`` shuts the server down (fast mode) and deletes the cluster.
"""

from __future__ import annotations

import glob
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

from millrace.launcher.broker_process import free_port

SERVER_USER = "postgres"


class PostgresError(RuntimeError):
    """The server could not be set up, started or stopped."""


def server_bin_dir() -> Path:
    """Where ``initdb`` and ``pg_ctl`` live."""
    env = os.environ.get("MILLRACE_PG_BIN")
    if env:
        return Path(env)

    def version(path: str) -> tuple[int, ...]:
        return tuple(int(x) for x in re.findall(r"\d+", Path(path).parent.parent.name))

    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=version)
    if candidates:
        return Path(candidates[-1]).parent
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    raise PostgresError("PostgreSQL server binaries not found (install them with "
                        "scripts/system-deps.sh postgresql, or set MILLRACE_PG_BIN)")


class PostgresServer:
    def __init__(self, tmp_dir: Path | str, database: str = "millrace",
                 user: str = "millrace", port: int | None = None,
                 start_timeout: float = 60.0) -> None:
        self.tmp_dir = Path(tmp_dir)
        self.database = database
        self.user = user
        self.port = port or free_port()
        self.start_timeout = start_timeout
        self.as_server_user = os.geteuid() == 0
        self.root: Path | None = None
        self.running = False

    @property
    def url(self) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{self.database}"

    @property
    def data_dir(self) -> Path:
        assert self.root is not None, "not started"
        return self.root / "data"

    @property
    def log_path(self) -> Path:
        assert self.root is not None, "not started"
        return self.root / "postgres.log"

    def logs(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except (FileNotFoundError, AssertionError):
            return ""

    # ------------------------------------------------------------------ commands
    def _run(self, *args: str, timeout: float = 120.0) -> str:
        cmd = [str(a) for a in args]
        if self.as_server_user:
            if shutil.which("runuser"):
                cmd = ["runuser", "-u", SERVER_USER, "--", *cmd]
            else:
                cmd = ["su", SERVER_USER, "-s", "/bin/sh", "-c", shlex.join(cmd)]
        proc = subprocess.run(cmd, cwd=self.root, capture_output=True, text=True,
                              timeout=timeout, env={**os.environ, "LC_ALL": "C"})
        if proc.returncode != 0:
            raise PostgresError(f"{Path(args[0]).name} failed ({proc.returncode}): "
                                f"{(proc.stderr or proc.stdout).strip()}\n{self.logs()}")
        return proc.stdout

    def _make_root(self) -> Path:
        if not self.as_server_user:
            root = self.tmp_dir / "postgres"
            root.mkdir(parents=True, exist_ok=True)
            return root
        import pwd

        try:
            entry = pwd.getpwnam(SERVER_USER)
        except KeyError:
            raise PostgresError(f"running as root needs the {SERVER_USER!r} user "
                                "(created by the postgresql package)") from None
        root = Path(tempfile.mkdtemp(prefix="millrace-pg-"))
        os.chown(root, entry.pw_uid, entry.pw_gid)
        return root

    # ------------------------------------------------------------------ life cycle
    def start(self) -> PostgresServer:
        bin_dir = server_bin_dir()
        self.root = self._make_root()
        try:
            self._run(str(bin_dir / "initdb"), "-D", str(self.data_dir), "-U", self.user,
                      "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync")
            options = (f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
                       "-c fsync=off -c full_page_writes=off -c synchronous_commit=off")
            self._run(str(bin_dir / "pg_ctl"), "-D", str(self.data_dir), "-l",
                      str(self.log_path), "-o", options, "-w", "-t",
                      str(int(self.start_timeout)), "start", timeout=self.start_timeout + 10)
            self.running = True
            deadline = time.monotonic() + self.start_timeout
            while True:
                try:
                    self._run(str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p",
                              str(self.port), "-U", self.user, self.database)
                    break
                except PostgresError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Shut the server down (fast: open sessions are ended) and delete the cluster."""
        if self.root is None:
            return
        try:
            if self.running:
                self._run(str(server_bin_dir() / "pg_ctl"), "-D", str(self.data_dir), "-m",
                          "fast", "-w", "-t", "60", "stop", timeout=70)
                self.running = False
        finally:
            if not self.running:
                shutil.rmtree(self.root, ignore_errors=True)
                self.root = None

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
