"""``format("millrace")`` from a Spark Connect client: ``start-connect-server.sh`` from the
pyspark distribution, its application on a 2-worker standalone cluster, and a
``SparkSession.builder.remote("sc://127.0.0.1:PORT")`` client that registers the data
source itself, reads a topic in batch, copies it with a streaming query into the
exactly-once sink, and writes in batch.

Theory: a Connect client holds no SparkContext; it sends plans over gRPC.  Registering a
Python data source sends the class pickled by reference (its module name), so the server's
Python processes -- the driver's planner and streaming-source runner, the executors'
Python workers -- import ``millrace`` from their own interpreter: the server starts with
``PYSPARK_PYTHON`` set to this virtual environment.  The client needs pyspark's
``connect`` extra (grpcio, grpcio-status, googleapis-common-protos, zstandard).

Thread ownership: the test's thread drives everything; the server, the cluster and the
client (a Connect session marks its process as a Connect one) are child processes.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from millrace.client.admin import KafkaAdminClient, NewTopic
from millrace.client.producer import KafkaProducer, ProducerRecord
from millrace.launcher.spark_cluster import SparkStandaloneCluster, spark_home, spark_missing
from millrace.testing.broker_process import BrokerProcess, free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]

if (why := spark_missing()) is not None:
    pytest.skip(why, allow_module_level=True)

CLIENT = Path(__file__).with_name("connect_client_child.py")
START_TIMEOUT_S = 300.0
CLIENT_TIMEOUT_S = 600
N = 200
PARTITIONS = 2


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


@pytest.fixture   # on the shared cluster, which each test gets idle: one test's server
def connect_url(cluster: SparkStandaloneCluster,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Spark Connect server on loopback whose application runs on ``cluster``."""
    directory = tmp_path_factory.mktemp("connect")
    port = free_port()
    command = [str(spark_home() / "sbin" / "start-connect-server.sh"), "--wait",
               "--master", cluster.master_url,
               "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
               "--conf", f"spark.connect.grpc.binding.port={port}",
               "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=2"]
    env = {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1",
           "PYSPARK_PYTHON": sys.executable, "SPARK_LOG_DIR": str(directory),
           "SPARK_PID_DIR": str(directory)}
    log_path = directory / "server.log"
    with open(log_path, "wb") as log:  # the child keeps its own descriptor
        server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _listening(port):
            assert server.poll() is None, log_path.read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, log_path.read_text(errors="replace")[-3000:]
            time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        os.killpg(server.pid, signal.SIGTERM)  # a script, spark-submit, then the JVM
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def test_a_connect_client_reads_streams_and_writes_with_millrace(
        broker: BrokerProcess, cluster: SparkStandaloneCluster, connect_url: str,
        tmp_path: Path) -> None:
    source, output = "connect-in", "connect-out"
    with KafkaAdminClient(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([NewTopic(source, num_partitions=PARTITIONS),
                             NewTopic(output, num_partitions=PARTITIONS)]).all()
    values = [f"event-{i:04d}" for i in range(N)]
    producer: KafkaProducer[bytes, bytes] = KafkaProducer(
        {"bootstrap.servers": broker.bootstrap})
    with producer:
        for i, value in enumerate(values):
            producer.send(ProducerRecord(source, value.encode(), partition=i % PARTITIONS))
        producer.flush()

    client = subprocess.run(
        [sys.executable, str(CLIENT), connect_url, broker.bootstrap, source, output,
         str(tmp_path / "checkpoint")],
        capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S)
    assert client.returncode == 0, client.stderr[-5000:]
    results = json.loads(client.stdout.strip().splitlines()[-1])
    assert results["session"] == "pyspark.sql.connect.session"
    assert results["register"] is None
    assert results["batch_read"] == values
    assert sum(results["stream_copy"]) == N, results["stream_copy"]
    assert results["batch_write"] == 2
    # read_committed: each streamed record once, and the two written in batch
    assert results["output"] == sorted([v.upper() for v in values] + ["written-1", "written-2"])

    # the server's application ran its tasks in the cluster's executors
    apps = [a for a in cluster.applications() if a["name"] == "Spark Connect server"]
    assert len(apps) == 1 and apps[0]["cores"] == 2, apps
    finished = sum(stderr.read_text(errors="replace").count("INFO Executor: Finished task")
                   for worker in cluster.workers
                   for stderr in (worker.work_dir / apps[0]["id"]).glob("*/stderr"))
    assert finished >= 3 * PARTITIONS, finished  # batch read, copy, read back
