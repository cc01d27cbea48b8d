"""Run ``millrace broker`` as a real child process on a free loopback port.

Used by the demo's embedded broker, by integration, compatibility and crash tests and by
benchmarks (those import it through ``millrace.testing.broker_process``)::

    with BrokerProcess(tmp_path) as broker:
        Producer({"bootstrap.servers": broker.bootstrap})

``cgroup`` (a cgroup v2 directory) starts the broker inside that control group, at every
start.  On one machine every broker talks over loopback and its outgoing connections come
from ephemeral ports, so a port alone cannot say which broker sent a packet; the socket's
cgroup can (nftables ``socket cgroupv2``), which is how the network faults of
``millrace.testing.faults.network`` cut one broker off.  A socket belongs to the cgroup
its process was in when it was created, so the broker has to be in it before it opens
its first socket: a shell joins the cgroup and then ``exec``s the broker (same pid).

``http=True`` (or an ``http_port``) turns on the broker's HTTP listener
(``http.listeners=http://127.0.0.1:<port>``: ``/metrics``, ``/healthz``, ``/readyz``) on a
port chosen here like the Kafka port -- a free one, kept across restarts, so a scrape
config written once stays right.  After each start ``http_urls`` holds what the broker
said it serves in its started line (the truth even when ``overrides`` set
``http.listeners`` themselves, port 0 included); ``http_url`` is the first of them.
"""

from __future__ import annotations

import os
import re
import socket
import sys
from pathlib import Path

from millrace.launcher.child_process import ChildProcess

STARTED = b"started; cluster.id"
# the started line ends with " <url>/metrics" per HTTP listener (millrace.broker.server)
_HTTP_URL = re.compile(r" (https?://\S+)/metrics\b")


def free_port(avoid: int | None = None) -> int:
    """A port nobody listens on now on 127.0.0.1 (other than ``avoid``, one chosen
    already for the same broker and not yet bound)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port != avoid:
            return port


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """True when ``host:port`` cannot be bound now (another process listens there)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


class BrokerProcess(ChildProcess):
    name = "broker"

    def __init__(self, data_dir: Path | str, port: int | None = None,
                 overrides: dict[str, str] | None = None, start_timeout: float = 30.0,
                 *, new_session: bool = False, env: dict[str, str] | None = None,
                 cgroup: Path | None = None, listener_protocol: str = "PLAINTEXT",
                 log_level: str | None = None, http: bool = False,
                 http_port: int | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.log_level = log_level  # `millrace broker --log-level` (None: its default)
        self.listener_protocol = listener_protocol
        self.env = dict(env or {})  # added to this process's environment
        self.cgroup = cgroup
        self.port = port or free_port()
        # the HTTP listener's port: off (None) unless asked for
        self.http_port = http_port or (free_port(avoid=self.port) if http else None)
        http_listeners = ({"http.listeners": f"http://127.0.0.1:{self.http_port}"}
                          if self.http_port is not None else {})
        self.http_urls: list[str] = []  # read back from the started line (``start``)
        self.overrides = {
            "listeners": f"{listener_protocol}://127.0.0.1:{self.port}",
            **http_listeners,
            "log.dirs": str(self.data_dir / "logs"),
            "offsets.topic.num.partitions": "4",
            "group.initial.rebalance.delay.ms": "0",
            **(overrides or {}),
        }
        super().__init__(self.data_dir / "broker.log", start_timeout, new_session)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def http_url(self) -> str | None:
        """The broker's first HTTP listener (``<url>/metrics`` is its scrape target); None
        when it has none.  Before the first start: the URL it is configured with."""
        if self.http_urls:
            return self.http_urls[0]
        return f"http://127.0.0.1:{self.http_port}" if self.http_port is not None else None

    def start(self) -> BrokerProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        args = [sys.executable, "-m", "millrace.cli.main", "broker"]
        if self.log_level is not None:
            args += ["--log-level", self.log_level]
        for k, v in self.overrides.items():
            args += ["--override", f"{k}={v}"]
        if self.cgroup is not None:
            # $0 is the cgroup directory, "$@" the broker's command line
            args = ["/bin/sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"',
                    str(self.cgroup), *args]
        # broker.log is appended to across restarts: only look past what is there now.
        seen = self.log_path.stat().st_size if self.log_path.exists() else 0
        started: list[bytes] = []

        def ready() -> bool:
            complete = self.log_path.read_bytes()[seen:].split(b"\n")[:-1]
            line = next((ln for ln in complete if STARTED in ln), None)
            if line is not None:
                started.append(line)
            return line is not None

        self.launch(args, {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}, ready)
        self.http_urls = _HTTP_URL.findall(started[-1].decode(errors="replace"))
        return self
