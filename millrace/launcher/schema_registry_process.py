"""``SchemaRegistryProcess``: ``millrace schema-registry`` as a real child process on loopback,
for ``millrace cluster up``, ``millrace demo``, tests and benchmarks::

    with SchemaRegistryProcess(broker.bootstrap, tmp_path / "registry") as registry:
        SchemaRegistryClient({"url": registry.url})

The process owns one directory for its log (``schema-registry.log``, appended across
restarts).  Ready means ``/readyz`` answers 200: the ``_schemas`` topic has been read to its
end and a leader is elected.  ``kill`` is SIGKILL (a crash at any instant), ``stop`` SIGTERM.
``properties`` are registry settings (Confluent's names, e.g. ``kafkastore.security.protocol``
or ``authentication.method``), written to ``schema-registry.properties`` (0600) in the
directory and passed as ``--config``: never on the command line, where any user sees them.

Thread ownership: one instance is driven from one thread.
"""

from __future__ import annotations

import os
import ssl
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from millrace.launcher.broker_process import free_port
from millrace.launcher.child_process import ChildProcess

START_TIMEOUT_S = 120.0


class SchemaRegistryProcess(ChildProcess):
    name = "schema registry"

    def __init__(self, bootstrap_servers: str, directory: Path | str, port: int | None = None,
                 *, properties: Mapping[str, str] | None = None, scheme: str = "http",
                 tls_context: ssl.SSLContext | None = None, new_session: bool = False) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        super().__init__(self.directory / "schema-registry.log", START_TIMEOUT_S, new_session)
        self.bootstrap_servers = bootstrap_servers
        self.port = port or free_port()
        self.scheme = scheme
        self.properties = dict(properties or {})
        self.tls_context = tls_context

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    @property
    def config_path(self) -> Path:
        return self.directory / "schema-registry.properties"

    def write_config(self) -> None:
        """The properties in a 0600 file, never on the command line (they may hold the
        registry's Kafka password, and every user can read a process's arguments)."""
        for key, value in self.properties.items():
            if "\n" in value or "\r" in value or value.endswith("\\"):
                raise ValueError(f"{key}: a value with a line break or a trailing backslash "
                                 "does not fit a properties line")
        fd = os.open(self.config_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write("# written by SchemaRegistryProcess at every start\n")
            for key, value in self.properties.items():
                f.write(f"{key}={value}\n")

    def command(self) -> list[str]:
        return [sys.executable, "-m", "millrace.cli.main", "schema-registry",
                "--bootstrap-server", self.bootstrap_servers,
                "--listen", f"{self.scheme}://127.0.0.1:{self.port}",
                "--config", str(self.config_path)]

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/readyz", timeout=2,
                                        context=self.tls_context) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def start(self) -> SchemaRegistryProcess:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.write_config()
        self.launch(self.command(), env, self.ready, cwd=self.directory)
        return self
