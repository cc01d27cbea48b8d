#!/usr/bin/env bash
# Every benchmark row of issue 25's table, then one ratio table (bench/ratios.py).
#
#   bench/all.sh --quick              # a few minutes: a tenth of the records, one run each
#   bench/all.sh [--out DIR]          # the full figures: --repeat 3, targets interleaved
#
# Each benchmark writes its --json (and its log) into the results directory (default
# bench/results/quick/ with --quick, bench/results/full/ without; --out DIR to choose);
# a benchmark that fails is reported and the others still run; its row then reads
# "no result".  The table (row, figure, goal, met or not) is printed at the end and drawn
# into DIR/ratios.png.  Benchmarks report, they never assert: the exit status is 1 only
# when a benchmark failed functionally (exit 1: records missing, delivery errors).
#
# The rows: broker_ingest 1 KiB / mock, broker_fetch 1 KiB window / mock, producers 100 B
# acks=1 and acks=all / confluent-kafka (only those two clients run here), partitions
# 1,000 / 1 (--quick: without the 10,000-partition memory case), replication 1 KiB
# (--quick: the ingest cases only), pipeline topic / file, security SASL_SSL / plaintext;
# and issue 27's: Avro serialize + produce / confluent-kafka's AvroSerializer.
set -u

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
py="$root/.venv/bin/python"

quick=0
out=""
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) quick=1 ;;
        --out) shift; out="${1:?--out wants a directory}" ;;
        --out=*) out="${1#--out=}" ;;
        -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown option $1 (try --help)" >&2; exit 2 ;;
    esac
    shift
done
if [ "$quick" = 1 ]; then
    out="${out:-bench/results/quick}"
    q=(--quick)
    rep=()
else
    out="${out:-bench/results/full}"
    q=()
    rep=(--repeat 3)
fi
mkdir -p "$out"

failed=()
run() {  # run NAME ARGS...: bench/NAME.py ARGS, output to $out/NAME.log
    local name="$1"
    shift
    rm -f "$out/$name.json"  # a failed run must not leave an older figure in the table
    local t0=$SECONDS
    printf '%-14s ' "$name"
    if "$py" "bench/$name.py" "$@" > "$out/$name.log" 2>&1; then
        echo "done in $((SECONDS - t0)) s ($out/$name.log)"
    else
        echo "FAILED after $((SECONDS - t0)) s; the end of $out/$name.log:"
        tail -n 15 "$out/$name.log" | sed 's/^/    /'
        failed+=("$name")
    fi
}

start=$SECONDS
echo "issue 25 benchmarks -> $out ($([ "$quick" = 1 ] && echo quick || echo 'full, --repeat 3'))"
run broker_ingest "${q[@]}" "${rep[@]}" --json "$out/broker_ingest.json"
run broker_fetch "${q[@]}" "${rep[@]}" --json "$out/broker_fetch.json"
if [ "$quick" = 1 ]; then
    run producers --records 300000 --clients millrace,confluent-kafka \
        --json "$out/producers.json" --png "$out/producers.png"
    run partitions --quick --no-memory --json "$out/partitions.json"
    run replication --quick --ingest-only --json "$out/replication.json" \
        --plot "$out/replication.png"
else
    run producers --repeat 3 --clients millrace,confluent-kafka \
        --json "$out/producers.json" --png "$out/producers.png"
    run partitions --repeat 3 --json "$out/partitions.json"
    run replication --repeat 3 --json "$out/replication.json" --plot "$out/replication.png"
fi
run pipeline "${q[@]}" "${rep[@]}" --json "$out/pipeline.json"
run security "${q[@]}" "${rep[@]}" --json "$out/security.json"
run avro_produce "${q[@]}" "${rep[@]}" --json "$out/avro_produce.json"
echo "all benchmarks: $((SECONDS - start)) s"

"$py" bench/ratios.py --dir "$out" --plot "$out/ratios.png" --json "$out/ratios.json"
if [ ${#failed[@]} -gt 0 ]; then
    echo "failed: ${failed[*]}" >&2
    exit 1
fi
