"""The millrace topic sink's exactly-once mode (``deliveryGuarantee=exactly-once``).

Through crashes: a streaming copy (millrace source, read_committed, to the exactly-once
sink) runs as a child process, is killed with SIGKILL twice while copying (each time with
the checkpoint's last commit entry removed, as a crash between the sink's write and Spark's
commit log leaves it), then restarted to completion from its checkpoint; a read_committed
reader (librdkafka, an independent judge) must find every input value in the output
exactly once, in input order per partition -- although Spark replays micro-batches whose
rows are already in the topic.  The same run with the at-least-once sink
(EOS_CHILD_GUARANTEE=at-least-once) duplicates them: the test can fail.

Per task, without Spark (the writer's task function against a real broker): a task run
again for a micro-batch it already committed writes nothing; a zombie attempt still
writing when a newer attempt with the same transactional id starts is fenced and its rows
never become visible.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CkTopicPartition

from millrace.client.admin import KafkaAdminClient, NewTopic
from millrace.client.producer import KafkaProducer, ProducerRecord
from millrace.spark.exactly_once import TaskTransaction, write_batches_exactly_once
from millrace.spark.options import SinkOptions
from millrace.spark.writer import SinkColumns
from millrace.testing.broker_process import BrokerProcess

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CHILD = Path(__file__).with_name("eos_copy_child.py")
PARTITIONS = 3
WAIT_S = 300.0


def read_committed(bootstrap: str, topic: str, expected: int, wait_s: float = 60
                   ) -> dict[int, list[bytes]]:
    """Every value of ``topic`` per partition, read_committed, once ``expected`` values are
    in (or ``wait_s`` passed), plus a short quiet period to catch extra copies."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"judge-{time.time_ns()}",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    consumer.assign([CkTopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    deadline = time.monotonic() + wait_s
    quiet_until: float | None = None
    try:
        while time.monotonic() < deadline:
            for m in consumer.consume(500, 0.5):
                if m.error() is None:
                    got[m.partition()].append(m.value())
            if quiet_until is None and sum(map(len, got.values())) >= expected:
                quiet_until = time.monotonic() + 3
            if quiet_until is not None and time.monotonic() >= quiet_until:
                break
    finally:
        consumer.close()
    return got


def committed_total(bootstrap: str, topic: str) -> int:
    return sum(map(len, read_committed(bootstrap, topic, 1 << 60, wait_s=2).values()))


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # Spark's Python workers too
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)


def _forget_last_commit(checkpoint: Path) -> None:
    """Leave the checkpoint as a crash between the sink's write and Spark's commit log
    leaves it (the window is milliseconds wide, so a kill rarely hits it by itself): the
    last micro-batch's rows are in the topic, its commit entry is not, and the restarted
    query replays it.  An at-least-once sink writes those rows again."""
    commits = checkpoint / "commits"
    last = max(int(f.name) for f in commits.iterdir() if f.name.isdigit())
    (commits / str(last)).unlink()
    with contextlib.suppress(FileNotFoundError):
        (commits / f".{last}.crc").unlink()


# long profile (scripts/pipeline-soak.sh): CI runs the exactly-once sink through an
# executor kill mid-task and then a replayed micro-batch, on the Spark cluster
# (test_cluster_faults.py's topic-sink test), a task run again for a committed batch and
# a zombie attempt (below), and the pipeline's driver killed and restarted from its
# checkpoint (test_cluster_restarts.py)
@pytest.mark.long
def test_streaming_copy_killed_twice_is_exactly_once(broker: BrokerProcess,
                                                     tmp_path: Path) -> None:
    source, output = "eos-in", "eos-out"
    with KafkaAdminClient(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([NewTopic(source, num_partitions=PARTITIONS),
                             NewTopic(output, num_partitions=PARTITIONS)]).all()
    n = 1500
    with KafkaProducer({"bootstrap.servers": broker.bootstrap}) as producer:
        for i in range(n):
            producer.send(ProducerRecord(source, b"v%05d" % i, partition=i % PARTITIONS))
        producer.flush()
    checkpoint = tmp_path / "checkpoint"
    log = tmp_path / "child.log"
    thresholds = [n // 5, n // 2]  # kill once a fifth, then half, is visibly copied
    for run in range(3):
        with open(log, "ab") as out:
            child = subprocess.Popen(
                [sys.executable, str(CHILD), broker.bootstrap, source, output,
                 str(checkpoint)], stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            target = thresholds[run] if run < len(thresholds) else n
            deadline = time.monotonic() + WAIT_S
            while committed_total(broker.bootstrap, output) < target:
                assert child.poll() is None, log.read_text(errors="replace")[-3000:]
                assert time.monotonic() < deadline, log.read_text(errors="replace")[-3000:]
                time.sleep(0.5)
        finally:
            _kill_group(child)
        if run < len(thresholds):
            _forget_last_commit(checkpoint)
    got = read_committed(broker.bootstrap, output, n)
    everything = sorted(v for values in got.values() for v in values)
    assert len(everything) == len(set(everything)), "a value was copied twice"
    assert everything == sorted(b"v%05d" % i for i in range(n))
    for p, values in got.items():  # the order of the input partition, kept
        assert values == [b"v%05d" % i for i in range(p, n, PARTITIONS)]


# ------------------------------------------------------------------ one task, no Spark
def _options(broker: BrokerProcess, topic: str) -> SinkOptions:
    return SinkOptions.parse({"kafka.bootstrap.servers": broker.bootstrap, "topic": topic,
                              "deliveryGuarantee": "exactly-once",
                              "transactionalIdPrefix": f"eos-task-{topic}"})


def _rows(values: list[bytes]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"value": values}, schema=pa.schema([("value",
                                                                           pa.binary())]))


COLUMNS = SinkColumns(value_is_string=False)


def test_a_task_run_again_for_a_committed_batch_writes_nothing(
        broker: BrokerProcess) -> None:
    topic = "eos-task-retry"
    with KafkaAdminClient(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, num_partitions=1)]).all()
    options = _options(broker, topic)
    task = TaskTransaction(f"eos-task-{topic}-0", batch_id=7)
    first = write_batches_exactly_once(iter([_rows([b"a", b"b"])]), options, COLUMNS, task)
    again = write_batches_exactly_once(iter([_rows([b"a", b"b"])]), options, COLUMNS, task)
    later = write_batches_exactly_once(iter([_rows([b"c"])]), options, COLUMNS,
                                       TaskTransaction(task.transactional_id, batch_id=8))
    assert (first.records, first.skipped) == (2, False)
    assert (again.records, again.skipped) == (0, True)
    assert (later.records, later.skipped) == (1, False)
    got = read_committed(broker.bootstrap, topic, 3)
    assert got[0] == [b"a", b"b", b"c"]


