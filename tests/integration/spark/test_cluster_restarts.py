"""Faults the pipeline survives on a Spark cluster, second half: its driver killed and
restarted, a broker that leads a partition killed, PostgreSQL restarted -- each in the
middle of a run, and each run ending with the database equal to the fold of the input.

The Spark standalone cluster that conftest's ``cluster`` shares with the other cluster
modules (a master, two one-core workers), one 3-broker ``LocalCluster`` (ZooKeeper; topics
replicated 3 times, ``min.insync.replicas=2``) and one PostgreSQL serve the module.  Every driver is a child process, ``millrace pipeline run
--master spark://...`` (through ``restart_driver.py``, which adds the test-only hooks), so
the driver, the executors and the workers are separate JVMs, as in production.  Each test
has its own topic, pipeline name, tables and checkpoint.

Placing the faults by state, never by the clock:

- The driver: ``restart_driver.py`` kills its own process group (``kill -9``) the moment
  the database has committed batch 1 -- before Spark's commit log records it, the one
  instant at which a restart must replay a batch the database already has.  The restarted
  driver must report that batch skipped, and the tables must equal the fold.  Before the
  restart the master must have dropped the dead driver's application and every executor
  must have exited (``wait_application_gone``).
- The negative control: the same kill with ``MILLRACE_TEST_UNGUARDED=1`` (a sink whose
  batch-id records are deleted before each transaction, i.e. no guard): the replayed batch
  is merged into the aggregates a second time, and the checker must see it.
- PostgreSQL, then a broker, in one run (two tests' worth of faults for one driver's
  start): once the first batch is in the database, ``pg_ctl restart -m fast``, which ends
  the driver's connection.  The next batch's commit finds the connection lost, and the
  PostgreSQL sink reconnects and runs the transaction again (``postgres.py``: bounded
  retry, safe by the batch-id guard).  Right after, the leader of one of the topic's
  partitions (not the controller) gets SIGKILL (``millrace.demo.cluster.LeaderKill``)
  while the run continues; the executors' readers must find the new leader.  The run
  must end normally and exact.

A fault counts only if it landed mid-run: each test checks that batches were still to
come when it struck.  The demo test runs ``millrace demo --brokers 3 --spark-master ...
--database postgresql://...`` as a user would (its own cluster and leader kill).

``MILLRACE_SOAK_ROUNDS=<n>`` (``scripts/pipeline-soak.sh``) scales the streams up and
repeats the driver kill ``n`` times in one run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from pipeline_events import Event, assert_tables, events, fold, produce
from restart_driver import KILL_AFTER_BATCH, UNGUARDED
from restart_support import (
    Driver,
    app_name,
    committed,
    create_topic_on_cluster,
    restart_pipeline_args,
    restart_postgres,
    until,
    wait_application_gone,
    wait_committed,
)

from millrace.launcher.spark_cluster import SparkStandaloneCluster, spark_missing
from millrace.launcher.zookeeper_process import zookeeper_missing
from millrace.spark.sinks import open_database
from millrace.testing.postgres import PostgresServer

pytestmark = [pytest.mark.integration, pytest.mark.slow]

_missing = spark_missing() or zookeeper_missing()
if _missing:
    pytest.skip(_missing, allow_module_level=True)

from millrace.demo.cluster import LeaderKill, cluster_overrides  # noqa: E402
from millrace.launcher.local_cluster import LocalCluster  # noqa: E402

ROUNDS = int(os.environ.get("MILLRACE_SOAK_ROUNDS", "1"))  # driver kills per run
EVENTS = 600 * ROUNDS
BATCH = 150  # maxOffsetsPerTrigger: EVENTS / BATCH micro-batches
PARTITIONS = 3
SINKS = 2  # orders_<tag> and revenue_<tag>: two batch records per micro-batch
BATCHES = -(-EVENTS // BATCH)


@pytest.fixture(scope="module")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    with PostgresServer(tmp_path_factory.mktemp("postgres")) as server:
        yield server


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    overrides = {**cluster_overrides(3), "default.replication.factor": "3",
                 "min.insync.replicas": "2"}
    with LocalCluster(tmp_path_factory.mktemp("kafka"), 3, overrides=overrides) as cluster:
        yield cluster


def stream(kafka: LocalCluster, topic: str, seed: int) -> list[Event]:
    create_topic_on_cluster(kafka.bootstrap, topic, PARTITIONS)
    produced = events(EVENTS, seed=seed, keys=80)
    produce(kafka.bootstrap, topic, produced)
    return produced


def skipped_batches(driver: Driver) -> set[int]:
    return {e["batch_id"] for e in driver.events() if e["event"] == "batch" and e["skipped"]}


def killed_after(cluster: SparkStandaloneCluster, args: list[str], log: Path,
                 tag: str, batch: int, **hooks: str) -> None:
    """A driver that kills its own group once batch ``batch`` is in the database; returns
    when its application is gone from the cluster."""
    driver = Driver(args, log, **{KILL_AFTER_BATCH: str(batch), **hooks})
    until(f"application {app_name(tag)} on the master",
          lambda: not driver.running() or any(
              a.get("name") == app_name(tag) for a in cluster.applications()))
    code = driver.wait()
    driver.kill()  # the group is gone already; this checks it
    assert code == -9, f"the driver was to kill itself after batch {batch}, it ended " \
                       f"with {code}:\n{driver.output()[-6000:]}"
    assert f"batch {batch} committed, kill -9" in driver.output()
    wait_application_gone(cluster, app_name(tag))


# ---------------------------------------------------------------------------- demo
# long profile: scripts/pipeline-soak.sh runs the demo on three brokers and a Spark cluster
# at length; CI runs the demo on three brokers (test_demo_cluster.py) and the pipeline on
# this cluster (the tests above)
@pytest.mark.long
def test_demo_on_three_brokers_a_spark_cluster_and_postgresql(
        cluster: SparkStandaloneCluster, postgres: PostgresServer,
        tmp_path: Path) -> None:
    """Runs first: its own three brokers come and go before the module's cluster starts."""
    from tests.integration.spark.test_demo import demo

    result = demo("--brokers", "3", "--spark-master", cluster.master_url,
                  "--database", postgres.url, "--events", "1500", "--partitions", "3",
                  "--data-dir", str(tmp_path / "demo"), "--output", "json")
    assert result.returncode == 0, result.stdout + result.stderr[-6000:]
    doc = json.loads(result.stdout)
    assert doc["database"] == postgres.url
    assert doc["pipeline_input_rows"] == 1500 == doc["events_total"]
    assert doc["verification"]["passed"] is True, doc["verification"]
    assert doc["verification"]["orders_actual"] == doc["verification"]["orders_expected"] > 0
    assert any(n.startswith("killed broker ") for n in doc["notes"]), doc["notes"]
    # the pipeline ran on the cluster: the master lists the demo's application, ended
    done = cluster.master.state().get("completedapps", [])
    assert any(app["name"].startswith("millrace") for app in done), done
    assert not cluster.applications() and not cluster.executor_pids()


