#!/usr/bin/env bash
# The long profile of the fault harness: every scenario (or those named with
# --scenario), over and over with seeds S, S+1, ... until N minutes have passed; then
# the tables and the timeline plots of docs/reliability.md.
#
#   scripts/faults.sh --minutes 30 --seed 1 [--out build/faults/long] [--scenario NAME]...
#   scripts/faults.sh --scenario security --scenario control-no-authorizer --seconds 180
#
# Scenarios without faults (security, control-no-authorizer) run for --seconds each
# (default 60) instead of a number of faults.
# Needs root (nftables rules and cgroups for the partitions, tmpfs mounts for the full
# disk).  Exit status 1 when any run failed: an anomaly in a normal scenario, or a
# negative control the checker missed; the run directories keep every history and log.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh test
bash scripts/system-deps.sh java zookeeper nftables
out="build/faults/$(date +%Y%m%d-%H%M%S)"
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
    if [ "${args[$i]}" = "--out" ] && [ $((i + 1)) -lt ${#args[@]} ]; then
        out="${args[$((i + 1))]}"
    fi
done
if ! printf '%s\n' "${args[@]}" | grep -qx -- "--out"; then
    args+=(--out "$out")
fi
set +e
.venv/bin/python -m millrace.testing.faults "${args[@]}"
rc=$?
set -e
plots=()
for d in "$out"/leader-kills-seed*; do
    [ -d "$d" ] && plots+=(--plot "$(basename "$d")") && break
done
.venv/bin/python -m millrace.testing.faults.report "$out" "${plots[@]}"
exit "$rc"
