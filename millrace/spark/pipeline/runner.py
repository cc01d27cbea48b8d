"""``Pipeline.run()``: the sinks' streaming queries, each exactly-once into the database.

The sinks that have a batch form (``plan.py``: state sinks and aggregates that merge)
share one Spark streaming query over the pipeline's rows, checkpointed in
``<checkpoint_dir>/shared-query``: the topic is read and parsed once per micro-batch,
which the writer caches while each sink computes its rows from it.  Every other sink is
a query of its own on Spark's stateful aggregation (``<checkpoint_dir>/<table>``).  Each
query's ``foreachBatch`` writer (``sink_writer.SinkWriter``, called on the driver) collects
its sinks' rows as Arrow (or has the executors stage them) and hands them to
``Database.commit``: one transaction that, per
sink, skips a batch id already recorded in ``millrace_batches`` for this query, or
upserts the rows and records the id.  Spark re-runs a batch after a crash with the same
id over the same offsets, so a batch is applied once whatever instant the process died
at -- and the tables of one query always reflect the same offsets.

The calling thread starts the queries, then polls them: each finished micro-batch is
reported to ``progress`` as one ``BatchProgress`` per sink (Spark's progress numbers,
the lag per partition from the source's latest offsets, the rows the writer upserted).
With ``trigger="available-now"`` run returns when every query has processed what the
topic held when it started; with ``processing-time`` it runs until ``stop()``, SIGINT or
SIGTERM (or, with ``until_caught_up=True``, until every query reports no lag), then
stops the queries cleanly: each once Spark has reported every micro-batch its writer
committed (``_stop_when_reported``) -- Spark writes its commit log and reports a batch
only after the writer's commit, and a stop in between would leave a batch in the database
that the summary never counts.  A failed query stops the others and raises
``PipelineError`` with the writer's or Spark's message on one line.
"""

from __future__ import annotations

import json
import logging
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from millrace.common.errors import MillraceError
from millrace.spark.pipeline.bad_records import (
    BadRecordPolicy,
    bad_record_message,
    column_limits,
)
from millrace.spark.pipeline.config import REGISTRY_FORMATS, PipelineConfig
from millrace.spark.pipeline.plan import (
    SinkPlan,
    build_plan,
    spark_message,
)
from millrace.spark.pipeline.sink_writer import PipelineError, SinkWriter
from millrace.spark.sinks import Database, open_database

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger(__name__)
POLL_S = 0.2
SHARED_CHECKPOINT = "shared-query"  # not a valid table name: never a sink's own checkpoint
# how long a sink query may take to create its sources before the next one starts anyway
SOURCE_INIT_TIMEOUT_S = 120.0
STOP_GRACE_S = 30.0  # how long a stop waits for Spark to report committed batches


def _await_sources(query: StreamingQuery, timeout_s: float = SOURCE_INIT_TIMEOUT_S) -> None:
    """Wait until ``query`` has created its sources (or stopped), at most ``timeout_s``.

    Spark's Python streaming source runner adds its environment variables to the data
    source's shared ``PythonFunction`` map when a query creates its source; another query
    serialising a task that holds the same map at that instant writes a corrupt task
    (``java.io.OptionalDataException`` in every task of the stage).  Once one query has
    created its source the keys exist and later queries only replace their values, so the
    pipeline starts its sink queries one after the other.
    """
    deadline = time.monotonic() + timeout_s
    while query.isActive and time.monotonic() < deadline:
        if not str(query.status.get("message", "")).startswith("Initializing"):
            return
        time.sleep(0.05)