# ---------------------------------------------------------------------------- the driver
def test_driver_killed_after_a_commit_resumes_exactly_once(
        cluster: SparkStandaloneCluster, kafka: LocalCluster,
        postgres: PostgresServer, tmp_path: Path) -> None:
    tag = "driver"
    produced = stream(kafka, tag, seed=31)
    args = restart_pipeline_args(cluster.master_url, kafka.bootstrap, tag, postgres.url,
                         tmp_path / "checkpoints", BATCH, tag)
    log = tmp_path / "driver.log"
    # ROUNDS kills, each right after the database committed the next batch but one
    for round_ in range(ROUNDS):
        killed_after(cluster, args, log, tag, batch=2 * round_ + 1)
        assert committed(postgres.url, tag) == SINKS * (2 * round_ + 2)
    driver = Driver(args, log)
    assert driver.wait() == 0, driver.output()[-6000:]
    summary = driver.summary()
    assert summary["event"] == "summary" and not summary["stopped"], summary
    assert set(summary["lag"].values()) == {0}, summary
    # the batch that was in the database but not in Spark's commit log ran again, and
    # the guard skipped it (for both sinks)
    assert 2 * ROUNDS - 1 in skipped_batches(driver), driver.output()[-6000:]
    assert summary["batches_skipped"] == SINKS, summary
    assert committed(postgres.url, tag) == SINKS * BATCHES
    assert_tables(postgres.url, fold(produced), f"orders_{tag}", f"revenue_{tag}")
    wait_application_gone(cluster, app_name(tag))


