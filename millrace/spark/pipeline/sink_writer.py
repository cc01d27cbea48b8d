"""``SinkWriter``: the ``foreachBatch`` function of one pipeline query and its sinks.

Spark calls it on the driver once per micro-batch.  It computes each sink's rows from the
batch (as Arrow on the driver, or staged in the database by the executors:
``sinks/staged.py``), deals with the batch's bad records first (``bad_records.py``), and
hands the rows to ``Database.commit``: one transaction per micro-batch over every sink
of the query, a batch id already recorded skipped (see ``runner.py`` for the whole).
With the source option ``traceReports=true`` it then reports ``sink.write`` for the
batch's offsets (from the query's offset log) to the brokers' record tracers
(``millrace.spark.trace_reports``).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from millrace.common.errors import MillraceError
from millrace.spark.pipeline.bad_records import ERROR_COLUMN, BadRecordPolicy
from millrace.spark.pipeline.plan import MAX_EVENT_TIME, SinkPlan
from millrace.spark.sinks import Database, SinkBatch, TableSpec

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

    from millrace.spark.sinks.staged import StagedRows
    from millrace.spark.trace_reports import TraceReporter

QUERY_ID_WAIT_S = 120.0


class PipelineError(MillraceError):
    """A sink query failed (the message is the first line of the cause)."""



class SinkWriter:
    """The ``foreachBatch`` function of one query and its sinks; owns their connection.

    Called by Spark on a driver callback thread, one batch at a time.  With several
    sinks (a shared query) the micro-batch is cached while each sink's batch form
    computes its rows from it, and the transaction, on a thread of its own, writes each
    sink's rows while Spark computes the next sink's; a single sink on its own query
    writes the batch as is.

    Bad records (``bad_records.py``): a shared query's micro-batch carries
    ``ERROR_COLUMN``; its bad rows reach the driver with the first state sink's rows (or,
    without a state sink, through one more read of the cached batch) and ``policy``
    raises or sends them to the dead-letter topic before any sink's rows are handed to
    the transaction, so before it commits."""

    def __init__(self, pipeline: str, plans: list[SinkPlan], database: Database,
                 policy: BadRecordPolicy | None = None, stage_url: str | None = None,
                 reports: tuple[TraceReporter, str] | None = None) -> None:
        """``reports``: the reporter and the query's checkpoint (``traceReports``)."""
        self.pipeline = pipeline
        self.plans = plans
        self.database = database
        self.policy = policy
        # executor writes (sinks/staged.py): the tasks stage the rows in this database
        self.stage_url = stage_url
        self.shared = plans[0].shares_query
        # batch id -> bad records sent to the dead-letter topic
        self.dead_letters: dict[int, int] = {}
        self.query_id: str | None = None
        self._query_id_set = threading.Event()
        # batch id -> table -> rows upserted (None: skipped, committed before a restart)
        self.outcomes: dict[int, dict[str, int | None]] = {}
        # batch id -> (spark s, database s): computing the rows, then the time the commit
        # took after the last rows were computed (with several sinks it starts earlier)
        self.timings: dict[int, tuple[float, float]] = {}
        self.error: BaseException | None = None
        self.reports = reports

    @property
    def label(self) -> str:
        return "+".join(plan.table for plan in self.plans)

    def started(self, query_id: str) -> None:
        self.query_id = query_id
        self._query_id_set.set()

    def __call__(self, frame: DataFrame, batch_id: int) -> None:
        try:
            if not self._query_id_set.wait(QUERY_ID_WAIT_S):
                raise PipelineError(f"{self.label}: query id not known")
            assert self.query_id is not None
            checked = self.shared and ERROR_COLUMN in frame.columns
            if self.shared and (len(self.plans) > 1 or
                                (checked and not self.plans[0].bad_rows_inline)):
                outcome, timing = self._commit_while_computing(frame, batch_id, checked)
            else:
                started = time.perf_counter()
                parts = [self._collect_one(frame, batch_id)]
                collected = time.perf_counter()
                outcome = self.database.commit(self.pipeline, self.query_id, batch_id, parts)
                timing = (collected - started, time.perf_counter() - collected)
            self.timings[batch_id] = timing
            self.outcomes[batch_id] = outcome
            if self.reports is not None:
                self._report_written(batch_id, outcome, timing[1])
        except BaseException as e:
            self.error = e
            # Spark matches the Python error's text with a regular expression that overflows
            # the stack on a long text (a Java stack inside a Python traceback): hand back
            # one short line; run() reports self.error itself.
            first = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
            raise PipelineError(f"{self.label} batch {batch_id}: "
                                f"{type(e).__name__}: {first}") from None

    def _report_written(self, batch_id: int, outcome: dict[str, int | None],
                        commit_s: float) -> None:
        """``sink.write`` for the batch's offsets, now that its transaction committed
        (never raises: ``TraceReporter`` logs its failures)."""
        from millrace.spark.trace_reports import batch_offsets

        assert self.reports is not None
        reporter, checkpoint = self.reports
        try:
            found = batch_offsets(checkpoint, batch_id)
            if found is None:
                reporter.failed("the offset log", FileNotFoundError(
                    f"no offsets of batch {batch_id} in {checkpoint}/offsets"))
                return
            ranges, _ = found
            written = ", ".join(f"{table} ({'already committed' if rows is None else rows})"
                                for table, rows in outcome.items())
            reporter.report("sink.write", ranges,
                            f"micro-batch {batch_id} committed in {commit_s * 1000:.0f} "
                            f"ms: {written}",
                            attrs={"batch_id": batch_id, "tables": self.label,
                                   "rows": sum(r or 0 for r in outcome.values())})
        except Exception as e:  # the batch is committed: a report never fails it
            reporter.failed("sink.write", e)

    def _collect_one(self, frame: DataFrame, batch_id: int) -> SinkBatch:
        plan = self.plans[0]
        if not self.shared:
            if self.stage_url is not None:
                return SinkBatch(plan.table, plan.spec, self._stage(frame, plan.spec,
                                                                    batch_id)[0])
            return SinkBatch(plan.table, plan.spec, frame.toArrow())
        # one read of the batch, no cache -- but staged rows and the bad ones are two
        cache = self.stage_url is not None and ERROR_COLUMN in frame.columns
        if cache:
            frame.persist()
        try:
            part, bad = self._batch_rows(plan, frame, batch_id)
        finally:
            if cache:
                frame.unpersist()
        if bad is not None:
            self._handle_bad(bad, batch_id)
        return part

    def _handle_bad(self, bad: pa.Table | None, batch_id: int) -> None:
        """Raise for a bad record, or send them to the dead-letter topic (flushed)."""
        if bad is None or bad.num_rows == 0:
            return
        if self.policy is None:
            raise PipelineError(f"{bad.num_rows} bad record(s) and no errors_tolerance")
        self.dead_letters[batch_id] = self.policy.handle(bad)

    def _bad_rows(self, frame: DataFrame) -> pa.Table:
        """The bad rows of a cached micro-batch (one more read of the cache)."""
        from pyspark.sql import functions as F

        return frame.where(F.col(ERROR_COLUMN).isNotNull()).select(ERROR_COLUMN).toArrow()

    def _commit_while_computing(self, frame: DataFrame, batch_id: int, checked: bool = False
                                ) -> tuple[dict[str, int | None], tuple[float, float]]:
        """Several sinks on a cached batch: the transaction runs on a thread of its own
        and takes each sink's rows as soon as Spark has computed them, so the database
        writes the first sink while Spark computes the next.  A failure on either side
        rolls the transaction back and is raised here."""
        assert self.query_id is not None
        handoff: queue.Queue[SinkBatch | BaseException | None] = queue.Queue()

        def parts() -> Iterator[SinkBatch]:
            while (item := handoff.get()) is not None:
                if isinstance(item, BaseException):
                    raise PipelineError("rolled back: computing a sink's rows failed")
                yield item

        result: list[dict[str, int | None]] = []
        failure: list[BaseException] = []

        def commit() -> None:
            assert self.query_id is not None
            try:
                result.append(self.database.commit(self.pipeline, self.query_id, batch_id,
                                                   parts()))
            except BaseException as e:
                failure.append(e)

        started = time.perf_counter()
        committer = threading.Thread(target=commit, name=f"millrace-commit-{self.label}",
                                     daemon=True)
        frame.persist()
        try:
            committer.start()
            try:
                for i, plan in enumerate(self.plans):
                    part, bad = self._batch_rows(plan, frame, batch_id)
                    if checked and i == 0:  # before any rows reach the transaction
                        self._handle_bad(bad if plan.bad_rows_inline
                                         else self._bad_rows(frame), batch_id)
                    handoff.put(part)
            except BaseException as e:
                handoff.put(e)
                committer.join()
                raise
            handoff.put(None)
            computed = time.perf_counter()
            committer.join()
        finally:
            frame.unpersist()
        if failure:
            raise failure[0]
        return result[0], (computed - started, time.perf_counter() - computed)

    def _stage(self, rows: DataFrame, spec: TableSpec, batch_id: int,
               event_time: str | None = None) -> tuple[StagedRows, int | None]:
        """Executor writes: every task of ``rows`` stages its share (``staged.py``)."""
        from millrace.spark.sinks.staged import stage_rows

        assert self.stage_url is not None and self.query_id is not None
        return stage_rows(rows, self.stage_url, spec, self.query_id, batch_id, event_time)

    def _staged_batch_rows(self, plan: SinkPlan, frame: DataFrame, batch_id: int
                           ) -> tuple[SinkBatch, pa.Table | None]:
        """``_batch_rows`` with the rows staged by the executors: only the bad rows (few)
        come to the driver, through one more read of the batch."""
        from pyspark.sql import functions as F

        assert plan.batch is not None
        spec = plan.table_spec
        rows = plan.batch(frame)
        bad = None
        if ERROR_COLUMN in rows.columns:
            bad = rows.where(F.col(ERROR_COLUMN).isNotNull()).select(ERROR_COLUMN).toArrow()
            rows = rows.where(F.col(ERROR_COLUMN).isNull()).drop(ERROR_COLUMN)
        merge = spec.mode == "merge"
        staged, latest = self._stage(rows, spec, batch_id, MAX_EVENT_TIME if merge else None)
        if not merge:
            return SinkBatch(plan.table, spec, staged), bad
        return SinkBatch(plan.table, spec, staged, max_event_time_us=latest,
                         watermark_delay_ms=plan.watermark_delay_ms), bad

    def _batch_rows(self, plan: SinkPlan, frame: DataFrame, batch_id: int
                    ) -> tuple[SinkBatch, pa.Table | None]:
        """The sink's rows, and the batch's bad rows when they came along (state sinks)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if self.stage_url is not None:
            return self._staged_batch_rows(plan, frame, batch_id)
        assert plan.batch is not None
        spec = plan.table_spec
        rows = plan.batch(frame).toArrow()
        bad = None
        if ERROR_COLUMN in rows.column_names:
            errors = rows[ERROR_COLUMN]
            if errors.null_count < rows.num_rows:  # the good path skips both filters
                bad = rows.filter(pc.is_valid(errors)).select([ERROR_COLUMN])
                rows = rows.filter(pc.is_null(errors))
            rows = rows.drop_columns([ERROR_COLUMN])
        if spec.mode != "merge":
            return SinkBatch(plan.table, spec, rows), bad
        # microseconds since the epoch (Spark's timestamps reach Arrow in microseconds)
        latest = pc.max(pc.cast(rows[MAX_EVENT_TIME], pa.int64())).as_py()
        return SinkBatch(plan.table, spec, rows.drop_columns([MAX_EVENT_TIME]),
                         max_event_time_us=latest,
                         watermark_delay_ms=plan.watermark_delay_ms), bad