@dataclass
class BatchProgress:
    """One finished micro-batch, as one sink saw it."""

    query: str  # the sink: "<pipeline name>.<table>" (sinks may share one Spark query)
    batch_id: int
    input_rows: int
    input_rows_per_s: float
    processed_rows_per_s: float
    lag: dict[str, int]  # "topic-partition" -> records behind the latest offset
    rows_upserted: int  # rows inserted or changed in the table by this batch
    table: str
    skipped: bool = False  # committed before a restart: the replay changed nothing
    duration_ms: int = 0  # the whole trigger, as Spark measured it
    spark_ms: int = 0  # the writer's wait for the batch's rows (the Spark job + toArrow)
    database_ms: int = 0  # the writer's database transaction
    dead_letters: int = 0  # bad records this batch sent to the dead-letter topic

    @property
    def total_lag(self) -> int:
        return sum(self.lag.values())


@dataclass
class PipelineResult:
    batches: int  # sink batches: each query's micro-batches times its sinks
    input_rows: int  # records read from the topic (every sink sees them all: max)
    rows_upserted: dict[str, int]  # table -> rows inserted or changed
    elapsed_s: float  # from starting the queries to the last one finishing
    records_per_s: float  # input_rows / elapsed_s
    input_rows_by_query: dict[str, int] = field(default_factory=dict)  # by sink
    lag: dict[str, int] = field(default_factory=dict)  # at the end, the largest per partition
    batches_skipped: int = 0  # replays of batches committed before a restart
    stopped: bool = False  # ended by stop()/a signal instead of catching up
    queries: int = 0  # Spark streaming queries (one may feed several sinks)
    # table -> micro-batches its query completed in this run (with or without rows)
    batches_by_table: dict[str, int] = field(default_factory=dict)
    dead_letters: int = 0  # bad records sent to the dead-letter topic (errors_tolerance all)
    # registry formats: each newer version that restarted the queries, and what it added
    schema_changes: list[str] = field(default_factory=list)


def _stop_when_reported(t: _Tracked, grace_s: float = STOP_GRACE_S) -> None:
    """Stop ``t``'s query once Spark has reported the last micro-batch its writer
    committed (at most ``grace_s`` later).  The writer runs on Spark's callback thread;
    ``list`` copies its batch ids in one step."""
    deadline = time.monotonic() + grace_s
    while t.query.isActive and time.monotonic() < deadline:
        last = t.query.lastProgress
        reported = -1 if last is None else int(last["batchId"])
        if max(list(t.writer.outcomes), default=-1) <= reported:
            break
        time.sleep(0.02)
    t.query.stop()


def offsets_lag(source: dict[str, Any]) -> dict[str, int]:
    """"topic-partition" -> latestOffset - endOffset from one source's progress."""
    def load(value: Any) -> Any:
        if isinstance(value, str):
            try:
                return json.loads(value)
            except ValueError:
                return None
        return value

    end, latest = load(source.get("endOffset")), load(source.get("latestOffset"))
    if not isinstance(end, dict) or not isinstance(latest, dict):
        return {}
    lag: dict[str, int] = {}
    for topic, partitions in latest.items():
        if not isinstance(partitions, dict):
            continue
        done = end.get(topic) or {}
        for partition, offset in partitions.items():
            lag[f"{topic}-{partition}"] = max(int(offset) - int(done.get(partition, 0)), 0)
    return lag


@dataclass
class SchemaEvolution(Exception):  # an event the run handles by restarting
    """A query stopped at a record of a newer registered version (``registry.py``)."""

    subject: str
    version: int  # the record's version
    schema_id: int
    where: str  # topic-partition@offset
    reader_version: int  # the version the query read with
    partial: PipelineResult | None = None  # what the stopped attempt did

    def __str__(self) -> str:
        return (f"records of {self.where} have version {self.version} of subject "
                f"{self.subject}; the query read version {self.reader_version}")


@dataclass
class _Tracked:
    name: str  # the Spark query's name
    writer: SinkWriter
    query: StreamingQuery
    reported: set[int] = field(default_factory=set)
    input_rows: int = 0
    rows_upserted: dict[str, int] = field(default_factory=dict)  # table -> rows
    skipped: int = 0  # sink batches replayed after a restart
    lag: dict[str, int] = field(default_factory=dict)
    last_batch: int = -1

    @property
    def plans(self) -> list[SinkPlan]:
        return self.writer.plans


