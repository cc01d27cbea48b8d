"""``millrace cluster``: ``describe`` (the cluster id, the controller and the brokers) and
``up`` (a development cluster on this machine, in the foreground).

``cluster up`` runs ``LocalCluster``: one ZooKeeper server and brokers 1..N on loopback,
broker ``i`` on ``base_port + i - 1``, everything under ``--dir`` (``zookeeper/`` and
``broker-<i>/`` with its logs and ``broker.log``), so a second run on the same directory
restarts the same cluster with its topics, offsets and groups.  It prints where the
cluster is (a JSON line with ``--output json``), then waits.

Metrics.  Every broker serves ``/metrics`` (Prometheus), ``/healthz`` and ``/readyz`` on
an HTTP listener of its own, broker ``i`` on ``http_base_port + i - 1`` (default
``DEFAULT_HTTP_BASE_PORT``, Redpanda's admin port; ``--no-http`` turns them off); the
URLs are printed (``"http"`` and ``"metrics"`` per broker in the JSON line) and
``--dir/prometheus.yml``, a Prometheus configuration with every broker as a scrape target,
is written at every start and its path printed.  The HTTP listeners have no
authentication, on a secured cluster too: they listen on loopback only.

``--security sasl_ssl`` makes it a secured development cluster (``DevSecurity``): a
fresh CA and broker certificate under ``--dir/security``, SCRAM-SHA-512 users ``admin``
(the brokers' own) and ``client`` created in ZooKeeper before any broker starts, every
listener SASL_SSL (inter-broker traffic included), and a ready ``client.properties``
whose path is printed -- pass it to any command with ``--command-config``.
``--authorizer`` (with ``--security sasl_ssl`` only: on PLAINTEXT every client is
``User:ANONYMOUS``) adds Kafka's ACL authorizer with ``admin`` as the super user; the
``client`` user then needs ACLs, granted as admin, before it can do anything
(``admin.properties``, next to ``client.properties``, holds admin's settings).

Schemas.  A schema registry (``millrace schema-registry``, Confluent's REST API, its state
in the cluster's ``_schemas`` topic) runs next to the brokers on ``--schema-registry-port``
(default 8081, Confluent's; ``--no-schema-registry`` leaves it out), under
``--dir/schema-registry``.  On a secured cluster it connects as ``admin`` and asks HTTP
basic credentials of the cluster's SCRAM users.

The console.  The web console (``millrace console``) runs on 127.0.0.1:``--console-port``
(default 8080; ``--no-console`` leaves it out), under ``--dir/console``, as admin on a
secured cluster; its URL is printed.

Stopping.  The children run in sessions of their own, so the terminal's Ctrl-C reaches
only this process; on SIGINT or SIGTERM it stops the console and the registry, then the
brokers one at a time with SIGTERM (each does a controlled shutdown: the controller moves
its leaderships to the others first) and ZooKeeper last, which is the order that lets
every broker leave cleanly.  A second signal while stopping kills whatever is left
(SIGKILL).  A broker that dies on its own is reported on stderr; the others keep running.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from millrace.cli.common import (
    CommandError,
    admin_client,
    connection_options,
    format_table,
    parse_configs,
    print_json,
)
from millrace.cli.foreground import (
    Child,
    Signals,
    say,
    serve_until_signal,
    start_or_explain,
)

if TYPE_CHECKING:
    from millrace.launcher.child_process import Launched
    from millrace.launcher.console_process import ConsoleProcess
    from millrace.launcher.local_cluster import LocalCluster
    from millrace.launcher.schema_registry_process import SchemaRegistryProcess

DEFAULT_CLUSTER_DIR = "./data/cluster"
DEFAULT_BASE_PORT = 9092
DEFAULT_HTTP_BASE_PORT = 9644
DEFAULT_SCHEMA_REGISTRY_PORT = 8081
DEFAULT_CONSOLE_PORT = 8080
# the internal topics' replication factor: Kafka's 3, or every broker of a smaller cluster
INTERNAL_TOPIC_RF_KEYS = ("offsets.topic.replication.factor",
                          "transaction.state.log.replication.factor")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cluster = sub.add_parser("cluster", help="describe the cluster, or run one on this machine",
                             description="The cluster id, the controller and the brokers; "
                                         "or a development cluster on this machine.")
    actions = cluster.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = actions.add_parser("describe", parents=[connection_options()],
                           help="cluster id, controller, brokers")
    p.set_defaults(func=describe)

    up = actions.add_parser(
        "up", help="run ZooKeeper and N brokers here until Ctrl-C",
        description="Start ZooKeeper and N brokers on this machine (loopback) in the "
                    "foreground and print the bootstrap servers; Ctrl-C or SIGTERM stops "
                    "them (controlled shutdown, one broker at a time). Running it again on "
                    "the same --dir restarts the same cluster with its data.")
    up.add_argument("--brokers", type=int, default=3, help="number of brokers (default 3)")
    up.add_argument("--dir", default=DEFAULT_CLUSTER_DIR, type=Path,
                    help=f"ZooKeeper data and broker logs (default {DEFAULT_CLUSTER_DIR})")
    up.add_argument("--base-port", type=int, default=DEFAULT_BASE_PORT,
                    help=f"broker i listens on base-port + i - 1 (default {DEFAULT_BASE_PORT})")
    up.add_argument("--http-base-port", type=int, default=DEFAULT_HTTP_BASE_PORT,
                    metavar="PORT",
                    help="broker i serves /metrics, /healthz and /readyz over HTTP on "
                         f"PORT + i - 1 (default {DEFAULT_HTTP_BASE_PORT})")
    up.add_argument("--no-http", dest="http", action="store_false",
                    help="no HTTP listeners (no /metrics, no prometheus.yml)")
    up.add_argument("--zookeeper-port", type=int, metavar="PORT",
                    help="ZooKeeper's client port (default: a free one)")
    up.add_argument("--security", choices=("none", "sasl_ssl"), default="none",
                    help="sasl_ssl: TLS + SCRAM-SHA-512 everywhere, with a generated CA, "
                         "users and client.properties (default none: PLAINTEXT)")
    up.add_argument("--authorizer", action="store_true",
                    help="turn on the ACL authorizer (kafka.security.authorizer.AclAuthorizer)"
                         " with admin as super user; needs --security sasl_ssl. The client "
                         "user then has no access until ACLs are granted to it as admin")
    up.add_argument("--schema-registry-port", type=int, default=DEFAULT_SCHEMA_REGISTRY_PORT,
                    metavar="PORT",
                    help=f"the schema registry's port (default {DEFAULT_SCHEMA_REGISTRY_PORT}, "
                         "Confluent's)")
    up.add_argument("--no-schema-registry", dest="schema_registry", action="store_false",
                    help="do not start a schema registry")
    up.add_argument("--console-port", type=int, default=DEFAULT_CONSOLE_PORT, metavar="PORT",
                    help=f"the web console's port on 127.0.0.1 (default "
                         f"{DEFAULT_CONSOLE_PORT})")
    up.add_argument("--no-console", dest="console", action="store_false",
                    help="do not start the web console")
    up.add_argument("--override", action="append", metavar="KEY=VALUE",
                    help="set one broker config key on every broker (repeatable)")
    up.add_argument("--output", "-o", choices=("table", "json"), default="table",
                    help="table, or one JSON line once the cluster is up")
    up.set_defaults(func=up_command)


def describe(args: argparse.Namespace) -> int:
    with admin_client(args) as admin:
        cluster = admin.describe_cluster()
    if args.output == "json":
        print_json(cluster)
        return 0
    controller = cluster.controller
    print(f"Cluster ID: {cluster.cluster_id or '-'}")
    print(f"Controller: {controller.id} ({controller.host}:{controller.port})"
          if controller is not None else "Controller: -")
    print()
    print(format_table(("ID", "HOST", "PORT", "RACK"),
                       [(n.id, n.host, n.port, n.rack) for n in cluster.nodes]))
    return 0


# ---------------------------------------------------------------------- cluster up
def up_overrides(brokers: int, given: dict[str, str]) -> dict[str, str]:
    """The broker configs of a ``cluster up``: the internal topics replicated on
    min(3, brokers) brokers (Kafka's 3 cannot be met by a smaller cluster), then the
    user's ``--override`` keys, which win."""
    rf = str(min(3, brokers))
    return {**{key: rf for key in INTERNAL_TOPIC_RF_KEYS}, **given}


def check_up_arguments(brokers: int, base_port: int, zookeeper_port: int | None, *,
                       security: str = "none", authorizer: bool = False,
                       http_base_port: int | None = None,
                       schema_registry_port: int | None = None,
                       console_port: int | None = None) -> None:
    """Refuse, as one line, what would fail half-way or mean nothing: a bad count, the
    authorizer on a PLAINTEXT cluster, no ZooKeeper, a port that is not free or asked for
    twice.  ``http_base_port`` None: no HTTP listeners."""
    from millrace.launcher.broker_process import port_in_use
    from millrace.launcher.zookeeper_process import zookeeper_missing

    if brokers < 1:
        raise CommandError(f"--brokers must be at least 1, got {brokers}")
    if authorizer and security == "none":
        raise CommandError("--authorizer needs --security sasl_ssl: on a PLAINTEXT cluster "
                           "every client is User:ANONYMOUS, so no ACL can tell them apart")
    last = base_port + brokers - 1
    if base_port < 1 or last > 65535:
        raise CommandError(f"ports {base_port}..{last} are not all valid TCP ports")
    brokers_ports = range(base_port, last + 1)
    http_ports = range(0)
    if http_base_port is not None:
        http_ports = range(http_base_port, http_base_port + brokers)
        if http_base_port < 1 or http_ports[-1] > 65535:
            raise CommandError(f"--http-base-port: ports {http_base_port}..{http_ports[-1]} "
                               "are not all valid TCP ports")
        if set(http_ports) & set(brokers_ports):
            raise CommandError(f"the HTTP ports {http_base_port}..{http_ports[-1]} overlap "
                               f"the brokers' ports {base_port}..{last}; choose others with "
                               "--http-base-port")
    missing = zookeeper_missing()
    if missing:
        raise CommandError(missing)
    wanted = [(f"broker {i}", base_port + i - 1) for i in range(1, brokers + 1)]
    wanted += [(f"broker {i}'s HTTP listener", port) for i, port in enumerate(http_ports, 1)]
    if zookeeper_port is not None:
        if zookeeper_port in brokers_ports or zookeeper_port in http_ports:
            raise CommandError(f"--zookeeper-port {zookeeper_port} is one of the brokers' "
                               f"ports {base_port}..{last}" if zookeeper_port in brokers_ports
                               else f"--zookeeper-port {zookeeper_port} is one of the HTTP "
                                    f"ports {http_ports[0]}..{http_ports[-1]}")
        wanted.insert(0, ("ZooKeeper", zookeeper_port))
    if schema_registry_port is not None:
        if not 1 <= schema_registry_port <= 65535:
            raise CommandError(f"--schema-registry-port {schema_registry_port}: expected a "
                               "port, 1 to 65535")
        if any(port == schema_registry_port for _, port in wanted):
            raise CommandError(f"--schema-registry-port {schema_registry_port} is taken by "
                               "another of the cluster's servers")
        wanted.append(("the schema registry", schema_registry_port))
    if console_port is not None:
        if not 1 <= console_port <= 65535:
            raise CommandError(f"--console-port {console_port}: expected a port, 1 to 65535")
        if any(port == console_port for _, port in wanted):
            raise CommandError(f"--console-port {console_port} is taken by another of the "
                               "cluster's servers")
        wanted.append(("the console", console_port))
    for who, port in wanted:
        if port_in_use(port):
            flags = ("--http-base-port (or --no-http)" if "HTTP" in who
                     else "--schema-registry-port (or --no-schema-registry)"
                     if "registry" in who
                     else "--console-port (or --no-console)" if "console" in who
                     else "--base-port / --zookeeper-port")
            raise CommandError(f"port {port} (for {who}) is already in use on 127.0.0.1 -- "
                               f"another cluster still running? Choose others with {flags}")


def _describe_up(cluster: LocalCluster, directory: Path,
                 prometheus_config: Path | None) -> dict[str, Any]:
    from millrace.launcher.dev_security import ADMIN_USER, AUTHORIZER_CLASS, SUPER_USER

    security = cluster.security
    urls = cluster.http_urls()
    return {
        "security_protocol": "SASL_SSL" if security is not None else "PLAINTEXT",
        "authorizer": AUTHORIZER_CLASS if cluster.authorizer else None,
        "super_users": [SUPER_USER] if cluster.authorizer else [],
        "admin_properties": (str(security.properties_path(ADMIN_USER))
                             if security is not None and cluster.authorizer else None),
        "client_properties": (str(security.client_properties_path)
                              if security is not None else None),
        "bootstrap_servers": cluster.bootstrap,
        "zookeeper_connect": cluster.zookeeper_connect,
        "dir": str(directory),
        "zookeeper": {"pid": cluster.zookeeper.pid, "log": str(cluster.zookeeper.log_path)},
        "prometheus_config": str(prometheus_config) if prometheus_config else None,
        "brokers": [{"id": i, "host": "127.0.0.1", "port": b.port,
                     "pid": b.proc.pid if b.proc else None, "log": str(b.log_path),
                     "http": urls.get(i),
                     "metrics": f"{urls[i]}/metrics" if i in urls else None}
                    for i, b in sorted(cluster.brokers.items())],
    }


def _children(cluster: LocalCluster,
              registry: SchemaRegistryProcess | None = None,
              console: ConsoleProcess | None = None) -> list[Child]:
    """The console and the schema registry, then the brokers one at a time (SIGTERM: a
    controlled shutdown), then ZooKeeper (the JVM exits with 143, 128 + SIGTERM, after its
    shutdown hooks ran): the order that lets every broker leave cleanly."""
    children = [Child("console", console, console.log_path)] if console else []
    children += [Child("schema registry", registry, registry.log_path)] if registry else []
    children += [Child(f"broker {i}", b, b.log_path,
                       stopping_note=" (controlled shutdown)")
                 for i, b in sorted(cluster.brokers.items())]
    zookeeper = cluster.zookeeper
    children.append(Child("ZooKeeper", zookeeper, zookeeper.log_path, (0, 143)))
    return children


def schema_registry_for(cluster: LocalCluster, directory: Path,
                        port: int) -> SchemaRegistryProcess:
    """A registry on the cluster: as admin over SASL_SSL with basic auth against the
    cluster's SCRAM users when it is secured."""
    from millrace.launcher.dev_security import ADMIN_USER
    from millrace.launcher.schema_registry_process import SchemaRegistryProcess

    properties: dict[str, str] = {}
    if cluster.security is not None:
        properties = {f"kafkastore.{k}": v
                      for k, v in cluster.client_properties(ADMIN_USER).items()
                      if k != "bootstrap.servers"}
        properties["authentication.method"] = "BASIC"
        properties["authentication.scram.zookeeper.connect"] = cluster.zookeeper_connect
    return SchemaRegistryProcess(cluster.bootstrap, directory / "schema-registry", port,
                                 properties=properties, new_session=True)


def console_for(cluster: LocalCluster, directory: Path, port: int) -> ConsoleProcess:
    """The web console on the cluster: as admin when it is secured (it then sees and may
    change everything, as the cluster's operator)."""
    from millrace.launcher.console_process import ConsoleProcess
    from millrace.launcher.dev_security import ADMIN_USER

    properties: dict[str, str] = {}
    if cluster.security is not None:
        properties = {k: v for k, v in cluster.client_properties(ADMIN_USER).items()
                      if k != "bootstrap.servers"}
    return ConsoleProcess(cluster.bootstrap, directory / "console", port,
                          client_properties=properties, new_session=True)


def _kill_all(cluster: LocalCluster, *others: Launched | None) -> Callable[[], None]:
    def kill() -> None:
        for other in others:
            if other is not None:
                other.kill()
        cluster.kill_all()
    return kill


def up_command(args: argparse.Namespace) -> int:
    from millrace.launcher.dev_security import ADMIN_USER, CLIENT_USER, DevSecurity
    from millrace.launcher.local_cluster import LocalCluster

    overrides = up_overrides(args.brokers, parse_configs(args.override, "--override"))
    http_base_port = args.http_base_port if args.http else None
    registry_port = args.schema_registry_port if args.schema_registry else None
    console_port = args.console_port if args.console else None
    check_up_arguments(args.brokers, args.base_port, args.zookeeper_port,
                       security=args.security, authorizer=args.authorizer,
                       http_base_port=http_base_port, schema_registry_port=registry_port,
                       console_port=console_port)
    directory = args.dir.resolve()
    security = DevSecurity.create(directory) if args.security == "sasl_ssl" else None
    cluster = LocalCluster(directory, args.brokers, base_port=args.base_port,
                           zookeeper_port=args.zookeeper_port, overrides=overrides,
                           new_session=True, security=security, authorizer=args.authorizer,
                           http=args.http, http_base_port=http_base_port)
    with Signals() as signals:
        say(f"starting ZooKeeper and {args.brokers} broker(s) in {directory} ...")
        start_or_explain(cluster.start, cluster.kill_all, "the cluster", directory)
        if security is not None:
            security.write_client_properties(cluster.bootstrap)
            if cluster.authorizer:
                security.write_client_properties(cluster.bootstrap, ADMIN_USER)
        registry = None
        if registry_port is not None:
            registry = schema_registry_for(cluster, directory, registry_port)
            say(f"starting the schema registry on port {registry_port} ...")
            start_or_explain(registry.start, cluster.kill_all, "the schema registry",
                             directory)
        console = None
        if console_port is not None:
            console = console_for(cluster, directory, console_port)
            say(f"starting the console on port {console_port} ...")
            start_or_explain(console.start, _kill_all(cluster, registry), "the console",
                             directory)
        prometheus = cluster.write_prometheus_config() if cluster.http_urls() else None
        info = _describe_up(cluster, directory, prometheus)
        info["schema_registry"] = ({"url": registry.url, "pid": registry.pid,
                                    "log": str(registry.log_path),
                                    "basic_auth": security is not None}
                                   if registry is not None else None)
        info["console"] = ({"url": console.url, "pid": console.pid,
                            "log": str(console.log_path)} if console is not None else None)
        if args.output == "json":
            print(json.dumps(info), flush=True)
        else:
            print(f"ZooKeeper {info['zookeeper_connect']}")
            for b in info["brokers"]:
                metrics = f", metrics {b['metrics']}" if b["metrics"] else ""
                print(f"broker {b['id']} 127.0.0.1:{b['port']} (log {b['log']}{metrics})")
            print(f"bootstrap servers: {info['bootstrap_servers']}")
            if prometheus is not None:
                print(f"Prometheus scrape config: {prometheus}")
            if registry is not None:
                auth = " (basic auth: the cluster's SCRAM users)" if security else ""
                print(f"schema registry {registry.url}{auth} (log {registry.log_path})")
            if console is not None:
                print(f"console {console.url} (log {console.log_path})")
            if security is not None:
                print(f"security: SASL_SSL with SCRAM-SHA-512 on every listener; client "
                      f"settings in {info['client_properties']} (--command-config)")
            if cluster.authorizer:
                print(f"authorizer: on ({info['authorizer']}), super user "
                      f"{info['super_users'][0]} (settings in {info['admin_properties']}); "
                      f"User:{CLIENT_USER} may do nothing until granted ACLs by admin")
            print("Ctrl-C stops the cluster.", flush=True)
        clean = serve_until_signal(_children(cluster, registry, console), signals,
                                   _kill_all(cluster, registry, console))
    say("stopped" if clean else "stopped (not cleanly; see the logs)")
    return 0 if clean else 1
