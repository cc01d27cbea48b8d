#!/usr/bin/env bash
# Creates .venv (if missing) and installs millrace with the given extras.
# Usage: scripts/bootstrap.sh [extras]   e.g. scripts/bootstrap.sh test
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
PY="${PYTHON:-python3}"
if ! "$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
    echo "millrace needs Python >= 3.11 (found: $("$PY" --version 2>&1))" >&2
    exit 1
fi
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
stamp=".venv/.millrace-installed-${extras:-base}"
# setup.py builds the optional C accelerators: a change to it or their sources reinstalls
c_changed=""
for src in millrace/record/_speedups.c millrace/record/millrace_record_capi.h \
        millrace/client/producer/_internals/_speedups.c \
        millrace/client/producer/_internals/_speedups_lock.h \
        millrace/client/producer/_internals/_speedups_send.h; do
    [ "$src" -nt "$stamp" ] && c_changed=1
done
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ setup.py -nt "$stamp" ] \
        || [ -n "$c_changed" ]; then
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
    if [ -n "$extras" ]; then
        .venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[$extras]"
    else
        .venv/bin/python -m pip install --quiet --disable-pip-version-check -e .
    fi
    touch "$stamp"
fi
# Spark starts its Python workers with pyspark.zip ahead of site-packages, and a zip
# holds no compiled bytecode: every worker and every streaming source process
# compiled pyspark anew (~0.5 s per streaming query start).  When that zip is the
# one inside this environment's own pyspark (same release), this .pth moves it behind
# site-packages, where pip left the compiled modules.  Other Spark installs are untouched.
site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
cmp -s scripts/millrace-pyspark-path.pth "$site/millrace-pyspark-path.pth" \
    || cp scripts/millrace-pyspark-path.pth "$site/millrace-pyspark-path.pth"

