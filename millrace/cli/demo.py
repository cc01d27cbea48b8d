"""``millrace demo``: order events through the broker and the Spark pipeline into a
database, then a summary and a check of every row against a plain-Python fold.
``--value-format avro`` writes the orders as Avro with a schema registry (started on the
demo's broker unless ``--schema-registry-url`` names one) and evolves the schema once
half-way (``millrace.demo.avro``).

Progress (a bar while producing, a line per pipeline batch) goes to stderr; the summary
to stdout, as tables or (``--output json``) one JSON document.  The exit code is 0 when
the tables match the fold, 1 when they do not (the first differences are printed).
The work itself is ``millrace.demo.run.run_demo``.

Security.  ``--command-config client.properties`` (the flag of every client command) gives
its settings to every client the demo builds -- admin calls, the producer and the
pipeline's source (as ``kafka.*`` options) -- for a secured cluster of one's own; its
``bootstrap.servers``, if any, is where the demo goes when neither ``--bootstrap-server``
nor a cluster of its own (``--brokers``, ``--security``) is asked for.  ``--security sasl_ssl`` with ``--brokers 3`` runs the demo's own cluster secured
(SASL_SSL everywhere, SCRAM-SHA-512, a fresh CA; ``millrace cluster up --security
sasl_ssl``'s set-up) and connects every client as its ``client`` user.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from millrace.cli.common import (
    CommandError,
    configure_client_logging,
    print_json,
    read_properties_file,
)
from millrace.demo.run import (
    DEFAULT_EVENTS,
    DEFAULT_PARTITIONS,
    DEFAULT_SEED,
    DEFAULT_TOPIC,
    SECURITY_PROFILES,
    VALUE_FORMATS,
    DemoConfig,
    DemoError,
    DemoListener,
    run_demo,
)

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID
    from rich.status import Status

    from millrace.demo.run import DemoResult
    from millrace.spark.pipeline import BatchProgress

DEFAULT_DATA_DIR = "./data/demo"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "demo", help="order events -> broker -> Spark -> database, verified",
        description="Start a broker, produce order events, run the Spark pipeline "
                    "(latest state per order, paid revenue per product and minute) into a "
                    "database and check every row against the events. Running it again on "
                    "the same --data-dir continues the stream from where it stopped.")
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR, type=Path,
                   help=f"broker logs, checkpoints and the SQLite file (default "
                        f"{DEFAULT_DATA_DIR})")
    p.add_argument("--events", type=int, default=DEFAULT_EVENTS,
                   help=f"order events to produce in this run (default {DEFAULT_EVENTS:,})")
    p.add_argument("--partitions", type=int, default=DEFAULT_PARTITIONS,
                   help=f"partitions of a new topic (default {DEFAULT_PARTITIONS})")
    p.add_argument("--topic", default=DEFAULT_TOPIC, help=f"(default {DEFAULT_TOPIC})")
    p.add_argument("--bootstrap-server", "-b", metavar="HOST:PORT",
                   help="use this broker or cluster instead of starting one")
    p.add_argument("--command-config", metavar="FILE",
                   help="a properties file of client configs (security.protocol, sasl.*, "
                        "ssl.*, ...) for every client of the demo; its bootstrap.servers "
                        "is used when --bootstrap-server is not given")
    p.add_argument("--database", metavar="URL",
                   help="sqlite:///path or postgresql://... (default: SQLite in the data dir)")
    p.add_argument("--fresh", action="store_true",
                   help="start over: delete the demo's files in the data dir (and, with "
                        "--bootstrap-server/--database, the demo's topic and tables)")
    p.add_argument("--brokers", type=int, default=1,
                   help="1: one embedded broker (default); 3 or more: ZooKeeper and that "
                        "many brokers, the topic replicated 3 times with min.insync.replicas=2, "
                        "and the leader of one partition killed (kill -9) half-way through "
                        "producing")
    p.add_argument("--security", choices=SECURITY_PROFILES, default="none",
                   help="sasl_ssl (with --brokers 3): the demo's cluster with SASL_SSL on "
                        "every listener, SCRAM-SHA-512 users and a generated CA, every "
                        "client authenticated (default none: PLAINTEXT)")
    p.add_argument("--spark-master", metavar="URL", default="local[2]",
                   help="where Spark runs the pipeline: local[2] (default) or a cluster, "
                        "e.g. spark://127.0.0.1:7077 from 'millrace spark up'")
    p.add_argument("--value-format", choices=VALUE_FORMATS, default="json",
                   help="json (default) or avro: orders in Confluent's wire format, the "
                        "order schema registered and evolved once half-way (an optional "
                        "coupon), read by the pipeline with the schema registry")
    p.add_argument("--schema-registry-url", metavar="URL",
                   help="with --value-format avro: use this registry instead of starting "
                        "one on the demo's broker")
    p.add_argument("--console-port", type=int, default=8080, metavar="PORT",
                   help="the web console's port while the demo runs (default 8080; any "
                        "free port when it is taken)")
    p.add_argument("--no-console", dest="console", action="store_false",
                   help="do not start the web console")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED,
                   help=f"the event generator's seed (default {DEFAULT_SEED})")
    p.add_argument("--output", "-o", choices=("table", "json"), default="table",
                   help="the summary as tables, or as one JSON document (default table)")
    p.set_defaults(func=demo)


class ConsoleListener(DemoListener):
    """Draws the demo's progress on stderr."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.progress: Progress | None = None
        self.task: TaskID | None = None
        self.status: Status | None = None
        self.batch_rows: dict[str, int] = {}

    def phase(self, name: str, detail: str = "") -> None:
        self.close()
        if name == "produce":
            if not self.console.is_terminal:
                return  # no bar to draw: the line comes when every event is acknowledged
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self.progress = Progress(TextColumn("producing"), BarColumn(),
                                     MofNCompleteColumn(), TimeElapsedColumn(),
                                     console=self.console, transient=True)
            self.progress.start()
            self.task = self.progress.add_task("produce", total=None)
        elif name == "pipeline":
            self.console.print(f"[bold]pipeline[/] Spark, trigger available-now -> {detail}")
            self.status = self.console.status("starting Spark ...")
            self.status.start()
        else:
            self.console.print(f"[bold]{name}[/] {detail}")

    def produced(self, sent: int, total: int) -> None:
        if self.progress is not None and self.task is not None:
            self.progress.update(self.task, completed=sent, total=total)
        if sent == total:
            self.close()
            self.console.print(f"[bold]produce[/] {sent:,} events sent and acknowledged")

    def note(self, text: str, kind: str = "fault") -> None:
        # printed through the live bar's console, so it lands above the bar
        console = self.progress.console if self.progress is not None else self.console
        console.print(f"[bold yellow]{kind}[/] {text}", highlight=False)

    def batch(self, progress: BatchProgress) -> None:
        self.batch_rows[progress.table] = (self.batch_rows.get(progress.table, 0)
                                           + progress.input_rows)
        lag = sum(progress.lag.values()) if progress.lag else 0
        # every committed micro-batch has its line: the summary counts them all
        if progress.input_rows:
            self.console.print(
                f"  {progress.table} batch {progress.batch_id}: {progress.input_rows:,} rows, "
                f"{progress.processed_rows_per_s:,.0f} rows/s, {progress.rows_upserted:,} "
                f"rows upserted, lag {lag:,}", highlight=False)
        else:  # a batch without rows only moves the watermark on
            self.console.print(f"  {progress.table} batch {progress.batch_id}: no new rows, "
                               f"lag {lag:,}", highlight=False)
        if self.status is not None:
            read = ", ".join(f"{table} {rows:,}" for table, rows in self.batch_rows.items())
            self.status.update(f"pipeline: rows read by {read}; lag {lag:,}")

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None
        if self.status is not None:
            self.status.stop()
            self.status = None