class Pipeline:
    def __init__(self, config: PipelineConfig, spark: SparkSession | None = None,
                 source: DataFrame | None = None) -> None:
        """``source``: a streaming frame with Kafka's columns to use instead of the
        configured source (tests)."""
        config.validate()
        self.config = config
        self.spark = spark
        self.source = source
        self._stop = threading.Event()

    def stop(self) -> None:
        """Ask ``run`` to stop the queries and return (any thread, signal handlers)."""
        self._stop.set()

    def checkpoint(self, table: str | None) -> str:
        """The checkpoint of a sink's own query, or (None) of the shared query."""
        base = self.config.checkpoint_dir
        if "://" not in base:  # a local path: absolute, executors run in other directories
            base = str(Path(base).resolve())
        return f"{base.rstrip('/')}/{table or SHARED_CHECKPOINT}"

    # ------------------------------------------------------------------ run
    def run(self, progress: Callable[[BatchProgress], None] | None = None, *,
            until_caught_up: bool = False, timeout_s: float | None = None,
            on_schema_change: Callable[[str], None] | None = None) -> PipelineResult:
        """Run every sink query (see the module doc); ``timeout_s`` stops it after that long.
        ``on_schema_change``: told what changed when a newer registered version restarts
        the queries (registry formats)."""
        _check_reachable(self.config.source.client_config())
        own_session = self.spark is None
        spark = self.spark
        if spark is None:
            from pyspark.sql import SparkSession

            own_session = SparkSession.getActiveSession() is None
            from millrace.spark.session import local_session

            spark = local_session(f"millrace-pipeline-{self.config.name}",
                                  master=self.config.spark_master,
                                  conf=self.config.spark_conf)
        restore = self._install_signal_handlers()
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        results: list[PipelineResult] = []
        changes: list[str] = []
        restarted_for: set[tuple[str, int, int]] = set()
        try:
            while True:
                left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
                try:
                    results.append(self._run_once(spark, progress, until_caught_up, left))
                    break
                except SchemaEvolution as evolution:
                    if evolution.partial is not None:
                        results.append(evolution.partial)
                    seen = (evolution.subject, evolution.version, evolution.reader_version)
                    if seen in restarted_for:  # the restart did not widen the query
                        raise PipelineError(
                            f"pipeline {self.config.name}: {evolution} again after a "
                            "restart for it; stopping rather than restarting in a loop"
                        ) from None
                    restarted_for.add(seen)
                    changes.append(self._evolve(evolution))
                    if on_schema_change is not None:
                        on_schema_change(changes[-1])
        finally:
            restore()
            if own_session:
                spark.stop()
        result = _merged(results)
        result.schema_changes = changes
        return result

    def _run_once(self, spark: SparkSession, progress: Callable[[BatchProgress], None] | None,
                  until_caught_up: bool, timeout_s: float | None) -> PipelineResult:
        """Plan, start and watch the queries once; ``SchemaEvolution`` (with what this
        attempt did) when a newer registered version stopped one."""
        tracked: list[_Tracked] = []
        databases: list[Database] = []
        policies: list[BadRecordPolicy] = []
        evolution: SchemaEvolution | None = None
        stopped = False
        started = time.monotonic()
        add_columns = self.config.value_format in REGISTRY_FORMATS
        try:
            with open_database(self.config.database) as database:
                limits = column_limits(database, self.config.sink_tables())
            plans = build_plan(spark, self.config, self.source, limits)
            shared = [plan for plan in plans if plan.shares_query]
            groups = [shared] if shared else []
            groups += [[plan] for plan in plans if not plan.shares_query]
            for group in groups:
                database = open_database(self.config.database)
                databases.append(database)
                for plan in group:
                    database.ensure_table(plan.table_spec, add_columns=add_columns)
                    if self.config.writes_on_executors():
                        database.ensure_staging(plan.table_spec)
            started = time.monotonic()
            for group, database in zip(groups, databases):
                if tracked:
                    _await_sources(tracked[-1].query)
                policies.append(BadRecordPolicy.for_config(self.config))
                tracked.append(self._start(group, database, policies[-1]))
            try:
                stopped = self._watch(tracked, progress, until_caught_up, timeout_s)
            except SchemaEvolution as e:
                evolution = e
        finally:
            elapsed = time.monotonic() - started
            for t in tracked:
                if t.query.isActive:
                    t.query.stop()
                if t.writer.reports is not None:
                    t.writer.reports[0].close()
            for database in databases:
                database.close()
            for policy in policies:
                policy.close()
        result = self._result(tracked, elapsed, stopped)
        if evolution is not None:
            evolution.partial = result
            raise evolution
        return result

    def _evolve(self, evolution: SchemaEvolution) -> str:
        """Check that the subject's latest version only adds fields to the one the stopped
        query read (else ``PipelineError`` naming subject and version); what changed."""
        from millrace.spark.registry import RegistryFormat, check_widening, resolve_reader

        config = self.config
        assert config.schema_registry_url is not None
        spec = RegistryFormat(config.value_format, config.schema_registry_url,
                              evolution.subject, None,
                              _option(config.source.options,
                                      "schema.registry.basic.auth.user.info"))
        try:
            old = resolve_reader(RegistryFormat(spec.format, spec.url, spec.subject,
                                                evolution.reader_version, spec.user_info))
            latest = spec.client().get_latest_version(spec.subject).version
            _, added = check_widening(spec, old, max(latest, evolution.version))
        except MillraceError as e:
            raise PipelineError(f"pipeline {config.name}: records of {evolution.where} were "
                                f"written with version {evolution.version} of subject "
                                f"{evolution.subject}: {e}") from None
        names = ", ".join(f.name for f in added) or "no new columns"
        change = (f"subject {evolution.subject} version {evolution.reader_version} -> "
                  f"{max(latest, evolution.version)} (first seen at {evolution.where}): "
                  f"added {names}")
        log.warning("pipeline %s: %s; restarting the queries from their checkpoints",
                    config.name, change)
        return change

    def _start(self, plans: list[SinkPlan], database: Database,
               policy: BadRecordPolicy | None = None) -> _Tracked:
        from millrace.spark.pipeline.config import Trigger

        trigger = Trigger.parse(self.config.trigger)
        stage_url = self.config.database if self.config.writes_on_executors() else None
        if plans[0].shares_query:
            assert plans[0].rows is not None
            name, frame, mode, checkpoint = (self.config.name, plans[0].rows, "append",
                                             self.checkpoint(None))
        else:
            plan = plans[0]
            name, frame, mode, checkpoint = (f"{self.config.name}.{plan.table}", plan.frame,
                                             plan.output_mode, self.checkpoint(plan.table))
        reports = None
        if trace_reports(self.config):
            from millrace.spark.trace_reports import TraceReporter

            reports = (TraceReporter(self.config.source.client_config(),
                                     "sink " + "+".join(p.table for p in plans)), checkpoint)
        writer = SinkWriter(self.config.name, plans, database, policy, stage_url, reports)
        stream = (frame.writeStream.queryName(name).outputMode(mode)
                  .option("checkpointLocation", checkpoint).foreachBatch(writer))
        if trigger.kind == "available-now":
            stream = stream.trigger(availableNow=True)
        else:
            stream = stream.trigger(processingTime=trigger.interval)
        query = stream.start()
        writer.started(str(query.id))
        return _Tracked(name, writer, query)

    def _watch(self, tracked: list[_Tracked], progress: Callable[[BatchProgress], None] | None,
               until_caught_up: bool, timeout_s: float | None) -> bool:
        """Poll until done; True when ended by stop()/signal/timeout."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            for t in tracked:
                self._report(t, progress)
            failed = next((t for t in tracked if not t.query.isActive
                           and t.query.exception() is not None), None)
            if failed is not None:
                evolution = self._evolution(failed)
                if evolution is not None:
                    raise evolution
                raise self._failure(failed)
            if all(not t.query.isActive for t in tracked):
                for t in tracked:
                    self._report(t, progress, drain=True)
                return False
            if until_caught_up and all(t.last_batch >= 0 and not any(t.lag.values())
                                       for t in tracked):
                return False
            if self._stop.is_set() or (deadline is not None and time.monotonic() > deadline):
                for t in tracked:
                    _stop_when_reported(t)
                for t in tracked:
                    self._report(t, progress, drain=True)
                return True
            self._stop.wait(POLL_S)

    def _evolution(self, t: _Tracked) -> SchemaEvolution | None:
        """A query stopped by ``registry.NewerSchemaError`` (its text is in the writer's
        error or the query's), when the values are a registry format."""
        if self.config.value_format not in REGISTRY_FORMATS:
            return None
        from millrace.spark.registry import NEWER_SCHEMA_TEXT

        for error in (t.writer.error, t.query.exception()):
            if error is None:
                continue
            text = getattr(error, "desc", None) or getattr(error, "getMessage", lambda: "")()
            match = NEWER_SCHEMA_TEXT.search(f"{text}\n{error}")
            if match is not None:
                return SchemaEvolution(subject=match[2], version=int(match[1]),
                                       schema_id=int(match[3]), where=match[4],
                                       reader_version=int(match[5]))
        return None

    def _failure(self, t: _Tracked) -> PipelineError:
        """The error of a failed query: the writer's own exception when it raised one."""
        error = t.writer.error
        if isinstance(error, MillraceError):
            message = str(error)
        elif error is not None:
            # the first line only: a Py4J error carries the whole JVM stack after it
            message = f"{type(error).__name__}: {spark_message(error)}"
        else:
            exception = t.query.exception()
            message = spark_message(exception) if exception is not None else "stopped"
        if not isinstance(error, MillraceError):  # plan.guarded's words, not Spark's
            message = bad_record_message(error or t.query.exception()) or message
        # named by its sinks: "<pipeline>.<table>[+<table>...]"
        return PipelineError(f"sink query {self.config.name}.{t.writer.label} failed: "
                             f"{message}")

    def _report(self, t: _Tracked, progress: Callable[[BatchProgress], None] | None,
                drain: bool = False) -> None:
        last = t.query.lastProgress
        if last is None:
            return
        entries = [last]
        if drain or int(last["batchId"]) > t.last_batch + 1:
            entries = list(t.query.recentProgress)
        for entry in entries:
            batch_id = int(entry["batchId"])
            if batch_id in t.reported or batch_id not in t.writer.outcomes:
                continue
            t.reported.add(batch_id)
            outcomes = t.writer.outcomes[batch_id]
            spark_s, database_s = t.writer.timings.get(batch_id, (0.0, 0.0))
            sources = entry.get("sources") or []
            lag: dict[str, int] = {}
            for source in sources:
                lag.update(offsets_lag(source))
            rows = int(entry.get("numInputRows") or 0)
            t.input_rows += rows
            if batch_id > t.last_batch:
                t.last_batch = batch_id
                t.lag = lag
            for plan in t.plans:
                outcome = outcomes.get(plan.table)
                t.rows_upserted[plan.table] = t.rows_upserted.get(plan.table, 0) + (outcome or 0)
                t.skipped += outcome is None
                if progress is None:
                    continue
                progress(BatchProgress(
                    query=f"{self.config.name}.{plan.table}", batch_id=batch_id,
                    input_rows=rows,
                    input_rows_per_s=float(entry.get("inputRowsPerSecond") or 0.0),
                    processed_rows_per_s=float(entry.get("processedRowsPerSecond") or 0.0),
                    lag=lag, rows_upserted=outcome or 0, table=plan.table,
                    skipped=outcome is None,
                    duration_ms=int((entry.get("durationMs") or {}).get("triggerExecution",
                                                                         0)),
                    spark_ms=round(spark_s * 1000), database_ms=round(database_s * 1000),
                    dead_letters=t.writer.dead_letters.get(batch_id, 0)))

    def _result(self, tracked: list[_Tracked], elapsed: float, stopped: bool
                ) -> PipelineResult:
        input_rows = max((t.input_rows for t in tracked), default=0)
        lag: dict[str, int] = {}
        for t in tracked:
            for partition, behind in t.lag.items():
                lag[partition] = max(lag.get(partition, 0), behind)
        return PipelineResult(
            batches=sum(len(t.reported) * len(t.plans) for t in tracked),
            input_rows=input_rows,
            rows_upserted={plan.table: t.rows_upserted.get(plan.table, 0)
                           for t in tracked for plan in t.plans},
            elapsed_s=elapsed, records_per_s=input_rows / elapsed if elapsed > 0 else 0.0,
            input_rows_by_query={f"{self.config.name}.{plan.table}": t.input_rows
                                 for t in tracked for plan in t.plans}, lag=lag,
            batches_skipped=sum(t.skipped for t in tracked), stopped=stopped,
            queries=len(tracked),
            batches_by_table={plan.table: len(t.reported) for t in tracked for plan in t.plans},
            dead_letters=sum(sum(t.writer.dead_letters.values()) for t in tracked))

    def _install_signal_handlers(self) -> Callable[[], None]:
        """SIGINT/SIGTERM -> stop() while running on the main thread; returns the undo."""
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        previous: dict[int, Any] = {}

        def handler(signum: int, frame: FrameType | None) -> None:
            self.stop()

        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, handler)

        def restore() -> None:
            for signum, old in previous.items():
                signal.signal(signum, old)

        return restore


