"""``examples/spark_submit_job.py`` -- a user's own job with ``format("millrace")`` as source
and sink -- run with ``spark-submit --master spark://...`` on a 2-worker standalone cluster,
as a data engineer deploys it.

Theory: spark-submit runs the script as the driver in its own process (a JVM holds one
SparkContext, and the test's own local session is another); the driver plans offset
ranges, the executors on the workers read them straight from the broker and write the
output topic in Kafka transactions.  What is checked:

- the output topic, read ``read_committed``, holds each input record exactly once;
- the tasks ran in executor processes: the master lists the application with its cores,
  each worker keeps ``work/<app id>/<executor>/stderr`` with the tasks it ran, and the
  driver's scheduler log names an executor (never the driver) for every task;
- a second run on the same checkpoint copies only what was produced since, here with the
  executors on an interpreter *without* millrace installed, the package shipped as a zip
  with ``--py-files`` (its C extensions cannot load from a zip: the pure-Python fallback
  runs).  The driver's own Python helpers for a streaming data source do not get
  ``--py-files`` on their path (Spark 4.3), so the driver's environment carries the zip in
  ``PYTHONPATH`` too -- see docs/spark-cluster-notes.md.

Thread ownership: everything runs in the test's thread; Spark runs in child processes.
"""

from __future__ import annotations

import json
import os
import re
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import millrace
from millrace.client.admin import KafkaAdminClient, NewTopic
from millrace.client.producer import KafkaProducer, ProducerRecord
from millrace.launcher.spark_cluster import SparkStandaloneCluster, spark_home, spark_missing
from millrace.testing.broker_process import BrokerProcess
from tests.integration.spark.test_sink_exactly_once import PARTITIONS, read_committed

pytestmark = [pytest.mark.integration, pytest.mark.slow]

if (why := spark_missing()) is not None:
    pytest.skip(why, allow_module_level=True)

REPO = Path(__file__).resolve().parents[3]
JOB = REPO / "examples" / "spark_submit_job.py"
APP_NAME = "millrace-example"
SUBMIT_TIMEOUT_S = 600
N = 300


def spark_submit(cluster: SparkStandaloneCluster, *args: str, python: str = sys.executable,
                 env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``spark-submit`` as a user types it; ``python`` is the executors' interpreter."""
    command = [str(spark_home() / "bin" / "spark-submit"), "--master", cluster.master_url,
               "--conf", f"spark.pyspark.python={python}",
               "--conf", f"spark.pyspark.driver.python={sys.executable}",
               "--conf", "spark.ui.enabled=false", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=SUBMIT_TIMEOUT_S,
                          env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", **(env or {})})


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer: KafkaProducer[bytes, bytes] = KafkaProducer({"bootstrap.servers": bootstrap})
    with producer:
        for i, value in enumerate(values):
            producer.send(ProducerRecord(topic, value, key=value, partition=i % PARTITIONS))
        producer.flush()


def copied(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    got = read_committed(bootstrap, topic, expected)
    return sorted(v for values in got.values() for v in values)


def executor_task_counts(cluster: SparkStandaloneCluster, app_id: str) -> dict[str, int]:
    """Tasks finished per executor of ``app_id``, from each worker's ``work/`` directory."""
    counts = {}
    for worker in cluster.workers:
        for stderr in (worker.work_dir / app_id).glob("*/stderr"):
            text = stderr.read_text(errors="replace")
            counts[f"{worker.directory.name}/{stderr.parent.name}"] = text.count(
                "INFO Executor: Finished task")
    return counts


def bare_interpreter(directory: Path) -> Path:
    """A virtual environment that sees this one's packages (pyspark, pyarrow, millrace's
    dependencies) but not millrace: the machine of a user who did not install it."""
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(directory)],  # type: ignore[attr-defined]
                   check=True)
    python = directory / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             check=True, capture_output=True, text=True).stdout.strip()
    # a path added by a .pth line gets no .pth processing of its own: millrace's editable
    # install (a .pth finder in this environment) stays invisible
    Path(purelib, "deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return python


def package_zip(path: Path) -> Path:
    """millrace as a zip for ``--py-files``, C extensions included (they cannot load)."""
    package = Path(millrace.__file__).parent
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in sorted(package.rglob("*")):
            if file.is_file() and "__pycache__" not in file.parts:
                archive.write(file, file.relative_to(package.parent))
    return path


def test_spark_submit_runs_the_example_in_executors_exactly_once(
        broker: BrokerProcess, cluster: SparkStandaloneCluster, tmp_path: Path) -> None:
    source, output = "submit-in", "submit-out"
    with KafkaAdminClient(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([NewTopic(source, num_partitions=PARTITIONS),
                             NewTopic(output, num_partitions=PARTITIONS)]).all()
    first = [b"order-%04d" % i for i in range(N)]
    produce(broker.bootstrap, source, first)
    checkpoint = str(tmp_path / "checkpoint")

    result = spark_submit(cluster, str(JOB), broker.bootstrap, source, output, checkpoint)
    assert result.returncode == 0, result.stderr[-5000:]
    assert f"copied {N} records from {source} to {output}" in result.stdout
    assert copied(broker.bootstrap, output, N) == sorted(v.upper() for v in first)

    # the application ran on the cluster, its tasks in the workers' executors
    apps = [a for a in cluster.master.state()["completedapps"] if a["name"] == APP_NAME]
    assert len(apps) == 1 and apps[0]["cores"] == 2, apps
    tasks = executor_task_counts(cluster, apps[0]["id"])
    assert len(tasks) == 2 and sum(tasks.values()) >= PARTITIONS, tasks
    # the driver's scheduler names an executor for every task it starts (a task run in the
    # driver would say "driver")
    started = re.findall(r"Starting task \S+ in stage \S+ \(TID \d+\) \(127\.0\.0\.1,\s*"
                         r"executor (\w+),", result.stderr)
    finished = re.findall(r"Finished task \S+ in stage \S+ \(TID \d+\) in \d+ ms on "
                          r"127\.0\.0\.1 \(executor (\w+)\)", result.stderr)
    assert started and set(started) <= {"0", "1"}, started
    assert len(finished) == sum(tasks.values()) and set(finished) <= {"0", "1"}, finished

    # the pure-Python fallback is what an executor gets from the zip
    bare = bare_interpreter(tmp_path / "bare")
    shipped = package_zip(tmp_path / "millrace.zip")
    probe = subprocess.run(
        [str(bare), "-c", "from millrace.record.default_record import SPEEDUPS; "
         "from millrace.client.producer import producer_record as p; "
         "print(SPEEDUPS, p._RecordCore is p.PyRecordCore, p.__file__)"],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(shipped)},
        cwd=tmp_path)
    assert probe.stdout.split() == ["False", "True", f"{shipped}/millrace/client/producer/"
                                    "producer_record.py"], probe.stderr

    # run again on the same checkpoint, millrace shipped to executors that lack it
    second = [b"order-%04d" % i for i in range(N, 2 * N)]
    produce(broker.bootstrap, source, second)
    result = spark_submit(cluster, "--py-files", str(shipped), str(JOB), broker.bootstrap,
                          source, output, checkpoint, python=str(bare),
                          env={"PYTHONPATH": str(shipped)})
    assert result.returncode == 0, result.stderr[-5000:]
    assert f"copied {N} records from {source} to {output}" in result.stdout
    assert copied(broker.bootstrap, output, 2 * N) == sorted(v.upper() for v in first + second)
    apps = [a for a in cluster.master.state()["completedapps"] if a["name"] == APP_NAME]
    assert len(apps) == 2, json.dumps(apps)
