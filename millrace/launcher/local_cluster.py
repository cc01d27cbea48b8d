"""``LocalCluster``: ZooKeeper and N ``millrace broker`` processes on this machine.

The development cluster of ``millrace cluster up`` and the fixture of the cluster and
fault tests: one ZooKeeper server on loopback, brokers 1..N registered under a chroot
(``/millrace``), each with its own log dir under ``directory/broker-<id>`` and its own port
(``base_port + id - 1``, or free ports).  Brokers can be stopped cleanly (SIGTERM:
controlled shutdown), killed (SIGKILL), paused and resumed (SIGSTOP / SIGCONT) and
restarted on the same port and log dir, which is what the fault scenarios need.

``broker_cgroups`` (a cgroup v2 directory, made by the caller) runs broker ``id`` in its
child cgroup ``broker-<id>`` (created here), across restarts too: the network faults tell
one broker's packets from another's by that cgroup (see ``BrokerProcess``).

``security`` (a ``DevSecurity``) makes a secured cluster: every broker's only listener is
SASL_SSL (inter-broker traffic included), and the SCRAM users are written into ZooKeeper
before the first broker starts; ``client_properties`` is then what a client needs.
``authorizer=True`` (secured clusters only) adds Kafka's ACL authorizer to every broker
with ``admin`` as super user (``DevSecurity.authorizer_overrides``).  No ACL is granted
here: the ``client`` user can do nothing until someone grants it ACLs as admin.  A
PLAINTEXT cluster with the authorizer is refused -- every connection's principal would be
``User:ANONYMOUS``, so no ACL could tell one client from another.

HTTP.  With ``http=True`` (the default) every broker also serves ``/metrics``,
``/healthz`` and ``/readyz`` on an HTTP listener of its own (``http.listeners``), on
``http_base_port + id - 1`` or a free port, kept across restarts; ``http_urls()`` maps
each broker to its URL and ``write_prometheus_config()`` writes a Prometheus scrape config
(``<directory>/prometheus.yml``) with every broker as a target.  It costs nothing
measurable at start-up (a broker starts in the same ~1 s either way).

A real deployment runs ``millrace broker`` with ``zookeeper.connect`` on each machine
against an existing ZooKeeper ensemble instead.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from urllib.parse import urlsplit

from millrace.launcher.broker_process import BrokerProcess, free_port
from millrace.launcher.dev_security import ADMIN_USER, DevSecurity
from millrace.launcher.zookeeper_process import ZooKeeperProcess

CHROOT = "/millrace"
PROMETHEUS_CONFIG = "prometheus.yml"
PROMETHEUS_JOB = "millrace"


def prometheus_config(urls: dict[int, str], directory: Path,
                      basic_auth: tuple[str, Path] | None = None) -> str:
    """A ready ``prometheus.yml``: one scrape job, ``PROMETHEUS_JOB``, with each broker's
    ``host:port`` as a target labelled ``broker_id`` (YAML written by hand: every value is
    a number, a URL's host:port or a path, none needs quoting beyond what is done here)."""
    lines = [f"# Prometheus scrape config for the millrace cluster in {directory}",
             "# (written by millrace cluster up; run: prometheus --config.file=<this file>,",
             "# or copy the job under scrape_configs into your own configuration)",
             "global:",
             "  scrape_interval: 15s",
             "scrape_configs:",
             f"  - job_name: {PROMETHEUS_JOB}"]
    schemes = {urlsplit(url).scheme for url in urls.values()}
    if schemes == {"https"}:
        lines.append("    scheme: https")
    if basic_auth is not None:  # a secured cluster: (user, file holding the password)
        lines += ["    basic_auth:", f"      username: {basic_auth[0]}",
                  f"      password_file: {basic_auth[1]}"]
    lines += ["    metrics_path: /metrics",
              "    static_configs:" if urls else "    static_configs: []"]
    for broker_id, url in sorted(urls.items()):
        lines += [f'      - targets: ["{urlsplit(url).netloc}"]',
                  "        labels:",
                  f'          broker_id: "{broker_id}"']
    return "\n".join(lines) + "\n"


class LocalCluster:
    def __init__(self, directory: Path | str, brokers: int = 3, *, base_port: int | None = None,
                 zookeeper_port: int | None = None, overrides: dict[str, str] | None = None,
                 broker_overrides: dict[int, dict[str, str]] | None = None,
                 start_timeout: float = 60.0, new_session: bool = False,
                 env: dict[str, str] | None = None,
                 broker_cgroups: Path | None = None,
                 security: DevSecurity | None = None, authorizer: bool = False,
                 http: bool = True, http_base_port: int | None = None) -> None:
        if brokers < 1:
            raise ValueError(f"a cluster needs at least one broker, got {brokers}")
        if authorizer and security is None:
            raise ValueError("the authorizer needs a secured cluster (security=DevSecurity): "
                             "on PLAINTEXT every client is User:ANONYMOUS and no ACL could "
                             "tell them apart")
        self.directory = Path(directory)
        # new_session: children in sessions of their own, out of reach of the terminal's
        # Ctrl-C, so that the caller stops them one at a time (``millrace cluster up``)
        self._new_session = new_session
        self.zookeeper = ZooKeeperProcess(self.directory / "zookeeper", zookeeper_port,
                                          new_session=new_session)
        self._overrides = dict(overrides or {})
        self._per_broker = broker_overrides or {}
        self._base_port = base_port
        self._start_timeout = start_timeout
        self._env = dict(env or {})  # added to every broker's environment
        self._broker_cgroups = Path(broker_cgroups) if broker_cgroups is not None else None
        self.brokers: dict[int, BrokerProcess] = {}
        self._count = brokers
        self.security = security
        self.authorizer = authorizer
        self.http = http
        self._http_base_port = http_base_port

    @property
    def zookeeper_connect(self) -> str:
        return self.zookeeper.connect_string + CHROOT

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for _, b in sorted(self.brokers.items()))

    def _broker(self, broker_id: int) -> BrokerProcess:
        port = self._base_port + broker_id - 1 if self._base_port else free_port()
        overrides = {
            "node.id": str(broker_id),
            "zookeeper.connect": self.zookeeper_connect,
            **(self.security.broker_overrides() if self.security is not None else {}),
            **(DevSecurity.authorizer_overrides() if self.authorizer else {}),
            **self._overrides,
            **self._per_broker.get(broker_id, {}),
        }
        cgroup = self.broker_cgroup(broker_id)
        if cgroup is not None:
            cgroup.mkdir(exist_ok=True)
        http_port = (self._http_base_port + broker_id - 1
                     if self.http and self._http_base_port else None)
        return BrokerProcess(self.directory / f"broker-{broker_id}", port, overrides,
                             start_timeout=self._start_timeout, new_session=self._new_session,
                             env=self._env, cgroup=cgroup,
                             listener_protocol="SASL_SSL" if self.security else "PLAINTEXT",
                             http=self.http, http_port=http_port)

    def broker_cgroup(self, broker_id: int) -> Path | None:
        """The cgroup v2 directory broker ``broker_id`` runs in (None: no ``broker_cgroups``)."""
        if self._broker_cgroups is None:
            return None
        return self._broker_cgroups / f"broker-{broker_id}"

    def log_dir(self, broker_id: int) -> Path:
        """Broker ``broker_id``'s ``log.dirs`` (known before the cluster starts, so a fault
        can put a file system of its own there first)."""
        overrides = {**self._overrides, **self._per_broker.get(broker_id, {})}
        configured = overrides.get("log.dirs")
        if configured:
            return Path(configured.split(",")[0])
        return self.directory / f"broker-{broker_id}" / "logs"

    def broker_port(self, broker_id: int) -> int | None:
        """The port broker ``broker_id`` will listen on (None: a free one, chosen at start)."""
        return self._base_port + broker_id - 1 if self._base_port else None

    def http_urls(self) -> dict[int, str]:
        """Broker id -> the URL of its HTTP listener (``<url>/metrics``, ``/healthz``,
        ``/readyz``), for the brokers that have one."""
        return {broker_id: b.http_url for broker_id, b in sorted(self.brokers.items())
                if b.http_url is not None}

    def write_prometheus_config(self, path: Path | None = None) -> Path:
        """A Prometheus configuration scraping every broker's ``/metrics`` (one target per
        broker, labelled ``broker_id``), written to ``path`` (default
        ``<directory>/prometheus.yml``); its path."""
        path = path or self.directory / PROMETHEUS_CONFIG
        auth = None
        if self.security is not None:  # its HTTP listeners want basic credentials
            auth = (ADMIN_USER, self.security.write_password_file(ADMIN_USER))
        path.write_text(prometheus_config(self.http_urls(), self.directory, auth))
        return path

    def start(self) -> LocalCluster:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.zookeeper.start()
        try:
            if self.security is not None:
                self.security.create_users(self.zookeeper_connect)
            for broker_id in range(1, self._count + 1):
                self.brokers[broker_id] = self._broker(broker_id).start()
        except BaseException:
            self.kill_all()
            raise
        return self

    # ------------------------------------------------------------------ one broker
    def broker(self, broker_id: int) -> BrokerProcess:
        return self.brokers[broker_id]

    def stop_broker(self, broker_id: int, timeout: float = 60.0) -> int:
        """SIGTERM: controlled shutdown, then exit."""
        return self.brokers[broker_id].stop(timeout)

    def kill_broker(self, broker_id: int) -> None:
        """SIGKILL: a crash at an arbitrary instant."""
        self.brokers[broker_id].kill()

    def restart_broker(self, broker_id: int) -> BrokerProcess:
        """Start a stopped or killed broker again on its port and log dir."""
        b = self.brokers[broker_id]
        if b.running():
            raise RuntimeError(f"broker {broker_id} is still running")
        return b.start()

    def pause_broker(self, broker_id: int) -> None:
        self._running(broker_id).pause()

    def resume_broker(self, broker_id: int) -> None:
        self._running(broker_id).resume()

    def _running(self, broker_id: int) -> BrokerProcess:
        b = self.brokers[broker_id]
        if not b.running():
            raise RuntimeError(f"broker {broker_id} is not running")
        return b

    def running(self, broker_id: int) -> bool:
        return self.brokers[broker_id].running()

    def client_properties(self, user: str | None = None) -> dict[str, str]:
        """``bootstrap.servers`` and, for a secured cluster, the settings of ``user``
        (default: the ``client`` user; ``admin`` is the super user)."""
        if self.security is None:
            return {"bootstrap.servers": self.bootstrap}
        if user is None:
            return self.security.client_properties(self.bootstrap)
        return self.security.client_properties(self.bootstrap, user)

    # ------------------------------------------------------------------ all
    def stop(self) -> None:
        """Stop every broker (one at a time, so leadership can move), then ZooKeeper."""
        try:
            for broker_id in sorted(self.brokers):
                if self.running(broker_id):
                    self.stop_broker(broker_id)  # resumes a paused broker first
            self.zookeeper.stop()
        finally:
            self.kill_all()

    def kill_all(self) -> None:
        for b in self.brokers.values():
            b.kill()
        self.zookeeper.kill()

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        if et is not None:
            self.kill_all()
        else:
            self.stop()
