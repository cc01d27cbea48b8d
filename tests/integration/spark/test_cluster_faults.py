"""Faults the pipeline survives on a Spark standalone cluster: executors and workers killed.

One broker serves the module, and the Spark standalone cluster (a master and two one-core
workers) that conftest's ``cluster`` shares with the other cluster modules serves the
executor tests; the worker test kills a worker and so has a cluster of its own
(``own_cluster``).  Each test runs its driver as a child process -- ``millrace pipeline
run --master spark://...`` for the database, ``cluster_copy_child.py`` for the topic sink
-- so the driver, the executors and the workers are all separate JVMs, as they are in
production.

Placing a kill.  A kill must land while an executor runs a task of a micro-batch, not
between batches, and that is found by watching state, never the clock: the first batch is
committed (a row in ``millrace_batches`` / an entry in the checkpoint's commit log), and the
driver's monitoring API (``/api/v1/applications/<id>/executors``, the driver's web UI is
switched on for this) lists an executor with an active task.  That executor's JVM (its
``--executor-id`` on its command line, a child of a worker) gets SIGKILL.  The driver's
log must then report a task of it lost (``Lost task ... executor <id>``); if the task
finished in the instant between the look and the kill, the next running task is tried.

What is checked.  The database: every key's state and every window aggregate equal the
plain-Python fold of the input (``pipeline_events.assert_tables``).  The topic sink: the
output read ``read_committed`` (librdkafka, an independent judge) holds every input record
exactly once, in input order per partition.  That executors, not the driver, read the
partitions: while the pipeline runs the master lists its application holding both workers'
cores, and the tasks' own log lines ("Running task") are in the executors' stderr under
the workers' ``work/<app-id>/<executor-id>/``.

Negative controls (in the executor test, long profile, and in the worker test).  The
database checker is shown to fail on a micro-batch's worth of
aggregates applied twice (added again with plain SQL, a path without the batch-id guard)
and on a key set back to an older event (a state table re-applies a batch idempotently by
design, so a stale row is its failure, not a doubled one).  The topic checker is shown to
fail on a planted duplicate record (a copy of one output record produced again,
non-transactionally): a sink without the transactional commit duplicates only if the kill
lands after a task has sent some of its rows, which no state can time, so the duplicate
is planted rather than provoked.  Then the copy runs once more on its checkpoint with the
last commit entry removed (a crash between the sink's write and Spark's commit log): the
replayed micro-batch must add nothing to the output.

The worker test kills ``workers[0]`` of its own cluster (its JVM and its executor) after
the first commit; the application continues on the other worker.

Everything here runs on the test's thread; the processes it watches are its children.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from pipeline_events import (
    WINDOW_MS,
    Event,
    assert_tables,
    create_topic,
    epoch_ms,
    events,
    fold,
    pipeline_args,
    produce,
)

from millrace.launcher.broker_process import free_port
from millrace.launcher.spark_cluster import SparkStandaloneCluster, get_json
from millrace.spark.sinks import open_database
from millrace.testing.broker_process import BrokerProcess
from tests.integration.spark.test_sink_exactly_once import (
    _forget_last_commit as forget_last_commit,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

COPY_CHILD = Path(__file__).with_name("cluster_copy_child.py")
BATCH = 200  # the pipeline's maxOffsetsPerTrigger: many micro-batches per run
WAIT_S = 300.0
KILL_ATTEMPTS = 4

T = TypeVar("T")


# ------------------------------------------------------------------ processes
class Driver:
    """A Spark driver child process in its own process group, its web UI on ``ui_port``."""

    def __init__(self, args: list[str], log: Path, ui_port: int) -> None:
        self.log = log
        self.ui_port = ui_port
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True,
                                         env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def check_running(self) -> None:
        if self.proc.poll() is not None:
            raise AssertionError(f"the driver exited with {self.proc.returncode}:\n"
                                 f"{self.output()[-5000:]}")

    def api(self, path: str) -> Any:
        return get_json(f"http://127.0.0.1:{self.ui_port}/api/v1/applications{path}")

    def app_id(self) -> str:
        return str(until(lambda: _first_id(self), "the driver's application id", self))

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def wait(self, timeout: float = WAIT_S) -> None:
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"the driver did not finish in {timeout}s:\n"
                                 f"{self.output()[-5000:]}") from None
        assert code == 0, self.output()[-5000:]


def _first_id(driver: Driver) -> str | None:
    try:
        apps = driver.api("")
    except (OSError, ValueError):
        return None
    return str(apps[0]["id"]) if apps else None


def until(check: Callable[[], Any], what: str, driver: Driver | None = None,
          timeout: float = WAIT_S) -> Any:
    """Poll ``check`` until it returns something true; fail if the driver exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if driver is not None:
            driver.check_running()
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}"
                         + (f":\n{driver.output()[-5000:]}" if driver else ""))


