"""A full disk under one broker of a real cluster (reliability matrix §5 row 12).

Three ``millrace broker`` processes and ZooKeeper (``LocalCluster``), each broker's log
dir a 64 MiB tmpfs of its own; an idempotent ``acks=all`` confluent-kafka producer writes
to an RF 3, ``min.insync.replicas=2`` topic while the ``disk-full`` fault fills one
broker's log dir.  The broker must stop (exit 1, naming the dir), leave the ISR and
leadership, and acknowledge nothing it could not write; the other two keep taking
writes.  A restart while the disk is still full fails with the same clear line; after
the space is freed the broker recovers its log, catches up and rejoins the ISR with a log
byte-identical to the leader's, and every acknowledged record is there.
"""

from __future__ import annotations

import os
import random
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_support import (
    FAST,
    WAIT,
    ContinuousProducer,
    admin,
    broker_admin,
    consume_all,
    create_topic,
    log_bytes,
    log_tails,
    partition_dir,
    partitions,
    wait_in_sync,
    wait_until,
)

from millrace.launcher.local_cluster import LocalCluster
from millrace.testing.faults.disk import (
    FAILURE_LINE,
    DiskFull,
    fill,
    free,
    small_log_dir,
    small_log_dirs,
)
from millrace.testing.faults.nemesis import (
    ClusterProbe,
    NemesisContext,
    NemesisError,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOPIC = "ledger"


@pytest.fixture
def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[LocalCluster]:
    """Three brokers, each on a 64 MiB tmpfs log dir; stopped cleanly after a passing
    test (killed after a failing one), then the file systems are unmounted."""
    failed = request.session.testsfailed
    c = LocalCluster(tmp_path / "cluster", 3, overrides=FAST)
    with small_log_dirs(c, [1, 2, 3]):
        c.start()
        yield c
        if request.session.testsfailed == failed:
            c.stop()


def context(cluster: LocalCluster, seed: int) -> NemesisContext:
    return NemesisContext(cluster, ClusterProbe(cluster, [TOPIC]), random.Random(seed),
                          zk_session_timeout_s=6, replica_lag_time_max_s=6, partitions=1)



class ReadyzProbe:
    """Polls a broker's /readyz every few milliseconds in a thread: the answers, as
    status codes (``"refused"`` once nothing listens), consecutive repeats folded."""

    def __init__(self, url: str) -> None:
        self.url = url + "/readyz"
        self.answers: list[int | str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> ReadyzProbe:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with urllib.request.urlopen(self.url, timeout=5) as r:
                    answer: int | str = r.status
            except urllib.error.HTTPError as e:
                answer = e.code
            except OSError:
                answer = "refused"
            if not self.answers or self.answers[-1] != answer:
                self.answers.append(answer)
            time.sleep(0.005)


def others(victim: int) -> list[int]:
    return [b for b in (1, 2, 3) if b != victim]


def check_full_disk_fault(cluster: LocalCluster, fault: DiskFull, tmp_path: Path) -> None:
    client = admin(cluster.bootstrap)
    create_topic(client, TOPIC, 1, 3, {"min.insync.replicas": "2"})
    producer = ContinuousProducer(cluster.bootstrap, TOPIC).start()
    ctx = context(cluster, seed=7)
    try:
        wait_until("300 acknowledged records", lambda: producer.acked_count >= 300)
        probes = {b: ReadyzProbe(cluster.http_urls()[b]).start() for b in (1, 2, 3)}
        try:
            description = fault.inject(ctx)
        finally:
            for probe in probes.values():
                probe.stop()
        victim = fault.victim
        broker = cluster.broker(victim)
        # /readyz: ready until the dir failed; from then on never ready again (a 503
        # naming the dir while the broker stops, then nothing listens)
        answers = probes[victim].answers
        assert answers[0] == 200 and answers[-1] == "refused", answers[:3] + answers[-3:]
        first_down = next(i for i, a in enumerate(answers) if a != 200)
        assert 200 not in answers[first_down:]
        assert all(a == 200 for b in others(victim) for a in probes[b].answers)
        assert not cluster.running(victim), description
        assert broker.proc is not None and broker.proc.returncode == 1, description
        assert FAILURE_LINE in description and str(cluster.log_dir(victim)) in description

        # the other two take over: the victim leaves the ISR (and leadership), writes go on
        survivor = broker_admin(cluster, others(victim)[0])
        view = wait_until(
            f"broker {victim} out of the ISR and not leading",
            lambda: (p := partitions(survivor, TOPIC)) and victim not in p[0].isr
            and p[0].leader in others(victim) and p[0],
            diagnostics=lambda: log_tails(cluster))
        assert set(view.isr) == set(others(victim))
        before = producer.acked_count
        wait_until("300 more acknowledged records without the full broker",
                   lambda: producer.acked_count >= before + 300,
                   diagnostics=lambda: log_tails(cluster))

        # a restart while the disk is still full fails, saying why
        with pytest.raises(RuntimeError, match=FAILURE_LINE):
            cluster.restart_broker(victim)
        assert broker.proc is not None and broker.proc.returncode == 1

        fault.heal(ctx)
        assert cluster.running(victim)
        wait_in_sync(survivor, TOPIC, 1)
    finally:
        producer.stop()
    assert not producer.errors, producer.errors[:5]

    # every acknowledged record is in the topic, in order, once
    producer.by_partition()  # checks no offset was acknowledged twice
    got = consume_all(cluster.bootstrap, TOPIC, 1, producer.acked_count)[0]
    lost = [(o, v) for o, v in producer.acked[0] if o >= len(got) or got[o] != v]
    assert not lost, f"{len(lost)} acknowledged records lost or moved, e.g. {lost[:5]}"
    assert len(got) == len(set(got)), "a record appears twice"

    # the recovered replica holds exactly the leader's bytes
    leader = partitions(admin(cluster.bootstrap), TOPIC)[0].leader

    def identical() -> bool:
        a = log_bytes(partition_dir(cluster, leader, TOPIC, 0), tmp_path)
        b = log_bytes(partition_dir(cluster, victim, TOPIC, 0), tmp_path)
        return a == b and a[0] >= producer.acked_count

    wait_until(f"broker {victim}'s log byte-identical to leader {leader}'s", identical,
               timeout=WAIT, diagnostics=lambda: log_tails(cluster))


def test_follower_with_a_full_disk_leaves_the_isr_and_recovers(
        cluster: LocalCluster, tmp_path: Path) -> None:
    check_full_disk_fault(cluster, DiskFull("follower"), tmp_path)


def test_leader_with_a_full_disk_gives_up_leadership_and_loses_nothing(
        cluster: LocalCluster, tmp_path: Path) -> None:
    check_full_disk_fault(cluster, DiskFull("leader"), tmp_path)


def test_disk_full_refuses_a_log_dir_that_is_not_its_own_file_system(
        tmp_path: Path) -> None:
    """Never fill the machine's disk: a log dir without its own mount is refused, one
    with its own tmpfs is accepted (no broker needs to run for either)."""
    c = LocalCluster(tmp_path / "plain", 2)
    c.log_dir(1).mkdir(parents=True)
    with pytest.raises(NemesisError, match="not a small file system"):
        small_log_dir(c, 1)
    with small_log_dirs(c, [2]) as mounted:
        assert small_log_dir(c, 2) == mounted[2] == c.log_dir(2)
        assert fill(mounted[2]) > 0 and free(mounted[2])
    assert not os.path.ismount(c.log_dir(2))
    assert not list(c.log_dir(1).iterdir())  # nothing was written to the real disk
