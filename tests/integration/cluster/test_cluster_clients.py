"""Third-party clients against a real three-broker cluster.

* kcat (librdkafka's command-line tool) ``-L`` lists the three brokers, the controller and
  every partition with its leader, replicas and ISR.
* kafka-python's and aiokafka's consumer groups read a replicated topic and ride through
  the SIGKILL of the leader of one of its partitions (the records produced after the kill,
  through confluent-kafka, reach them once new leaders are elected).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import re
import shutil
import subprocess
import time
import warnings

import pytest
from aiokafka import AIOKafkaConsumer
from cluster_support import WAIT, ClusterFactory, admin, create_topic, log_tails
from confluent_kafka import Producer

from millrace.launcher.local_cluster import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.compat]

KCAT = shutil.which("kcat") or shutil.which("kafkacat")


def test_kcat_lists_brokers_leaders_and_isrs(cluster: LocalCluster) -> None:
    if KCAT is None:
        pytest.fail("kcat is not installed: scripts/test.sh installs Debian's kcat package")
    view = create_topic(admin(cluster.bootstrap), "kcat-listed", 3, 3)
    proc = subprocess.run([KCAT, "-b", cluster.bootstrap, "-L"], capture_output=True,
                          timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    out = proc.stdout.decode()
    assert " 3 brokers:" in out
    for b in (1, 2, 3):
        assert re.search(rf"broker {b} at 127\.0\.0\.1:{cluster.broker(b).port}", out), out
    assert len(re.findall(r"\(controller\)", out)) == 1
    assert 'topic "kcat-listed" with 3 partitions:' in out
    for p, v in view.items():
        line = (f"partition {p}, leader {v.leader}, replicas: "
                f"{','.join(map(str, v.replicas))}, isrs: {','.join(map(str, v.isr))}")
        assert line in out, out


def produce(bootstrap: str, topic: str, first: int, count: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "message.timeout.ms": 90_000})
    for i in range(first, first + count):
        p.produce(topic, value=str(i).encode(), key=str(i).encode())
    assert p.flush(90) == 0


# A client's connection attempt to the killed broker can leave a socket for the garbage
# collector (seen as a ResourceWarning, raised as an unraisable exception in whichever
# test runs the collection): the clients' business, not what these tests judge.  Their
# log records, which pytest keeps until after teardown, hold most of it: the
# third_party_leaks mark collects it then (tests/conftest.py).
third_party_leaks = [pytest.mark.filterwarnings("ignore::ResourceWarning"),
                     pytest.mark.filterwarnings(
                         "ignore::pytest.PytestUnraisableExceptionWarning"),
                     pytest.mark.third_party_leaks]


def start_with_leader_kill(fresh_cluster: ClusterFactory, topic: str) -> tuple[LocalCluster, int]:
    cluster = fresh_cluster()
    view = create_topic(admin(cluster.bootstrap), topic, 2, 3)
    produce(cluster.bootstrap, topic, 0, 100)
    return cluster, view[0].leader


@pytest.mark.slow
@third_party_leaks[0]
@third_party_leaks[1]
@third_party_leaks[2]
def test_kafka_python_group_rides_through_a_leader_kill9(
        fresh_cluster: ClusterFactory) -> None:
    with warnings.catch_warnings():  # kafka-python loads its schemas with a deprecated API
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka import KafkaConsumer
    cluster, leader = start_with_leader_kill(fresh_cluster, "kp-work")
    consumer = KafkaConsumer("kp-work", bootstrap_servers=cluster.bootstrap,
                             group_id="kp-group", auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=500)
    seen: set[int] = set()

    def consume_until(count: int) -> None:
        deadline = time.monotonic() + WAIT
        while len(seen) < count:
            assert time.monotonic() < deadline, f"{len(seen)} of {count}\n{log_tails(cluster)}"
            for msg in consumer:
                seen.add(int(msg.value))
            consumer.commit()
    try:
        consume_until(100)
        cluster.kill_broker(leader)
        produce(cluster.bootstrap, "kp-work", 100, 100)
        consume_until(200)
    finally:
        consumer.close()
        gc.collect()  # inside this test's warning filters
    assert seen == set(range(200))


@pytest.mark.slow
@third_party_leaks[0]
@third_party_leaks[1]
@third_party_leaks[2]
def test_aiokafka_group_rides_through_a_leader_kill9(fresh_cluster: ClusterFactory) -> None:
    cluster, leader = start_with_leader_kill(fresh_cluster, "aio-work")
    seen: set[int] = set()

    async def consume_until(consumer: AIOKafkaConsumer, count: int) -> None:
        deadline = time.monotonic() + WAIT
        while len(seen) < count:
            assert time.monotonic() < deadline, f"{len(seen)} of {count}\n{log_tails(cluster)}"
            batches = await consumer.getmany(timeout_ms=500)
            for records in batches.values():
                seen.update(int(r.value or b"-1") for r in records)
            await consumer.commit()

    async def run() -> None:
        consumer = AIOKafkaConsumer("aio-work", bootstrap_servers=cluster.bootstrap,
                                    group_id="aio-group", auto_offset_reset="earliest",
                                    enable_auto_commit=False)
        await consumer.start()
        try:
            await consume_until(consumer, 100)
            cluster.kill_broker(leader)
            await asyncio.get_running_loop().run_in_executor(
                None, produce, cluster.bootstrap, "aio-work", 100, 100)
            await consume_until(consumer, 200)
        finally:
            # aiokafka 0.14's stop() cancels its fetch task and lets that CancelledError
            # escape when the task is retrying a fetch to the killed broker
            with contextlib.suppress(asyncio.CancelledError):
                await consumer.stop()
    asyncio.run(run())
    gc.collect()
    assert seen == set(range(200))