def pipeline_driver(cluster: SparkStandaloneCluster, broker: BrokerProcess, topic: str,
                    database: str, checkpoint: Path, log: Path) -> Driver:
    ui_port = free_port()
    args = [sys.executable, "-m", "millrace.cli.main", "pipeline", "run",
            "--master", cluster.master_url,
            "--conf", "spark.ui.enabled=true", "--conf", f"spark.ui.port={ui_port}",
            *pipeline_args(broker.bootstrap, topic, topic, database, checkpoint, BATCH)]
    return Driver(args, log, ui_port)


def committed(database: str, name: str) -> int:
    db = open_database(database)
    try:
        return db.committed_batches(name)
    finally:
        db.close()


# ------------------------------------------------------------------ executors
def executor_pid(cluster: SparkStandaloneCluster, executor_id: str) -> int | None:
    """The JVM of executor ``executor_id`` (the current application's: one at a time)."""
    for pid in cluster.executor_pids():
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--executor-id" in args and \
                args[args.index(b"--executor-id") + 1].decode() == executor_id:
            return pid
    return None


def dropped(driver: Driver, app: str, executor: str) -> bool:
    """True once the driver no longer lists ``executor`` among its live executors."""
    try:
        return executor not in {str(e["id"]) for e in driver.api(f"/{app}/executors")}
    except (OSError, ValueError):
        return False


def busy_executor(driver: Driver, app: str) -> str | None:
    """The id of an executor that runs a task now, per the driver's monitoring API."""
    try:
        executors = driver.api(f"/{app}/executors")
    except (OSError, ValueError):
        return None
    busy = [e["id"] for e in executors if e["id"] != "driver" and e["activeTasks"] > 0]
    return str(busy[0]) if busy else None


def lost_task(driver: Driver, executor_id: str) -> bool:
    return re.search(rf"Lost task \S+ in stage \S+ \(TID \d+\) \(\S+ executor "
                     rf"{re.escape(executor_id)}\)", driver.output()) is not None


def kill_executor_mid_task(cluster: SparkStandaloneCluster, driver: Driver, app: str,
                           progress: Callable[[], T]) -> tuple[str, T]:
    """SIGKILL the JVM of an executor while it runs a task; return the executor's id once
    the driver has reported one of its tasks lost, with what ``progress()`` said just
    before that kill (the job's progress at the kill, not after the recovery: a lost task
    of the last batch is rerun and committed while the loss is being confirmed)."""
    for _ in range(KILL_ATTEMPTS):
        executor = until(lambda: busy_executor(driver, app), "an executor running a task",
                         driver)
        pid = executor_pid(cluster, executor)
        if pid is None:  # it was just lost (an earlier attempt) or not yet seen under /proc
            continue
        at_kill = progress()
        os.kill(pid, signal.SIGKILL)
        until(functools.partial(dropped, driver, app, executor),
              f"the driver to drop executor {executor}", driver)
        # the scheduler logs the lost tasks before the monitoring API hears of the loss;
        # a few seconds more only for the log file's sake
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if lost_task(driver, executor):
                return executor, at_kill
            time.sleep(0.1)
    raise AssertionError(f"{KILL_ATTEMPTS} executor kills never landed on a running task:\n"
                         f"{driver.output()[-5000:]}")


def assert_executors_ran_the_tasks(cluster: SparkStandaloneCluster, app: str) -> None:
    """Every task ran in an executor JVM: their log lines are in the executors' stderr."""
    stderr = [d / "stderr" for w in cluster.workers for d in (w.work_dir / app).glob("*")]
    assert stderr, f"no executor directory for {app} under the workers' work dirs"
    assert any("Running task" in f.read_text(errors="replace") for f in stderr
               if f.exists()), stderr


def app_cores(cluster: SparkStandaloneCluster, app: str) -> int:
    for found in cluster.applications():
        if found["id"] == app:
            return int(found["cores"])
    return 0


