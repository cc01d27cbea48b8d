"""Exactly once through crashes: ``millrace pipeline run`` as a child process, killed with
SIGKILL twice in the middle of a run, then restarted to completion; the tables must equal
the plain-Python fold of every event produced -- no batch lost, none applied twice.

The kills are placed by watching the database, not the clock: the first once the child has
committed its first batch, the second once the restarted child has committed a few more.
The child runs in its own process group (Python, the JVM and Spark's Python workers), and
the whole group is killed at once and gone before the next run starts, so two runs never
share a checkpoint.  The same test runs against SQLite and against PostgreSQL, both in the
long profile (``scripts/pipeline-soak.sh``; CI runs the driver kill on the Spark cluster,
``test_cluster_restarts.py``).
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pipeline_events import (
    VALUE_SCHEMA,
    Event,
    PipelineChild,
    assert_tables,
    create_topic,
    events,
    fold,
    pipeline_args,
    produce,
)

from millrace.spark.sinks import open_database
from millrace.testing.broker_process import BrokerProcess
from millrace.testing.postgres import PostgresServer

pytestmark = [pytest.mark.integration, pytest.mark.slow]

BATCH = 200  # maxOffsetsPerTrigger: many small batches per run
SEEDS = {"sqlite": 21, "postgresql": 22}
WAIT_S = 300.0


def committed(database: str, name: str) -> int:
    db = open_database(database)
    try:
        return db.committed_batches(name)
    finally:
        db.close()


def wait_for_commits(child: PipelineChild, database: str, name: str, at_least: int) -> int:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if child.proc.poll() is not None:
            raise AssertionError(f"pipeline exited with {child.proc.returncode} before "
                                 f"{at_least} commits:\n{child.output()}")
        try:
            n = committed(database, name)
        except BaseException:
            child.kill()  # never leave a pipeline running behind a failed check
            raise
        if n >= at_least:
            return n
        time.sleep(0.05)
    child.kill()
    raise AssertionError(f"fewer than {at_least} batches committed in {WAIT_S}s:\n"
                         f"{child.output()}")


@pytest.fixture(scope="module")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    with PostgresServer(tmp_path_factory.mktemp("postgres")) as server:
        yield server


# long profile, both dialects (scripts/pipeline-soak.sh runs them): CI runs the same kill
# -9 of the driver's process group and restart from the checkpoint into PostgreSQL on the
# Spark cluster (test_cluster_restarts.py's driver test, which also checks that the batch
# the database had and Spark's commit log lacked was skipped), and the SQLite sink through
# an executor kill and a worker kill (test_cluster_faults.py)
@pytest.mark.parametrize("dialect", [pytest.param("sqlite", marks=pytest.mark.long),
                                     pytest.param("postgresql", marks=pytest.mark.long)])
def test_killed_twice_then_restarted_the_tables_equal_the_fold(
        dialect: str, broker: BrokerProcess, tmp_path: Path,
        request: pytest.FixtureRequest) -> None:
    if dialect == "sqlite":
        database = f"sqlite:///{tmp_path / 'millrace.db'}"
    else:
        database = request.getfixturevalue("postgres").url
    topic = name = f"eo-{dialect}"
    create_topic(broker.bootstrap, topic, 2)
    produced: list[Event] = events(2000, seed=SEEDS[dialect], keys=120)
    produce(broker.bootstrap, topic, produced)

    def args(trigger: str) -> list[str]:
        return pipeline_args(broker.bootstrap, topic, name, database,
                             tmp_path / "checkpoints", BATCH, trigger)

    log = tmp_path / "pipeline.log"
    # run 1: killed right after its first commit
    child = PipelineChild(args("processing-time=100ms"), log)
    first = wait_for_commits(child, database, name, 1)
    child.kill()

    # events keep arriving while the pipeline is down
    late = events(600, seed=SEEDS[dialect], keys=120, start=2000)
    produce(broker.bootstrap, topic, late)
    produced += late

    # run 2: killed a few commits later, mid-stream
    child = PipelineChild(args("processing-time=100ms"), log)
    second = wait_for_commits(child, database, name, first + 3)
    child.kill()
    total_batches = 2 * len(produced) // BATCH
    assert second < total_batches, "the second kill came after the end of the stream"

    # run 3: to completion
    child = PipelineChild(args("available-now"), log)
    assert child.wait(WAIT_S) == 0, child.output()
    lines = [json.loads(line) for line in child.output().splitlines()
             if line.startswith("{")]
    summary = lines[-1]
    assert summary["event"] == "summary" and not summary["stopped"], summary
    assert summary["lag"] == {f"{topic}-0": 0, f"{topic}-1": 0}
    assert_tables(database, fold(produced))


def test_sigterm_stops_a_running_pipeline_cleanly(broker: BrokerProcess, tmp_path: Path
                                                   ) -> None:
    create_topic(broker.bootstrap, "sigterm", 1)
    produced = events(1500, seed=9, keys=100)
    produce(broker.bootstrap, "sigterm", produced)
    database = f"sqlite:///{tmp_path / 'millrace.db'}"
    child = PipelineChild(
        ["--bootstrap-server", broker.bootstrap, "--topic", "sigterm",
         "--option", "startingOffsets=earliest", "--option", "maxOffsetsPerTrigger=100",
         "--value-schema", VALUE_SCHEMA, "--state-table", "orders", "--key", "order_id",
         "--database", database, "--checkpoint", str(tmp_path / "checkpoints"),
         "--trigger", "processing-time=100ms", "--output", "json"], tmp_path / "run.log")
    try:
        wait_for_commits(child, database, "sigterm", 2)
        child.proc.send_signal(signal.SIGTERM)
        assert child.wait(120) == 0, child.output()
    finally:
        child.kill()  # the JVM and workers, should any outlive the driver
    summary = [json.loads(line) for line in child.output().splitlines()
               if line.startswith("{")][-1]
    assert summary["event"] == "summary" and summary["stopped"] is True, summary
    assert 200 <= summary["input_rows"] < len(produced)
    # what was committed is whole batches: every row is the event at its offset, and
    # the latest of its key among the events read so far
    db = open_database(database)
    try:
        rows = db.query('SELECT order_id, status, "offset" FROM orders')
        batches = db.committed_batches("sigterm")
    finally:
        db.close()
    assert batches >= 2
    read = max(offset for _, _, offset in rows) + 1  # the last event read is in the table
    expected = {e.order_id: (e.status, offset) for offset, e in enumerate(produced[:read])}
    assert {r[0]: (r[1], r[2]) for r in rows} == expected
