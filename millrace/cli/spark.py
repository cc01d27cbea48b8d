"""``millrace spark up``: a Spark standalone cluster on this machine, in the foreground.

For development and tests of the pipeline on a cluster: a master and ``--workers`` workers
from the ``pyspark`` distribution itself (``SparkStandaloneCluster``), every process on
loopback, everything under ``--dir`` (``master/`` and ``worker-<i>/``, each with its log,
the worker's ``work/`` with every executor's stdout and stderr, and ``local/`` scratch).
It prints the master URL (give it to ``millrace pipeline run --master``, ``millrace demo
--spark-master`` or ``spark-submit --master``) and the master's web UI, then waits.
Ctrl-C or SIGTERM stops the workers (their executors end with them), then the master; a
second signal kills what is left.

A production cluster is Spark's own business (its standalone scripts, YARN, Kubernetes);
nothing of millrace runs on it beyond the Python package each executor imports.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from millrace.cli.common import CommandError
from millrace.cli.foreground import (
    Child,
    Signals,
    say,
    serve_until_signal,
    start_or_explain,
)

DEFAULT_SPARK_DIR = "./data/spark"
DEFAULT_MASTER_PORT = 7077  # Spark's own defaults
DEFAULT_WEBUI_PORT = 8080
# a JVM stopped by SIGTERM exits with 143 (128 + SIGTERM) after its shutdown hooks ran
SIGTERM_EXIT = (0, 143)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    spark = sub.add_parser("spark", help="run a Spark standalone cluster on this machine",
                           description="A Spark standalone cluster (master and workers from "
                                       "the pyspark distribution) for running the pipeline "
                                       "on executors.")
    actions = spark.add_subparsers(dest="action", required=True, metavar="ACTION")
    up = actions.add_parser(
        "up", help="run a Spark master and N workers here until Ctrl-C",
        description="Start a Spark standalone master and N workers on loopback in the "
                    "foreground and print the master URL and web UI; Ctrl-C or SIGTERM "
                    "stops them.")
    up.add_argument("--workers", type=int, default=2, help="number of workers (default 2)")
    up.add_argument("--cores", type=int, default=1,
                    help="cores each worker offers (default 1)")
    up.add_argument("--memory", default="1g",
                    help="memory each worker offers its executors, e.g. 1g (default 1g)")
    up.add_argument("--dir", default=DEFAULT_SPARK_DIR, type=Path,
                    help=f"logs and work directories (default {DEFAULT_SPARK_DIR})")
    up.add_argument("--port", type=int, default=DEFAULT_MASTER_PORT,
                    help=f"the master's port (default {DEFAULT_MASTER_PORT})")
    up.add_argument("--webui-port", type=int, default=DEFAULT_WEBUI_PORT,
                    help=f"the master's web UI port (default {DEFAULT_WEBUI_PORT})")
    up.add_argument("--output", "-o", choices=("table", "json"), default="table",
                    help="table, or one JSON line once the cluster is up")
    up.set_defaults(func=up_command)


def check_up_arguments(args: argparse.Namespace) -> None:
    """What would fail half-way (a bad count, a busy port) as one line, before any start."""
    from millrace.launcher.broker_process import port_in_use

    if not 1 <= args.workers <= 64:
        raise CommandError(f"--workers {args.workers}: expected 1 to 64")
    if args.cores < 1:
        raise CommandError(f"--cores {args.cores}: expected at least 1")
    for flag, port in (("--port", args.port), ("--webui-port", args.webui_port)):
        if not 1 <= port <= 65535:
            raise CommandError(f"{flag} {port}: expected a port, 1 to 65535")
    if args.port == args.webui_port:
        raise CommandError("--port and --webui-port must differ")
    if not args.memory[:-1].isdigit() or args.memory[-1].lower() not in "mgt":
        raise CommandError(f"--memory {args.memory!r}: expected a size like 512m or 1g")
    for flag, port in (("--port", args.port), ("--webui-port", args.webui_port)):
        if port_in_use(port):
            raise CommandError(f"{flag} {port}: 127.0.0.1:{port} is in use (another Spark "
                               f"master?); choose another with {flag}")


def up_command(args: argparse.Namespace) -> int:
    from millrace.launcher.spark_cluster import SparkStandaloneCluster, spark_missing

    check_up_arguments(args)
    missing = spark_missing()
    if missing is not None:
        raise CommandError(missing)
    directory = args.dir.resolve()
    cluster = SparkStandaloneCluster(directory, args.workers, cores_per_worker=args.cores,
                                     memory_per_worker=args.memory, master_port=args.port,
                                     webui_port=args.webui_port, new_session=True)
    children = [Child(f"worker {i}", w, w.log_path, SIGTERM_EXIT)
                for i, w in enumerate(cluster.workers, 1)]
    children.append(Child("master", cluster.master, cluster.master.log_path, SIGTERM_EXIT))
    with Signals() as signals:
        say(f"starting a Spark master and {args.workers} worker(s) in {directory} ...")
        start_or_explain(cluster.start, cluster.kill, "the Spark cluster", directory)
        info = cluster.describe()
        if args.output == "json":
            print(json.dumps(info), flush=True)
        else:
            print(f"master {info['master']}")
            print(f"web UI {info['web_ui']}")
            for i, w in enumerate(info["workers"], 1):
                print(f"worker {i}: {w['cores']} core(s), {w['memory']}, web UI {w['web_ui']}")
            print(f"run the pipeline on it: millrace pipeline run --master {info['master']} "
                  "...", flush=True)
            print("Ctrl-C stops the cluster.", flush=True)
        clean = serve_until_signal(children, signals, cluster.kill)
    say("stopped" if clean else "stopped (not cleanly; see the logs)")
    return 0 if clean else 1
