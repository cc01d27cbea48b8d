"""The pipeline's long soak (``scripts/pipeline-soak.sh``): one growing stream, one
pipeline on a 2-worker Spark cluster, a 3-broker cluster and PostgreSQL, and a fault after
every few micro-batches, in turn -- an executor killed, a worker killed (and started again
a round later), the driver killed (and restarted on its checkpoint once the master dropped
its application), the leader of a partition killed (and restarted a round later),
PostgreSQL restarted.  At the end the driver catches up (``available-now``) and the
database must equal the fold of every event produced; then ``millrace demo --brokers 3
--spark-master ... --database postgresql://...`` runs on the same Spark cluster and
database.

Every fault is placed by state: a round produces a chunk of events, waits until the
database has committed a batch more than before, and strikes while the rest of the chunk
is still to be read.  Production never overlaps a fault (each chunk is acknowledged by
``acks=all`` before the next step), so the fold of the chunks is exactly the topic.

    python tests/integration/spark/restart_soak.py --dir build/pipeline-soak --rounds 10

Thread ownership: one thread drives everything.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from pipeline_events import Event, assert_tables, events, fold, produce
from restart_support import (
    Driver,
    app_name,
    committed,
    create_topic_on_cluster,
    restart_pipeline_args,
    restart_postgres,
    until,
    wait_application_gone,
)

from millrace.demo.cluster import LeaderKill, cluster_overrides
from millrace.launcher.local_cluster import LocalCluster
from millrace.launcher.spark_cluster import SparkStandaloneCluster
from millrace.testing.postgres import PostgresServer

TAG = "soak"
PARTITIONS = 3
SEED = 41


def say(text: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {text}", flush=True)


class Soak:
    def __init__(self, spark: SparkStandaloneCluster, kafka: LocalCluster,
                 pg: PostgresServer, directory: Path, chunk: int, batch: int) -> None:
        self.spark, self.kafka, self.pg = spark, kafka, pg
        self.chunk, self.produced = chunk, 0
        self.log = directory / "drivers.log"
        self.directory, self.batch = directory, batch
        self.args = self.arguments("processing-time=500ms")
        self.driver = Driver(self.args, self.log)
        self.down_worker: int | None = None
        self.down_broker: int | None = None

    def arguments(self, trigger: str) -> list[str]:
        return restart_pipeline_args(self.spark.master_url, self.kafka.bootstrap, TAG, self.pg.url,
                             self.directory / "checkpoints", self.batch, TAG, trigger)

    def produce_chunk(self) -> int:
        """Produce the next chunk; the number of batch records before it."""
        before = committed(self.pg.url, TAG)
        produce(self.kafka.bootstrap, TAG,
                events(self.chunk, seed=SEED, keys=400, start=self.produced))
        self.produced += self.chunk
        return before

    def wait_progress(self, before: int) -> None:
        def progressed() -> bool:
            if not self.driver.running():
                raise AssertionError(f"the driver ended:\n{self.driver.output()[-6000:]}")
            return committed(self.pg.url, TAG) > before
        until("a batch committed after the chunk", progressed, 600)

    # ------------------------------------------------------------------ faults
    def kill_executor(self) -> str:
        pids = until("an executor", self.spark.executor_pids)
        os.kill(pids[0], signal.SIGKILL)
        return f"killed executor pid {pids[0]}"

    def kill_worker(self) -> str:
        self.down_worker = 0
        self.spark.workers[0].kill()
        return "killed worker 1 and its executor"

    def kill_driver(self) -> str:
        self.driver.kill()
        wait_application_gone(self.spark, app_name(TAG))
        self.driver = Driver(self.args, self.log)
        return "killed the driver's process group; restarted it on the checkpoint"

    def kill_leader(self) -> str:
        victim = LeaderKill(self.kafka, TAG)()
        self.down_broker = victim.broker_id
        return victim.describe().replace(", while producing", "")

    def restart_postgres(self) -> str:
        restart_postgres(self.pg)
        return "restarted PostgreSQL"

    def heal(self) -> None:
        """Start again what the previous fault left down."""
        if self.down_worker is not None:
            self.spark.workers[self.down_worker].start()
            say(f"started worker {self.down_worker + 1} again")
            self.down_worker = None
        if self.down_broker is not None:
            self.kafka.restart_broker(self.down_broker)
            say(f"started broker {self.down_broker} again")
            self.down_broker = None

    def run(self, rounds: int) -> None:
        faults: list[Callable[[], str]] = [self.kill_executor, self.kill_worker,
                                           self.kill_driver, self.kill_leader,
                                           self.restart_postgres]
        for i in range(rounds):
            self.heal()
            before = self.produce_chunk()
            self.wait_progress(before)
            say(f"round {i + 1}/{rounds}: {faults[i % len(faults)]()} "
                f"({self.produced} events produced)")
        self.heal()
        self.driver.kill()
        wait_application_gone(self.spark, app_name(TAG))
        final = Driver(self.arguments("available-now"), self.log)
        assert final.wait(1800) == 0, final.output()[-6000:]
        summary = final.summary()
        assert set(summary["lag"].values()) == {0}, summary
        produced: list[Event] = events(self.produced, seed=SEED, keys=400)
        assert_tables(self.pg.url, fold(produced), f"orders_{TAG}", f"revenue_{TAG}")
        say(f"exact: {self.produced} events, {committed(self.pg.url, TAG)} batch records, "
            "the tables equal the fold")


def run_demo(spark: SparkStandaloneCluster, pg: PostgresServer, directory: Path,
             count: int) -> None:
    say(f"millrace demo --brokers 3 --spark-master {spark.master_url} --database {pg.url}")
    result = subprocess.run(
        [sys.executable, "-m", "millrace.cli.main", "demo", "--brokers", "3",
         "--spark-master", spark.master_url, "--database", pg.url, "--events", str(count),
         "--data-dir", str(directory / "demo"), "--output", "json"],
        capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr[-6000:]
    doc = json.loads(result.stdout)
    assert doc["verification"]["passed"] is True, doc["verification"]
    say(f"demo verified: {doc['events_total']} events; {'; '.join(doc['notes'])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--chunk", type=int, default=3000, help="events per round")
    parser.add_argument("--batch", type=int, default=500, help="maxOffsetsPerTrigger")
    parser.add_argument("--demo-events", type=int, default=20000, help="0: no demo run")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    overrides = {**cluster_overrides(3), "default.replication.factor": "3",
                 "min.insync.replicas": "2"}
    with SparkStandaloneCluster(args.dir / "spark", workers=2) as spark, \
            PostgresServer(args.dir / "postgres") as pg:
        say(f"Spark {spark.master_url} (UI {spark.web_ui_url}), PostgreSQL {pg.url}")
        with LocalCluster(args.dir / "kafka", 3, overrides=overrides) as kafka:
            create_topic_on_cluster(kafka.bootstrap, TAG, PARTITIONS)
            soak = Soak(spark, kafka, pg, args.dir, args.chunk, args.batch)
            try:
                soak.run(args.rounds)
            finally:
                soak.driver.kill()
        if args.demo_events:
            run_demo(spark, pg, args.dir, args.demo_events)


if __name__ == "__main__":
    main()