def demo(args: argparse.Namespace) -> int:
    from rich.console import Console

    from millrace.common.errors import ConfigError
    from millrace.spark.pipeline.config import check_master

    configure_client_logging()
    try:
        check_master(args.spark_master)
    except ConfigError as e:
        raise CommandError(f"--spark-master: {e}") from None
    client: dict[str, str] = {}
    if args.command_config:
        client = read_properties_file(args.command_config, "--command-config")
    bootstrap = args.bootstrap_server
    if bootstrap is None and args.brokers == 1 and args.security == "none":
        bootstrap = client.get("bootstrap.servers") or None  # the file's cluster, not ours
    config = DemoConfig(data_dir=args.data_dir, events=args.events, partitions=args.partitions,
                        bootstrap_servers=bootstrap, database=args.database,
                        fresh=args.fresh, topic=args.topic, seed=args.seed,
                        brokers=args.brokers, security=args.security, client_config=client,
                        console_port=args.console_port if args.console else None,
                        spark_master=args.spark_master, value_format=args.value_format,
                        schema_registry_url=args.schema_registry_url)
    listener = ConsoleListener(Console(stderr=True, soft_wrap=True))
    try:
        result = run_demo(config, listener)
    except DemoError as e:
        raise CommandError(str(e)) from None
    finally:
        listener.close()
    if args.output == "json":
        print_json(result.to_dict())
    else:
        print_summary(result, Console(highlight=False, soft_wrap=True))
    return 0 if result.verification.passed else 1


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _table(title: str, headers: tuple[str, ...], rows: list[tuple[Any, ...]]) -> str:
    """A heading, then columns as wide as their widest cell; numbers aligned right."""
    cells = [[_cell(v) for v in row] for row in rows]
    numeric = [bool(rows) and all(isinstance(row[i], int | float) for row in rows)
               for i in range(len(headers))]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]

    def line(values: list[str] | tuple[str, ...]) -> str:
        return "  ".join(v.rjust(w) if right else v.ljust(w)
                         for v, w, right in zip(values, widths, numeric)).rstrip()

    return "\n".join([f"\n{title}", line(headers), *(line(r) for r in cells)])