def test_a_zombie_attempt_is_fenced_and_never_visible(broker: BrokerProcess) -> None:
    topic = "eos-task-zombie"
    with KafkaAdminClient(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, num_partitions=1)]).all()
    options = _options(broker, topic)
    task = TaskTransaction(f"eos-task-{topic}-0", batch_id=3)
    stalled, resume = threading.Event(), threading.Event()
    outcome: list[BaseException | int] = []

    def zombie_rows() -> Iterator[pa.RecordBatch]:
        yield _rows([b"zombie-1"])
        stalled.set()
        resume.wait(60)  # a task stuck (GC, a lost executor) while a new attempt runs
        yield _rows([b"zombie-2"])

    def zombie() -> None:
        try:
            outcome.append(write_batches_exactly_once(zombie_rows(), options, COLUMNS,
                                                      task).records)
        except BaseException as e:  # the outcome is what is checked
            outcome.append(e)

    thread = threading.Thread(target=zombie)
    thread.start()
    assert stalled.wait(60)
    retry = write_batches_exactly_once(iter([_rows([b"retry-1", b"retry-2"])]), options,
                                       COLUMNS, task)
    resume.set()
    thread.join(60)
    assert retry.records == 2
    [result] = outcome
    assert isinstance(result, BaseException), f"the zombie committed {result} rows"
    assert "fenced" in str(result).lower() or "epoch" in str(result).lower(), repr(result)
    assert read_committed(broker.bootstrap, topic, 2)[0] == [b"retry-1", b"retry-2"]


def test_source_read_committed_skips_aborted_and_stops_at_an_open_transaction(
        spark: SparkSession, broker: BrokerProcess) -> None:
    """``kafka.isolation.level=read_committed`` on the millrace source: committed rows
    only (markers and aborted rows never become rows), and "latest" is the last stable
    offset, so a batch read ends before a transaction still open -- it neither waits for
    it nor returns its rows."""
    from confluent_kafka import Producer

    topic = "eos-source-rc"
    with KafkaAdminClient(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, num_partitions=1)]).all()
    producer = Producer({"bootstrap.servers": broker.bootstrap,
                         "transactional.id": "eos-source-writer"})
    producer.init_transactions(30)
    for label, commit in (("c1", True), ("a1", False), ("c2", True)):
        producer.begin_transaction()
        for i in range(3):
            producer.produce(topic, f"{label}-{i}".encode(), partition=0)
        assert producer.flush(30) == 0  # librdkafka's abort drops records not yet sent
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, b"open-0", partition=0)
    assert producer.flush(30) == 0  # written, not committed: holds the LSO here

    def read(isolation: str) -> list[bytes]:
        rows = (spark.read.format("millrace").option("kafka.bootstrap.servers",
                                                     broker.bootstrap)
                .option("subscribe", topic).option("kafka.isolation.level", isolation)
                .option("kafkaConsumer.pollTimeoutMs", "20000").load()
                .orderBy("offset").collect())
        return [bytes(r.value) for r in rows]

    assert read("read_committed") == [b"c1-0", b"c1-1", b"c1-2", b"c2-0", b"c2-1", b"c2-2"]
    uncommitted = read("read_uncommitted")  # aborted and open rows too, never markers
    assert uncommitted == [b"c1-0", b"c1-1", b"c1-2", b"a1-0", b"a1-1", b"a1-2",
                           b"c2-0", b"c2-1", b"c2-2", b"open-0"]
    producer.commit_transaction(30)
    assert read("read_committed")[-1] == b"open-0"
