#!/usr/bin/env bash
# The main job: `millrace demo`. Sets up .venv with the spark extra (and Java when
# missing), then starts a broker, produces order events, runs the Spark pipeline into
# SQLite under ./data/demo and checks every row. Arguments go to `millrace demo`
# (e.g. --events 20000, --fresh, --bootstrap-server host:9092, --output json).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/system-deps.sh java      # Spark 4 needs Java >= 17
bash scripts/bootstrap.sh spark
exec .venv/bin/millrace demo "$@"
