"""``ConsoleProcess``: ``millrace console`` as a real child process, for tests, ``millrace
cluster up`` and anyone scripting a cluster::

    with ConsoleProcess(cluster.bootstrap, tmp_path / "console") as console:
        urllib.request.urlopen(console.url + "api/state")

The process owns one directory for its log (``console.log``).  Ready means ``/healthz``
answers.  Client settings (``client_properties``: security.protocol, sasl.*, ssl.*) go
into ``client.properties`` (0600) in the directory and are passed as ``--command-config``,
never on the command line; so does a login token (``token.txt``, 0600, ``--token-file``)
when ``host`` is not loopback.

Thread ownership: one instance is driven from one thread.
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from millrace.launcher.broker_process import free_port
from millrace.launcher.child_process import ChildProcess

START_TIMEOUT_S = 60.0


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


class ConsoleProcess(ChildProcess):
    name = "console"

    def __init__(self, bootstrap_servers: str, directory: Path | str, port: int | None = None,
                 *, host: str = "127.0.0.1", read_only: bool = False,
                 token: str | None = None, interval_s: float = 1.0,
                 protocol_only: bool = False,
                 client_properties: Mapping[str, str] | None = None,
                 new_session: bool = False, otlp_endpoint: str | None = None) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        super().__init__(self.directory / "console.log", START_TIMEOUT_S, new_session)
        self.bootstrap_servers = bootstrap_servers
        self.host = host
        self.port = port or free_port()
        self.read_only = read_only
        self.token = token
        self.interval_s = interval_s
        self.protocol_only = protocol_only
        self.client_properties = dict(client_properties or {})
        self.otlp_endpoint = otlp_endpoint   # --otlp, exporting there

    @property
    def url(self) -> str:
        """The URL to open (loopback even when bound to every address)."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}/"

    def command(self) -> list[str]:
        args = [sys.executable, "-m", "millrace.cli.main", "console",
                "--bootstrap-server", self.bootstrap_servers,
                "--listen", f"{self.host}:{self.port}", "--interval", str(self.interval_s)]
        if self.client_properties:
            path = self.directory / "client.properties"
            _write_private(path, "".join(f"{k}={v}\n"
                                         for k, v in self.client_properties.items()))
            args += ["--command-config", str(path)]
        if self.token is not None:
            path = self.directory / "token.txt"
            _write_private(path, self.token + "\n")
            args += ["--token-file", str(path)]
        if self.read_only:
            args.append("--read-only")
        if self.protocol_only:
            args.append("--protocol-only")
        if self.otlp_endpoint is not None:
            args.append("--otlp")
        return args

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "healthz", timeout=2) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def start(self) -> ConsoleProcess:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        if self.otlp_endpoint is not None:
            env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = self.otlp_endpoint
        self.launch(self.command(), env, self.ready, cwd=self.directory)
        return self