# ------------------------------------------------------------------ the database
# long profile (scripts/pipeline-soak.sh): CI runs an executor kill mid-task with the topic
# sink below, and the pipeline into SQLite on this cluster through a worker kill (the last
# test, which checks the same tables, cores, executors' tasks, lag and the checker's
# negative controls)
@pytest.mark.long
def test_executor_killed_mid_batch_the_tables_equal_the_fold(
        cluster: SparkStandaloneCluster, broker: BrokerProcess, tmp_path: Path) -> None:
    topic = "cluster-executor"
    database = f"sqlite:///{tmp_path / 'millrace.db'}"
    create_topic(broker.bootstrap, topic, 2)
    produced: list[Event] = events(1600, seed=41, keys=150)
    produce(broker.bootstrap, topic, produced)
    driver = pipeline_driver(cluster, broker, topic, database, tmp_path / "checkpoints",
                             tmp_path / "pipeline.log")
    try:
        app = driver.app_id()
        until(lambda: committed(database, topic) >= 1, "the first committed batch", driver)
        # executors, not the driver, run the tasks: the master gave the app both cores
        assert app_cores(cluster, app) == 2, cluster.applications()
        _, at_kill = kill_executor_mid_task(cluster, driver, app,
                                            lambda: committed(database, topic))
        assert at_kill < len(produced) // BATCH, "the kill came after the last batch"
        driver.wait()
    finally:
        driver.kill()
    summary = [json.loads(line) for line in driver.output().splitlines()
               if line.startswith("{")][-1]
    assert summary["event"] == "summary" and summary["lag"] == {f"{topic}-0": 0,
                                                                f"{topic}-1": 0}, summary
    assert_executors_ran_the_tasks(cluster, app)
    assert_tables(database, fold(produced))
    assert_the_checker_fails_on_bad_tables(tmp_path / "millrace.db", produced)


def assert_the_checker_fails_on_bad_tables(path: Path, produced: list[Event]) -> None:
    """Negative controls: the fold checker fails on copies of the good database ``path``
    with a batch applied twice and with a key's state set back to an older event."""
    expected = fold(produced)
    doubled = path.with_name("doubled.db")
    shutil.copy(path, doubled)
    apply_again_without_guard(doubled, fold(produced[:BATCH]))
    with pytest.raises(AssertionError):
        assert_tables(f"sqlite:///{doubled}", expected)
    stale = path.with_name("stale.db")
    shutil.copy(path, stale)
    set_back_one_key(stale, produced)
    with pytest.raises(AssertionError):
        assert_tables(f"sqlite:///{stale}", expected)


def apply_again_without_guard(path: Path, batch: Any) -> None:
    """Add the window aggregates of a micro-batch's worth of input (the first ``BATCH``
    events) to the table once more, with plain SQL (no batch-id guard): what a sink
    without the guard does when Spark replays a batch."""
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        rows = {(epoch_ms(start), product): rowid for rowid, start, product in
                db.execute("SELECT rowid, window_start, product FROM revenue_per_minute")}
        assert batch.revenue
        for (start, product), (total, n) in batch.revenue.items():
            assert start % WINDOW_MS == 0
            db.execute("UPDATE revenue_per_minute SET revenue = revenue + ?, "
                       "orders = orders + ? WHERE rowid = ?",
                       (total, n, rows[(start, product)]))


def set_back_one_key(path: Path, produced: list[Event]) -> None:
    """One key's row set to an earlier event of that key with another status."""
    last = fold(produced).orders
    for event in produced:
        if event.status != last[event.order_id].status:
            with contextlib.closing(sqlite3.connect(path)) as db, db:
                db.execute("UPDATE orders SET status = ? WHERE order_id = ?",
                           (event.status, event.order_id))
            return
    raise AssertionError("no key changed status")


# ------------------------------------------------------------------ the topic sink
def read_topic(bootstrap: str, topic: str, partitions: int, expected: int,
               isolation: str = "read_committed", wait_s: float = 60) -> dict[int, list[bytes]]:
    """Every value of ``topic`` per partition once ``expected`` are in (or ``wait_s``
    passed), plus a quiet second or two in which a surplus copy would show up."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CkTopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"judge-{time.time_ns()}",
                         "isolation.level": isolation, "enable.auto.commit": False})
    consumer.assign([CkTopicPartition(topic, p, 0) for p in range(partitions)])
    got: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + wait_s
    quiet_until: float | None = None
    try:
        while time.monotonic() < deadline:
            for message in consumer.consume(500, 0.5):
                partition, value = message.partition(), message.value()
                if message.error() is None and partition is not None and value is not None:
                    got[partition].append(value)
            if quiet_until is None and sum(map(len, got.values())) >= expected:
                quiet_until = time.monotonic() + 2
            if quiet_until is not None and time.monotonic() >= quiet_until:
                break
    finally:
        consumer.close()
    return got


def send(bootstrap: str, topic: str, values: dict[int, list[bytes]]) -> None:
    """A plain (non-transactional) producer's writes, partition by partition."""
    from millrace.client.producer import KafkaProducer, ProducerRecord

    producer: KafkaProducer[bytes, bytes] = KafkaProducer({"bootstrap.servers": bootstrap})
    with producer:
        for partition, batch in values.items():
            for value in batch:
                producer.send(ProducerRecord(topic, value, partition=partition))
        producer.flush()


