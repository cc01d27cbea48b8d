"""``millrace pipeline run``: the Spark pipeline (topic -> database, exactly once) from flags
or a job file.

The job comes from ``--config job.toml|job.json`` (``PipelineConfig`` fields), from flags,
or both: flags given next to ``--config`` replace its top-level values, ``--option``
entries are merged into the source options, and ``--state-table`` /
``--aggregate-table`` add one sink each.  ``--command-config FILE`` (client settings such
as ``security.protocol``, ``sasl.*``, ``ssl.*``) becomes ``kafka.<key>`` source options,
under the ``--option`` entries.  While it runs it prints a line per
micro-batch (records/s, rows upserted, lag per partition) and a summary at the end;
``--output json`` prints the same as JSON lines (``{"event": "batch", ...}``,
``{"event": "summary", ...}``).

``--master`` picks where Spark runs the queries: ``local[2]`` (the embedded default) or a
cluster manager (``spark://HOST:PORT``, the standalone cluster ``millrace spark up``
starts); ``--conf spark.key=value`` adds Spark settings, as ``spark-submit`` takes them.
This process is the driver; the executors read their partitions from the brokers.

``--value-format avro`` (or ``json-schema``, ``protobuf``) with ``--schema-registry-url``
reads values in Confluent's wire format: the registered schema's fields are the columns,
and a newer version that only adds fields restarts the queries with the new columns
(docs/pipeline.md).

``--errors-tolerance none|all`` and ``--dead-letter-topic`` choose what a bad record
(a value that does not parse, a null key, a value too large for its column) does: fail the
run naming its partition and offset, or go to the dead-letter topic (docs/pipeline.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from typing import TYPE_CHECKING, Any

from millrace.cli.common import (
    BOOTSTRAP_ENV,
    DEFAULT_BOOTSTRAP,
    CommandError,
    configure_client_logging,
    parse_configs,
    parse_names,
    read_properties_file,
)

if TYPE_CHECKING:
    from millrace.spark.pipeline import BatchProgress, PipelineConfig, PipelineResult


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    pipeline = sub.add_parser("pipeline", help="run the Spark pipeline: topic -> database",
                              description="Stream a topic through Spark into SQLite or "
                                          "PostgreSQL tables, exactly once.")
    actions = pipeline.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = actions.add_parser("run", help="run a pipeline job (until caught up or stopped)")
    p.add_argument("--config", "-c", metavar="FILE", help="a job file (.toml or .json)")
    p.add_argument("--name", help="the job's name: batch ids are recorded per name and sink "
                                  "(default: the topic)")
    src = p.add_argument_group("source")
    src.add_argument("--bootstrap-server", "-b", metavar="HOST:PORT",
                     help=f"broker(s) (default: ${BOOTSTRAP_ENV} or {DEFAULT_BOOTSTRAP})")
    src.add_argument("--topic", "-t", help="the topic to read")
    src.add_argument("--option", action="append", metavar="KEY=VALUE",
                     help="a source option, e.g. startingOffsets=earliest, "
                          "maxOffsetsPerTrigger=10000 (repeatable)")
    src.add_argument("--command-config", metavar="FILE",
                     help="a properties file of client configs (security.protocol, sasl.*, "
                          "ssl.*, ...), given to the source as kafka.<key> options")
    src.add_argument("--source-format", help="the Spark data source (default millrace)")
    val = p.add_argument_group("events")
    val.add_argument("--value-format", choices=("json", "raw", "avro", "json-schema", "protobuf"),
                     help="default json; avro, json-schema, protobuf: Confluent's wire format, "
                          "decoded with the schema registry (--schema-registry-url), the "
                          "subject <topic>-value or --option subject=NAME")
    val.add_argument("--schema-registry-url", metavar="URL",
                     help="the schema registry of --value-format avro|json-schema|protobuf, "
                          "e.g. http://127.0.0.1:8081")
    val.add_argument("--value-schema", metavar="DDL",
                     help="the JSON value's columns as Spark DDL: 'id STRING, n INT, ...'")
    val.add_argument("--transform", metavar="SQL",
                     help="Spark SQL over the view `events` (value columns + key, topic, "
                          "partition, offset, timestamp)")
    bad = p.add_argument_group("bad records (Kafka Connect's errors.tolerance)")
    bad.add_argument("--errors-tolerance", choices=("none", "all"),
                     help="none (default): a record that does not parse, a null key or a "
                          "value too large fails the run, naming its partition and offset; "
                          "all: such records go to --dead-letter-topic, the rest are written")
    bad.add_argument("--dead-letter-topic", metavar="TOPIC",
                     help="where --errors-tolerance all sends bad records (original key and "
                          "value, __connect.errors.* headers); required with all")
    st = p.add_argument_group("state sink (latest row per key)")
    st.add_argument("--state-table", metavar="TABLE")
    st.add_argument("--key", action="append", metavar="COL[,COL]",
                    help="the state table's key column(s)")
    st.add_argument("--order-by", action="append", metavar="COL[,COL]",
                    help="which row is latest (default: the highest offset)")
    ag = p.add_argument_group("aggregate sink (per event-time window)")
    ag.add_argument("--aggregate-table", metavar="TABLE")
    ag.add_argument("--event-time", metavar="COL", help="the event-time column")
    ag.add_argument("--window", default="1 minute", help="window length (default 1 minute)")
    ag.add_argument("--slide", help="slide interval (default: tumbling windows)")
    ag.add_argument("--watermark", default="10 minutes",
                    help="how late an event may be (default 10 minutes)")
    ag.add_argument("--group-by", action="append", metavar="COL[,COL]")
    ag.add_argument("--aggregate", action="append", metavar="NAME=EXPR",
                    help="an aggregate column, e.g. revenue='sum(quantity * price)' "
                         "(repeatable)")
    ag.add_argument("--where", metavar="SQL", help="only events matching this condition")
    out = p.add_argument_group("target and run")
    out.add_argument("--database", metavar="URL",
                     help="sqlite:///abs/path.db or postgresql://user:pw@host:port/db")
    out.add_argument("--checkpoint", metavar="DIR", help="the checkpoint directory")
    out.add_argument("--database-writes", choices=("auto", "driver", "executors"),
                     help="who writes the rows: executors (each task stages its rows, the "
                          "driver commits the batch; PostgreSQL), driver (the rows come to "
                          "it), auto (default: executors for PostgreSQL on a cluster)")
    out.add_argument("--master", metavar="URL",
                     help="where Spark runs the job: local[N] (default local[2]) or a "
                          "cluster manager, e.g. spark://HOST:7077 for a standalone cluster")
    out.add_argument("--conf", action="append", metavar="KEY=VALUE",
                     help="a Spark setting (spark.*), as spark-submit takes it; repeatable")
    out.add_argument("--trigger", help="available-now (default) or processing-time=<interval>")
    out.add_argument("--until-caught-up", action="store_true",
                     help="with processing-time: stop once no partition lags")
    out.add_argument("--timeout", type=float, metavar="S", help="stop after S seconds")
    out.add_argument("--output", "-o", choices=("table", "json"), default="table",
                     help="progress and summary as text lines or JSON lines")
    p.set_defaults(func=run)


# ---------------------------------------------------------------------- job from flags
def build_config(args: argparse.Namespace) -> PipelineConfig:
    from millrace.spark.pipeline import (
        AggregateSink,
        PipelineConfig,
        SourceConfig,
        StateSink,
    )

    doc: dict[str, Any] = {}
    if args.config:
        doc = PipelineConfig.load(args.config).to_dict()
    source = dict(doc.get("source") or {})
    if args.bootstrap_server or "bootstrap_servers" not in source:
        source["bootstrap_servers"] = (args.bootstrap_server
                                       or os.environ.get(BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP))
    if args.topic:
        source["subscribe"] = args.topic
    if not source.get("subscribe"):
        raise CommandError("--topic (or source.subscribe in --config) is required")
    client_file: dict[str, str] = {}
    if getattr(args, "command_config", None):
        client_file = {f"kafka.{k}": v for k, v in
                       read_properties_file(args.command_config, "--command-config").items()}
    source["options"] = {**(source.get("options") or {}), **client_file,
                         **parse_configs(args.option, "--option")}
    if args.source_format:
        source["format"] = args.source_format
    doc["source"] = SourceConfig(**source)
    for flag, key in (("name", "name"), ("value_format", "value_format"),
                      ("value_schema", "value_schema"), ("transform", "transform"),
                      ("database", "database"), ("checkpoint", "checkpoint_dir"),
                      ("trigger", "trigger"), ("master", "spark_master"),
                      ("database_writes", "database_writes"),
                      ("errors_tolerance", "errors_tolerance"),
                      ("schema_registry_url", "schema_registry_url"),
                      ("dead_letter_topic", "dead_letter_topic")):
        value = getattr(args, flag)
        if value is not None:
            doc[key] = value
    if args.conf:
        doc["spark_conf"] = {**(doc.get("spark_conf") or {}),
                             **parse_configs(args.conf, "--conf")}
    doc.setdefault("name", source["subscribe"])
    for flag, key in (("database", "database"), ("checkpoint", "checkpoint_dir")):
        if not doc.get(key):
            raise CommandError(f"--{flag} (or {key} in --config) is required")
    states = [StateSink(**s) for s in doc.pop("state_sinks", [])]
    aggregates = [AggregateSink(**a) for a in doc.pop("aggregate_sinks", [])]
    if args.state_table:
        if not args.key:
            raise CommandError("--state-table needs --key")
        state = StateSink(table=args.state_table, key=parse_names(args.key))
        if args.order_by:
            state.order_by = parse_names(args.order_by)
        states.append(state)
    elif args.key or args.order_by:
        raise CommandError("--key and --order-by belong to --state-table")
    if args.aggregate_table:
        if not args.event_time or not args.aggregate:
            raise CommandError("--aggregate-table needs --event-time and --aggregate")
        aggregates.append(AggregateSink(
            table=args.aggregate_table, event_time=args.event_time, window=args.window,
            watermark=args.watermark, slide=args.slide, group_by=parse_names(args.group_by),
            aggregates=parse_configs(args.aggregate, "--aggregate"), where=args.where))
    elif args.event_time or args.aggregate or args.group_by or args.where:
        raise CommandError("--event-time, --aggregate, --group-by and --where belong to "
                           "--aggregate-table")
    config = PipelineConfig(**{**doc, "state_sinks": states, "aggregate_sinks": aggregates})
    config.validate()
    return config


# ---------------------------------------------------------------------- output
def format_lag(lag: dict[str, int]) -> str:
    if not lag:
        return "lag -"
    parts = " ".join(f"{tp}={n:,}" for tp, n in sorted(lag.items()))
    return f"lag {parts} (total {sum(lag.values()):,})"


def batch_line(p: BatchProgress) -> str:
    upserted = "replayed, already committed" if p.skipped else f"upserted {p.rows_upserted:,}"
    if p.dead_letters:
        upserted += f", {p.dead_letters:,} bad records to the dead-letter topic"
    return (f"{p.query} batch {p.batch_id}: {p.input_rows:,} records, "
            f"{p.input_rows_per_s:,.0f} in/s, {p.processed_rows_per_s:,.0f} processed/s, "
            f"{upserted}, {format_lag(p.lag)}; spark {p.spark_ms:,} ms, "
            f"database {p.database_ms:,} ms")


def summary_line(name: str, r: PipelineResult) -> str:
    tables = ", ".join(f"{t}={n:,}" for t, n in r.rows_upserted.items())
    ended = "stopped" if r.stopped else "caught up"
    skipped = f" ({r.batches_skipped} replayed)" if r.batches_skipped else ""
    if r.dead_letters:
        tables += f"; {r.dead_letters:,} bad records sent to the dead-letter topic"
    # Say what is counted: one micro-batch feeding two tables is two sink batches.
    per_table = ", ".join(f"{t} {n}" for t, n in r.batches_by_table.items())
    batches = (f"micro-batches per table: {per_table}" if per_table
               else f"{r.batches} sink batches")
    changes = "".join(f"; schema change: {change}, queries restarted"
                      for change in r.schema_changes)
    return (f"pipeline {name} {ended}: {batches}{skipped}, {r.input_rows:,} records "
            f"in {r.elapsed_s:.1f} s ({r.records_per_s:,.0f} records/s); rows upserted "
            f"{tables}; {format_lag(r.lag)}{changes}")


def _emit(doc: dict[str, Any]) -> None:
    print(json.dumps(doc), flush=True)


def run(args: argparse.Namespace) -> int:
    import warnings

    from millrace.spark.pipeline import Pipeline

    # pyspark's import-time notice about pandas 3 is not the user's business here
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas",
                            category=FutureWarning)
    config = build_config(args)
    as_json = args.output == "json"
    configure_client_logging()  # a refused connection ends in one error line, not WARNs

    def on_batch(p: BatchProgress) -> None:
        if as_json:
            _emit({"event": "batch", **dataclasses.asdict(p)})
        else:
            print(batch_line(p), flush=True)

    if not as_json:
        print(f"pipeline {config.name}: {config.source.subscribe} -> "
              f"{', '.join(config.sink_tables())} in {config.database} "
              f"(trigger {config.trigger})", file=sys.stderr, flush=True)
    def on_schema_change(change: str) -> None:
        if as_json:
            _emit({"event": "schema_change", "change": change})
        else:
            print(f"schema change: {change}; restarting the queries from their checkpoints",
                  flush=True)

    result = Pipeline(config).run(on_batch, until_caught_up=args.until_caught_up,
                                  timeout_s=args.timeout, on_schema_change=on_schema_change)
    if as_json:
        _emit({"event": "summary", "name": config.name, **dataclasses.asdict(result)})
    else:
        print(summary_line(config.name, result), flush=True)
    return 0