def trace_reports(config: PipelineConfig) -> bool:
    """The source option ``traceReports``: the queries report their micro-batches and
    database writes to the brokers' record tracers (``millrace.spark.trace_reports``)."""
    value = _option(config.source.options, "traceReports")
    return value is not None and str(value).strip().lower() == "true"


def _option(options: dict[str, Any], name: str) -> str | None:
    """A source option by its case-insensitive name."""
    found = [str(v) for k, v in options.items() if str(k).lower() == name.lower()]
    return found[0] if found else None


def _merged(results: list[PipelineResult]) -> PipelineResult:
    """One result of several attempts (restarts after a schema change), in order."""
    if len(results) == 1:
        return results[0]
    last = results[-1]

    def total(name: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in results:
            for k, v in getattr(r, name).items():
                out[k] = out.get(k, 0) + v
        return out

    elapsed = sum(r.elapsed_s for r in results)
    rows = sum(r.input_rows for r in results)
    return PipelineResult(
        batches=sum(r.batches for r in results), input_rows=rows,
        rows_upserted=total("rows_upserted"), elapsed_s=elapsed,
        records_per_s=rows / elapsed if elapsed > 0 else 0.0,
        input_rows_by_query=total("input_rows_by_query"), lag=last.lag,
        batches_skipped=sum(r.batches_skipped for r in results), stopped=last.stopped,
        queries=last.queries, batches_by_table=total("batches_by_table"),
        dead_letters=sum(r.dead_letters for r in results))


def _check_reachable(client_config: dict[str, str]) -> None:
    """Before Spark starts: a broker must answer (the admin client gives up in about a
    second and a half when every address refuses), else ``NoBrokerAvailableError`` names
    the addresses -- instead of queries that wait on offsets until they are stopped.  The
    admin client connects with the source's ``kafka.*`` settings (TLS, SASL), so a wrong
    password also ends the run here, with the broker's message.  Settings it does not
    know are Spark's own Kafka source's (``format = "kafka"``: Java keystores); when
    security hangs on them, the check is Spark's to make."""
    from millrace.client.admin import KafkaAdminClient
    from millrace.spark.options import admin_config

    config = admin_config(client_config)
    if any(k.startswith(("ssl.", "sasl.")) for k in client_config.keys() - config.keys()):
        return
    with KafkaAdminClient(config) as admin:
        admin.list_topics()
