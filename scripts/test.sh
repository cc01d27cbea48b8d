#!/usr/bin/env bash
# The test command: sets up .venv with the test extras, then runs the
# static checks (ruff, mypy, import-linter) and the whole pytest suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh test
bash scripts/system-deps.sh kcat java postgresql zookeeper nftables chromium
export PATH="$PWD/.venv/bin:$PATH"
echo "== ruff";          ruff check .
echo "== mypy";          mypy
echo "== import-linter"; lint-imports
echo "== pytest"
set +e
python -m pytest --durations=40 "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
    echo "pytest collected no tests: that is a failure here" >&2
    exit 1
fi
exit "$rc"
