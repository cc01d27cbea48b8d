"""Who writes the database rows on a Spark cluster: the driver, or the executors (issue 26).

    .venv/bin/python bench/pipeline_writes.py [--records 200000] [--repeat 2] [--json out.json]

The demo's job (``bench/pipeline_cluster.py``'s set-up: one broker, a 2-worker standalone
cluster of 1 core and 1g each, the state sink and the aggregate sink) into PostgreSQL
(``PostgresServer``: Debian's postgresql on loopback), with ``--database-writes driver``
(each micro-batch's rows come to the driver as Arrow and it ``COPY``s them) and
``--database-writes executors`` (``sinks/staged.py``: each task ``COPY``s its rows into a
staging table, the driver's transaction moves them).  Each case gets a fresh database and
checkpoint; the two alternate ``--repeat`` times; every database is checked row by row
against the fold.  records/s is the pipeline's own clock; the ratio is executors / driver
of the medians.  Nothing is asserted about speed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from _common import BenchFailure, main_guard, write_json
from pipeline_cluster import (
    SEED,
    WORKER_CORES,
    WORKER_MEMORY,
    WORKERS,
    check_tables,
    driver,
    wait_idle,
    write_job,
)

from millrace.demo.fold import fold
from millrace.demo.orders import OrderEventGenerator
from millrace.demo.run import create_topic, produce_events
from millrace.launcher.spark_cluster import SparkStandaloneCluster, spark_missing
from millrace.testing.broker_process import BrokerProcess
from millrace.testing.postgres import PostgresServer

WRITES = ("driver", "executors")


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000,
                    help="order events (default 200,000)")
    ap.add_argument("--partitions", type=int, default=6, help="topic partitions (default 6)")
    ap.add_argument("--batch", type=int, default=100_000,
                    help="maxOffsetsPerTrigger (default 100,000)")
    ap.add_argument("--repeat", type=int, default=2, metavar="N",
                    help="run both cases N times, alternating (default 2)")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = ap.parse_args()
    if min(args.records, args.partitions, args.batch, args.repeat) < 1:
        ap.error("--records, --partitions, --batch and --repeat must be positive")
    return args


def fresh_database(postgres: PostgresServer, name: str) -> str:
    import psycopg

    with psycopg.connect(postgres.url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"'.encode())
    return postgres.url.rsplit("/", 1)[0] + "/" + name


def run() -> None:
    args = parse_args()
    reason = spark_missing()
    if reason is not None:
        raise BenchFailure(f"no Spark cluster here: {reason}")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="millrace-bench-writes-") as tmp:
        root = Path(tmp)
        with PostgresServer(root / "postgres") as postgres, \
                BrokerProcess(root / "broker") as broker, \
                SparkStandaloneCluster(root / "spark", WORKERS, cores_per_worker=WORKER_CORES,
                                       memory_per_worker=WORKER_MEMORY) as cluster:
            print(f"PostgreSQL, broker {broker.bootstrap}, Spark {cluster.master_url}: "
                  f"{WORKERS} workers x {WORKER_CORES} core; {args.records:,} order events",
                  flush=True)
            topic = "bench-writes"
            create_topic(broker.bootstrap, topic, args.partitions)
            produce_events(broker.bootstrap, topic, OrderEventGenerator(SEED), 0, args.records)
            expected = fold(OrderEventGenerator(SEED).take(args.records))
            job = write_job(root / "job.json", broker.bootstrap, topic, args.batch)
            for rep in range(args.repeat):
                for writes in WRITES if rep % 2 == 0 else WRITES[::-1]:
                    wait_idle(cluster)
                    database = fresh_database(postgres, f"{writes}_{rep}")
                    with driver(job, cluster.master_url, root / f"{writes}-{rep}",
                                "available-now", database,
                                ("--database-writes", writes,
                                 "--conf", "spark.scheduler.minRegisteredResourcesRatio=1.0",
                                 "--conf",
                                 "spark.scheduler.maxRegisteredResourcesWaitingTime=120s")
                                ) as d:
                        summary, wall = d.wait()
                    if summary["input_rows"] != args.records:
                        raise BenchFailure(f"{writes}: read {summary['input_rows']} records")
                    check_tables(database, expected, f"run {rep + 1} {writes}")
                    rate = summary["input_rows"] / summary["elapsed_s"]
                    print(f"  {writes:<9} {args.records:,} records in "
                          f"{summary['elapsed_s']:6.2f} s = {rate:>8,.0f} rec/s (driver "
                          f"{wall:.1f} s in all); database = fold", flush=True)
                    rows.append({"writes": writes, "repeat": rep, "rec_s": rate,
                                 "seconds": summary["elapsed_s"], "wall_s": wall})
    medians = {w: statistics.median(r["rec_s"] for r in rows if r["writes"] == w)
               for w in WRITES}
    ratio = medians["executors"] / medians["driver"]
    print(f"\nmedian rec/s: driver {medians['driver']:,.0f}, executors "
          f"{medians['executors']:,.0f}; executors / driver = {ratio:.2f} "
          f"(load average now {[round(x, 1) for x in os.getloadavg()]})")
    write_json(args.json, "pipeline_writes", rows, medians=medians, ratio=ratio)


if __name__ == "__main__":
    main_guard(run)
