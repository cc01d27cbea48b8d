#!/usr/bin/env bash
# The long profile of the pipeline's fault tests (tests/integration/spark/
# test_cluster_restarts.py), for a person to run, not CI (tens of minutes):
#
# 1. restart_soak.py: a 2-worker Spark standalone cluster, a 3-broker cluster (topic
#    replicated 3 times, min.insync.replicas=2) and PostgreSQL; one pipeline on a growing
#    stream (ROUNDS chunks of CHUNK events) with a fault every round, in turn: an executor
#    kill -9, a worker kill -9, the driver's process group kill -9 and a restart on its
#    checkpoint, the kill -9 of a partition's leader, a PostgreSQL restart; then the
#    database must equal the fold of every event produced.  Then `millrace demo --brokers
#    3 --spark-master ... --database postgresql://...` (DEMO_EVENTS events; it kills a
#    leader of its own) on the same Spark cluster and database.
# 2. test_cluster_restarts.py with MILLRACE_SOAK_ROUNDS=ROUNDS: longer streams and
#    ROUNDS driver kills in a row before the restart that finishes.
# 3. The other pipeline tests of the long profile (marked long: CI leaves them out, see
#    tests/conftest.py): the plaintext demo on three brokers (test_demo_cluster.py), the
#    kill-twice pipeline test (test_pipeline_exactly_once.py), the exactly-once topic
#    sink's kill-twice copy (test_sink_exactly_once.py) and the executor kill of the
#    pipeline into SQLite on a Spark cluster (test_cluster_faults.py).
#
#   scripts/pipeline-soak.sh [ROUNDS]        (default 10; CHUNK=3000 DEMO_EVENTS=20000)
#
# Everything (clusters' logs, the drivers' log, checkpoints) stays under
# build/pipeline-soak/<time>/.  Exit status 1 as soon as a step fails.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh test
bash scripts/system-deps.sh java zookeeper postgresql
rounds="${1:-10}"
out="build/pipeline-soak/$(date +%Y%m%d-%H%M%S)"
mkdir -p "$out"
echo "== soak: $rounds rounds of faults ($out/soak)"
PYTHONPATH="$PWD" .venv/bin/python tests/integration/spark/restart_soak.py \
    --dir "$out/soak" --rounds "$rounds" --chunk "${CHUNK:-3000}" \
    --demo-events "${DEMO_EVENTS:-20000}"
echo "== tests: MILLRACE_SOAK_ROUNDS=$rounds ($out/tests)"
MILLRACE_TESTS=all MILLRACE_SOAK_ROUNDS="$rounds" PYTHONPATH="$PWD" .venv/bin/python -m pytest -q -x \
    -p no:cacheprovider --basetemp "$out/tests" \
    tests/integration/spark/test_cluster_restarts.py
echo "== the other long pipeline tests ($out/long)"
MILLRACE_TESTS=all PYTHONPATH="$PWD" .venv/bin/python -m pytest -q -x -m long \
    -p no:cacheprovider --basetemp "$out/long" \
    tests/integration/spark/test_cluster_faults.py \
    tests/integration/spark/test_demo_cluster.py \
    tests/integration/spark/test_pipeline_exactly_once.py \
    tests/integration/spark/test_sink_exactly_once.py
echo "== passed ($out)"
