#!/usr/bin/env bash
# The long profile of the transactions proof (tests/integration/cluster/
# test_transactions_cluster.py): with MILLRACE_TXN_LONG=1 the copier test copies 20000
# records through 9 rounds of bounces (copier kill -9, coordinator kill -9, broker
# SIGTERM, in turn), and the zombie and dead-producer tests run again; all of it RUNS
# times (default 1).  Each run's clusters and copier logs stay under build/txn-soak/.
#
#   scripts/transactions-soak.sh [RUNS]
#
# Exit status 1 as soon as a run fails.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh test
bash scripts/system-deps.sh java zookeeper
runs="${1:-1}"
out="build/txn-soak/$(date +%Y%m%d-%H%M%S)"
mkdir -p "$out"
for ((i = 1; i <= runs; i++)); do
    echo "== run $i of $runs ($out/run-$i)"
    MILLRACE_TXN_LONG=1 PYTHONPATH="$PWD" .venv/bin/python -m pytest -q -x -s \
        -p no:cacheprovider --basetemp "$out/run-$i" \
        tests/integration/cluster/test_transactions_cluster.py
done
