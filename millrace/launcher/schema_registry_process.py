"""``SchemaRegistryProcess``: ``millrace schema-registry`` as a real child process on loopback,
for ``millrace cluster up``, ``millrace demo``, tests and benchmarks::

    with SchemaRegistryProcess(broker.bootstrap, tmp_path / "registry") as registry:
        SchemaRegistryClient({"url": registry.url})

The process owns one directory for its log (``schema-registry.log``, appended across
restarts).  Ready means ``/readyz`` answers 200: the ``_schemas`` topic has been read to its
end and a leader is elected.  ``kill`` is SIGKILL (a crash at any instant), ``stop`` SIGTERM.
``properties`` are registry settings (Confluent's names, e.g. ``kafkastore.security.protocol``
or ``authentication.method``), passed as ``--override``.

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

    def command(self) -> list[str]:
        args = [sys.executable, "-m", "millrace.cli.main", "schema-registry",
                "--bootstrap-server", self.bootstrap_servers,
                "--listen", f"{self.scheme}://127.0.0.1:{self.port}"]
        for key, value in self.properties.items():
            args += ["--override", f"{key}={value}"]
        return args

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/readyz", timeout=2,
                                        context=self.tls_context) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def start(self) -> SchemaRegistryProcess:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.launch(self.command(), env, self.ready, cwd=self.directory)
        return self