# long profile (MILLRACE_TESTS=all): the negative control of the driver-kill test above;
# CI keeps the fold checker's own control (test_cluster_faults.py) within its time budget
@pytest.mark.long
def test_without_the_guard_the_same_kill_doubles_a_batch(
        cluster: SparkStandaloneCluster, kafka: LocalCluster,
        postgres: PostgresServer, tmp_path: Path) -> None:
    """The negative control: the checker of the test above must fail on a sink without
    the batch-id guard, under the same kill."""
    tag = "unguarded"
    produced = stream(kafka, tag, seed=32)
    args = restart_pipeline_args(cluster.master_url, kafka.bootstrap, tag, postgres.url,
                         tmp_path / "checkpoints", BATCH, tag)
    log = tmp_path / "driver.log"
    killed_after(cluster, args, log, tag, batch=1, **{UNGUARDED: "1"})
    driver = Driver(args, log, **{UNGUARDED: "1"})
    assert driver.wait() == 0, driver.output()[-6000:]
    assert driver.summary()["batches_skipped"] == 0  # nothing guarded: batch 1 applied again
    with pytest.raises(AssertionError):
        assert_tables(postgres.url, fold(produced), f"orders_{tag}", f"revenue_{tag}")
    # and the failure is the one expected: the paid orders of batch 1 counted twice
    with open_database(postgres.url) as db:
        counted = db.query(f"SELECT SUM(orders) FROM revenue_{tag}")[0][0]
    paid = sum(n for _, n in fold(produced).revenue.values())
    assert paid < counted < 2 * paid, (paid, counted)


# ------------------------------------------------------------------ PostgreSQL, a broker
def test_postgres_restarted_and_a_leader_killed_mid_run_the_job_is_exact(
        cluster: SparkStandaloneCluster, kafka: LocalCluster,
        postgres: PostgresServer, tmp_path: Path) -> None:
    """Two faults in one run (one driver on the cluster: its start is most of the cost):
    once the first batch is in the database PostgreSQL restarts -- the next commit meets
    the lost connection, the sink reconnects and runs the transaction again -- and then the
    leader of one of the topic's partitions is killed -- the executors' readers must find
    the new leader.  Each fault must land with batches still to come."""
    tag = "pgleader"
    produced = stream(kafka, tag, seed=33)
    args = restart_pipeline_args(cluster.master_url, kafka.bootstrap, tag, postgres.url,
                         tmp_path / "checkpoints", BATCH, tag)
    driver = Driver(args, tmp_path / "driver.log")
    wait_committed(driver, postgres.url, tag, SINKS)
    victim = None
    try:
        try:
            restart_postgres(postgres)
            # the restart ended the driver's connection with batches still to come: the
            # next commit necessarily met the lost connection
            assert committed(postgres.url, tag) < SINKS * BATCHES, "the restart came too late"
            assert driver.running(), driver.output()[-6000:]
            victim = LeaderKill(kafka, tag)()
            assert committed(postgres.url, tag) < SINKS * BATCHES, "the kill came too late"
        except BaseException:
            driver.kill()
            raise
        assert driver.wait() == 0, driver.output()[-6000:]
        assert set(driver.summary()["lag"].values()) == {0}
        assert committed(postgres.url, tag) == SINKS * BATCHES
        assert_tables(postgres.url, fold(produced), f"orders_{tag}", f"revenue_{tag}")
        wait_application_gone(cluster, app_name(tag))
    finally:
        if victim is not None:
            kafka.restart_broker(victim.broker_id)


def test_postgres_sink_reconnects_and_applies_a_batch_once(postgres: PostgresServer
                                                           ) -> None:
    """The sink's retry on its own, without Spark: a restart between batches and one in
    the middle of a batch's transaction (between its two sinks) are both ridden out, and
    each batch is in the tables once.  The control: the same restart under the plain
    transaction (``Database.commit``, no retry) fails the batch -- the restart really
    ends the sink's connection."""
    import psycopg
    import pyarrow as pa

    from millrace.spark.sinks import Database, SinkBatch, TableSpec
    from millrace.spark.sinks.table import Column

    specs = [TableSpec(f"counts_{n}", (Column("k", "string"), Column("n", "bigint")), ("k",),
                       mode="merge", merge=(("n", "sum"),)) for n in ("a", "b")]
    rows = pa.table({"k": ["x", "y"], "n": [1, 2]})

    def parts(restart_between: bool) -> Iterator[SinkBatch]:
        yield SinkBatch(specs[0].name, specs[0], rows)
        if restart_between:
            restart_postgres(postgres)
        yield SinkBatch(specs[1].name, specs[1], rows)

    with open_database(postgres.url) as db:
        for spec in specs:
            db.ensure_table(spec)
        db.commit("reconnect", "q", 0, parts(False))
        restart_postgres(postgres)
        assert db.commit("reconnect", "q", 1, parts(False)) == {s.name: 2 for s in specs}
        assert db.commit("reconnect", "q", 2, parts(True)) == {s.name: 2 for s in specs}
        restart_postgres(postgres)
        with pytest.raises(psycopg.OperationalError):
            Database.commit(db, "reconnect", "q", 3, parts(False))
    with open_database(postgres.url) as db:
        for spec in specs:
            assert sorted(db.query(f"SELECT k, n FROM {spec.name}")) == [("x", 3), ("y", 6)]