def print_summary(result: DemoResult, out: Console) -> None:
    where = (f"embedded broker {result.bootstrap_servers}" if result.embedded_broker
             else result.bootstrap_servers)
    if result.brokers > 1:
        where = f"embedded {result.brokers}-broker cluster {result.bootstrap_servers}"
    if result.security_protocol != "PLAINTEXT":
        where += f" over {result.security_protocol}"
    out.print(f"[bold]millrace demo[/], run {result.run} on {result.data_dir}")
    replicated = ""
    if result.brokers > 1:
        from millrace.demo.cluster import MIN_INSYNC_REPLICAS, REPLICATION_FACTOR

        replicated = (f", replication factor {REPLICATION_FACTOR}, min.insync.replicas "
                      f"{MIN_INSYNC_REPLICAS}")
    out.print(f"topic {result.topic!r} ({result.partitions} partitions{replicated}) on {where}; "
              f"tables in {result.database}", markup=False)
    if result.schema_registry_url:
        out.print(f"values: Avro, subject {result.topic}-value in the schema registry "
                  f"{result.schema_registry_url}", markup=False)
    for change in result.schema_changes:
        out.print(f"schema change seen by the running pipeline: {change} (queries restarted "
                  "from their checkpoints)", markup=False)
    if result.client_properties:
        out.print(f"client settings (SCRAM user 'client'): {result.client_properties}",
                  markup=False)
    for note in result.notes:
        out.print(f"note: {note}", markup=False)
    tables = result.pipeline_tables
    queries = result.pipeline_queries
    feeds = (f"one Spark query feeds {'both' if len(tables) == 2 else 'all'} tables"
             if queries == 1 and len(tables) > 1
             else f"{queries} Spark quer{'y' if queries == 1 else 'ies'}")
    out.print(_table("Throughput", ("step", "records", "seconds", "records/s", "how"), [
        ("produce", result.events_produced, result.produce_s, round(result.produce_rate),
         "millrace KafkaProducer, acks=all" + (", idempotent" if result.brokers > 1 else "")),
        ("pipeline", result.pipeline_input_rows, result.pipeline_s,
         round(result.pipeline_rate), f"Spark local, trigger available-now, {feeds}"),
    ]), markup=False)
    if tables:
        # per table, the counts behind the progress lines ("<table> batch <id>: ...")
        out.print(_table("Pipeline by table (this run)",
                         ("table", "micro-batches", "records read", "rows upserted"),
                         [(table, t.micro_batches, t.records_read, t.rows_upserted)
                          for table, t in tables.items()]), markup=False)
    out.print(_table("Orders by status (latest state per order)", ("status", "orders"),
                     list(result.orders_by_status)), markup=False)
    out.print(_table("Paid revenue by product", ("product", "revenue", "orders"),
                     list(result.revenue_by_product)), markup=False)
    out.print(_table("Top product-minutes by paid revenue",
                     ("window start (UTC)", "product", "revenue", "orders"),
                     list(result.top_windows)), markup=False)
    v = result.verification
    out.print()
    if v.passed:
        out.print(f"[bold green]verification passed[/]: {v.orders_actual:,} orders and "
                  f"{v.windows_actual:,} revenue rows match the fold of "
                  f"{result.events_total:,} events")
    else:
        out.print(f"[bold red]verification FAILED[/]: {v.mismatch_count:,} differences "
                  f"(orders {v.orders_actual:,} of {v.orders_expected:,}, revenue rows "
                  f"{v.windows_actual:,} of {v.windows_expected:,}); the first:")
        for mismatch in v.mismatches:
            out.print(f"  {mismatch.describe()}", markup=False)
