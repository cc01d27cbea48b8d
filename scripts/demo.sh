#!/usr/bin/env bash
# The main job: `millrace demo`. Sets up .venv with the spark extra (and Java when
# missing), then starts a broker, produces order events, runs the Spark pipeline into
# SQLite under ./data/demo and checks every row. Arguments go to `millrace demo`
# (e.g. --events 20000, --fresh, --bootstrap-server host:9092, --output json).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v java >/dev/null 2>&1 || bash scripts/system-deps.sh java
bash scripts/bootstrap.sh spark
exec .venv/bin/millrace demo "$@"
