#!/usr/bin/env bash
# The main job. Until the broker and pipeline land this shows the codec:
# it encodes and decodes a request and a record batch with every codec.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/millrace "${@:-selftest}"
