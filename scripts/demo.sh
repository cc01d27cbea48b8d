#!/usr/bin/env bash
# The main job. Until the Spark pipeline lands it checks the codec and record formats
# (`millrace selftest`) and then runs the broker on 127.0.0.1:9092 with
# config/server.properties (data under ./data) until Ctrl-C / SIGTERM.
# Extra arguments are passed to `millrace broker` (e.g. --override listeners=...).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
.venv/bin/millrace selftest
exec .venv/bin/millrace broker --config config/server.properties "$@"