def assert_copied_once(got: dict[int, list[bytes]], sent: dict[int, list[bytes]]) -> None:
    """Each input record exactly once, in its partition's order (the sink keeps the
    source's partition)."""
    everything = [v for values in got.values() for v in values]
    assert len(everything) == len(set(everything)), "a record was copied twice"
    assert got == sent


def test_executor_killed_mid_batch_the_output_topic_is_exactly_once(
        cluster: SparkStandaloneCluster, broker: BrokerProcess, tmp_path: Path) -> None:
    source, output, partitions, n = "cluster-copy-in", "cluster-copy-out", 2, 1200
    create_topic(broker.bootstrap, source, partitions)
    create_topic(broker.bootstrap, output, partitions)
    sent: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    for i in range(n):
        sent[i % partitions].append(b"v%05d" % i)
    send(broker.bootstrap, source, sent)
    checkpoint = tmp_path / "checkpoint"
    ui_port = free_port()
    driver = Driver([sys.executable, str(COPY_CHILD), cluster.master_url, str(ui_port),
                     broker.bootstrap, source, output, str(checkpoint), "exactly-once"],
                    tmp_path / "copy.log", ui_port)
    try:
        app = driver.app_id()
        until(lambda: any(f.name.isdigit() for f in (checkpoint / "commits").glob("*")),
              "the first committed batch", driver)
        _, finished = kill_executor_mid_task(cluster, driver, app,
                                             lambda: "copy finished" in driver.output())
        assert not finished, "the kill came after the copy finished"
        driver.wait()
    finally:
        driver.kill()
    assert "copy finished" in driver.output()
    got = read_topic(broker.bootstrap, output, partitions, n)
    assert_copied_once(got, sent)

    # a replay: the checkpoint left as a crash between the sink's write and Spark's commit
    # log leaves it (the last micro-batch's rows in the topic, its commit entry not), and
    # the copy run again on it: the batch runs again, and the exactly-once sink writes
    # none of it twice
    forget_last_commit(checkpoint)
    ui_port = free_port()
    again = Driver([sys.executable, str(COPY_CHILD), cluster.master_url, str(ui_port),
                    broker.bootstrap, source, output, str(checkpoint), "exactly-once"],
                   tmp_path / "copy-again.log", ui_port)
    try:
        again.wait()
    finally:
        again.kill()
    assert "copy finished" in again.output()
    got = read_topic(broker.bootstrap, output, partitions, n)
    assert_copied_once(got, sent)

    # negative control: the checker reports a duplicate (planted: see the module doc)
    send(broker.bootstrap, output, {1: [sent[1][7]]})
    planted = read_topic(broker.bootstrap, output, partitions, n + 1)
    with pytest.raises(AssertionError, match="copied twice"):
        assert_copied_once(planted, sent)


# ------------------------------------------------------------------ a worker
def test_worker_killed_the_job_finishes_on_the_other_worker(
        own_cluster: SparkStandaloneCluster, broker: BrokerProcess, tmp_path: Path) -> None:
    cluster = own_cluster
    topic = "cluster-worker"
    database = f"sqlite:///{tmp_path / 'millrace.db'}"
    create_topic(broker.bootstrap, topic, 2)
    produced = events(1200, seed=43, keys=150)
    produce(broker.bootstrap, topic, produced)
    victim, survivor = cluster.workers
    driver = pipeline_driver(cluster, broker, topic, database, tmp_path / "checkpoints",
                             tmp_path / "pipeline.log")
    try:
        app = driver.app_id()
        until(lambda: committed(database, topic) >= 1 and victim.executor_pids(),
              "the first committed batch with an executor on the first worker", driver)
        # executors, not the driver, run the tasks: the master gave the app both cores
        assert app_cores(cluster, app) == 2, cluster.applications()
        victim.kill()  # the worker JVM and its executor at once, a machine lost
        assert committed(database, topic) < len(produced) // BATCH
        driver.wait()
    finally:
        driver.kill()
    summary = [json.loads(line) for line in driver.output().splitlines()
               if line.startswith("{")][-1]
    assert summary["event"] == "summary" and summary["lag"] == {f"{topic}-0": 0,
                                                                f"{topic}-1": 0}, summary
    assert_executors_ran_the_tasks(cluster, app)
    assert_tables(database, fold(produced))
    assert_the_checker_fails_on_bad_tables(tmp_path / "millrace.db", produced)
    # the survivor's executor ran tasks, and the victim's application directory stopped
    # at the one executor it had
    assert any("Running task" in f.read_text(errors="replace")
               for f in survivor.work_dir.glob(f"{app}/*/stderr"))
    assert len(list(victim.work_dir.glob(f"{app}/*"))) == 1
