"""Run Apache ZooKeeper (Debian's ``zookeeper`` package) as a real child process on loopback.

Cluster mode (``zookeeper.connect``) needs a ZooKeeper server; integration tests, the coming
``millrace cluster up`` and benchmarks start one with this class::

    with ZooKeeperProcess(tmp_path / "zk") as zk:
        KafkaZkClient(zk.connect_string + "/millrace")

Theory of operation:

- The process owns one directory: ``zoo.cfg`` (written at every start), ``data/`` (the
  snapshots and transaction log: a restart on the same directory and port keeps every
  persistent znode and even live sessions, since a standalone server restores sessions
  from its log) and ``zookeeper.log`` (stdout and stderr, appended across restarts).
- The server is ``java -cp <zookeeper.jar>:<slf4j-simple.jar> QuorumPeerMain zoo.cfg``.
  ``zookeeper.jar``'s manifest names its own dependencies, so the class path needs only
  a logging binding.  The broader ``/usr/share/java/*`` also works but puts six SLF4J
  bindings on the path; SLF4J then picks one in directory order (here the no-op one), so
  the log stays empty.  ``slf4j-simple`` writes INFO lines to stderr, hence the log file.
- Ready means the server answers the ``srvr`` four-letter word (the only one enabled by
  default since ZooKeeper 3.5) with a ``Mode:`` line: the port is bound and the
  database loaded.  A TCP connect alone is not enough, it succeeds before the load.
- ``maxSessionTimeout`` is Kafka's ``zookeeper.session.timeout.ms`` default (18000 ms)
  unless asked otherwise: the server clamps every client's requested timeout into
  ``[minSessionTimeout, maxSessionTimeout]`` (defaults 2 and 20 ticks), so a test that
  wants sessions to expire fast lowers both ``tick_time_ms`` and ``max_session_timeout_ms``.
- ``pause``/``resume`` are SIGSTOP/SIGCONT: a frozen server is how a test makes every
  client lose its connection (sessions do not expire while the server is frozen: the
  server's own clock of them stops too).

Thread ownership: one instance is driven from one thread (a test or the launcher).
"""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

from millrace.launcher.broker_process import free_port
from millrace.launcher.child_process import ChildProcess

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
SLF4J_SIMPLE_JAR = Path("/usr/share/java/slf4j-simple.jar")
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
# Kafka's zookeeper.session.timeout.ms default (KIP-537)
DEFAULT_MAX_SESSION_TIMEOUT_MS = 18_000


def zookeeper_classpath() -> str:
    """The class path that starts Debian's ZooKeeper 3.8 with its log on stderr."""
    if not ZOOKEEPER_JAR.exists():
        raise FileNotFoundError(f"{ZOOKEEPER_JAR} is missing: install Debian's zookeeper "
                                "package (scripts/system-deps.sh zookeeper)")
    parts = [str(ZOOKEEPER_JAR)]
    if SLF4J_SIMPLE_JAR.exists():
        parts.append(str(SLF4J_SIMPLE_JAR))
    return ":".join(parts)


def zookeeper_missing() -> str | None:
    """Why ZooKeeper cannot be started here (no java, no Debian package), or None."""
    if shutil.which("java") is None:
        return ("java is not installed (ZooKeeper needs it): install both with "
                "scripts/system-deps.sh java zookeeper")
    if not ZOOKEEPER_JAR.exists():
        return (f"ZooKeeper is not installed ({ZOOKEEPER_JAR} is missing): install it with "
                "scripts/system-deps.sh zookeeper")
    return None


def four_letter_word(host: str, port: int, word: str, timeout: float = 2.0) -> str:
    """Send a ZooKeeper four-letter command (``srvr``, ``ruok`` ...) and return the answer."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(word.encode("ascii"))
        chunks: list[bytes] = []
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", errors="replace")


class ZooKeeperProcess(ChildProcess):
    """A standalone ZooKeeper server on ``127.0.0.1:<port>``, owning ``directory``."""

    name = "ZooKeeper"

    def __init__(self, directory: Path | str, port: int | None = None, *,
                 tick_time_ms: int = 500,
                 max_session_timeout_ms: int = DEFAULT_MAX_SESSION_TIMEOUT_MS,
                 min_session_timeout_ms: int | None = None,
                 start_timeout: float = 30.0, new_session: bool = False) -> None:
        self.directory = Path(directory)
        self.port = port or free_port()
        self.tick_time_ms = tick_time_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.min_session_timeout_ms = (min_session_timeout_ms if min_session_timeout_ms
                                       is not None else 2 * tick_time_ms)
        super().__init__(self.directory / "zookeeper.log", start_timeout, new_session)
        self.data_dir = self.directory / "data"
        self.config_path = self.directory / "zoo.cfg"

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def connect_string(self) -> str:
        """``host:port`` for ``zookeeper.connect`` (append ``/chroot`` as needed)."""
        return f"{self.host}:{self.port}"

    def config(self) -> dict[str, str]:
        """The ``zoo.cfg`` entries, in the order they are written."""
        return {
            "tickTime": str(self.tick_time_ms),
            "dataDir": str(self.data_dir.resolve()),
            "clientPort": str(self.port),
            "clientPortAddress": self.host,
            "admin.enableServer": "false",
            "minSessionTimeout": str(self.min_session_timeout_ms),
            "maxSessionTimeout": str(self.max_session_timeout_ms),
            "maxClientCnxns": "0",
            "4lw.commands.whitelist": "srvr,ruok,stat,cons",
        }

    def start(self) -> ZooKeeperProcess:
        """Start the server (again, on the same port and data) and wait until it serves."""
        if self.running():
            raise RuntimeError(f"ZooKeeper is already running (pid {self.pid})")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(
            "".join(f"{k}={v}\n" for k, v in self.config().items()), encoding="utf-8")
        args = ["java", "-Xms32m", "-Xmx256m", "-cp", zookeeper_classpath(), MAIN_CLASS,
                str(self.config_path.resolve())]
        self.launch(args, os.environ, self.serving, cwd=self.directory)
        return self

    def serving(self) -> bool:
        """True once the server answers ``srvr`` with its mode (the database is loaded)."""
        try:
            return "Mode:" in four_letter_word(self.host, self.port, "srvr", timeout=1.0)
        except OSError:
            return False

    def restart(self) -> ZooKeeperProcess:
        """Stop (SIGTERM) and start again on the same port and data directory."""
        self.stop()
        return self.start()
