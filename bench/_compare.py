"""Shared pieces of the client benchmarks (``producers.py``, ``consumers.py``): the same
workload through millrace and three other Python Kafka clients against one millrace
broker, a table with ratios to kafka-python and confluent-kafka, and a PNG bar chart.

Results reuse ``_common.Result`` with the client's name as ``target`` (MB/s there is
10^6 bytes of record values).
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import Result, median_runs, parse_overrides

CLIENTS = ("millrace", "kafka-python", "aiokafka", "confluent-kafka")
RESULTS_DIR = Path(__file__).resolve().parent / "results"

# (case, millrace result, {client: result}) -> "met ..." / "NOT met ..."
Goal = Callable[[Result, dict[str, Result]], str]


def parse_args(description: str, default_records: int, default_budget: float,
               add_options: Callable[[argparse.ArgumentParser], None] | None = None
               ) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=description,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    if add_options is not None:
        add_options(ap)
    ap.add_argument("--records", type=int, default=default_records, metavar="N",
                    help=f"records per run (default {default_records:,})")
    ap.add_argument("--budget", type=float, default=default_budget, metavar="SECONDS",
                    help="a run stops after this long; its rate stays records/time "
                         f"(default {default_budget:g})")
    ap.add_argument("--clients", default=",".join(CLIENTS),
                    help=f"comma-separated subset of {','.join(CLIENTS)}")
    ap.add_argument("--repeat", type=int, default=1, metavar="N",
                    help="run every case N times, clients interleaved; the table shows "
                         "the median run (default 1)")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    ap.add_argument("--png", metavar="PATH",
                    help="where to write the bar chart (default bench/results/<name>.png)")
    ap.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="broker config override (repeatable)")
    args = ap.parse_args()
    if args.records < 1 or args.repeat < 1 or args.budget <= 0:
        ap.error("--records, --repeat and --budget must be positive")
    args.client_names = [c.strip() for c in args.clients.split(",") if c.strip()]
    bad = [c for c in args.client_names if c not in CLIENTS]
    if bad:
        ap.error(f"unknown client(s) {bad}; choose from {CLIENTS}")
    args.overrides = parse_overrides(ap, args.override)
    return args


def _ratio(a: Result | None, b: Result | None) -> float | None:
    return a.rec_s / b.rec_s if a and b and b.rec_s else None


def goal_5x_kafka_python_half_confluent(mine: Result, others: dict[str, Result]) -> str:
    vs_kp = _ratio(mine, others.get("kafka-python"))
    vs_ck = _ratio(mine, others.get("confluent-kafka"))
    if vs_kp is None or vs_ck is None:
        return "n/a (needs kafka-python and confluent-kafka)"
    ok = vs_kp >= 5.0 and vs_ck >= 0.5
    return ("met" if ok else "NOT met") + " (>=5x kafka-python, >=0.5x confluent-kafka)"


def print_table(title: str, results: list[Result], goals: dict[str, Goal]
                ) -> list[dict[str, Any]]:
    """One row per (case, client), the median of repeated runs; returns rows for --json."""
    results = median_runs(results)
    print(f"\n{title}")
    header = (f"{'case':<15} {'client':<16} {'records':>9} {'secs':>6} {'rec/s':>11} "
              f"{'MB/s':>7} {'cpu brk/cli':>11} {'x kafka-py':>10} {'x confluent':>11}  goal")
    print(header)
    print("-" * len(header))
    rows: list[dict[str, Any]] = []
    for case in dict.fromkeys(r.case for r in results):
        by_client = {r.target: r for r in results if r.case == case}
        goal = ""
        if "millrace" in by_client and case in goals:
            goal = goals[case](by_client["millrace"], by_client)
        for r in (r for r in results if r.case == case):
            vs_kp = _ratio(r, by_client.get("kafka-python"))
            vs_ck = _ratio(r, by_client.get("confluent-kafka"))
            brk = "-" if r.broker_cpu is None else f"{100 * r.broker_cpu:.0f}%"
            cli = "-" if r.client_cpu is None else f"{100 * r.client_cpu:.0f}%"
            is_mine = r.target == "millrace"
            print(f"{case:<15} {r.target:<16} {r.records:>9} {r.seconds:>6.2f} "
                  f"{r.rec_s:>11,.0f} {r.mb_s:>7.1f} {brk + '/' + cli:>11} "
                  f"{'' if vs_kp is None else f'{vs_kp:.2f}':>10} "
                  f"{'' if vs_ck is None else f'{vs_ck:.2f}':>11}  {goal if is_mine else ''}")
            rows.append({**r.as_dict(),
                         "ratio_vs_kafka_python": None if vs_kp is None else round(vs_kp, 3),
                         "ratio_vs_confluent_kafka": None if vs_ck is None else round(vs_ck, 3),
                         "goal": goal if is_mine else None})
    return rows


def write_chart(path: Path, title: str, results: list[Result]) -> None:
    """Grouped bars: one group per case, one bar per client, rec/s (median runs)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = median_runs(results)
    cases = list(dict.fromkeys(r.case for r in results))
    clients = [c for c in CLIENTS if any(r.target == c for r in results)]
    width = 0.8 / max(1, len(clients))
    fig, ax = plt.subplots(figsize=(max(7.0, 2.4 + 2.2 * len(cases)), 4.8))
    for i, client in enumerate(clients):
        xs, ys = [], []
        for j, case in enumerate(cases):
            r = next((r for r in results if r.case == case and r.target == client), None)
            if r is not None:
                xs.append(j + (i - (len(clients) - 1) / 2) * width)
                ys.append(r.rec_s / 1e3)
        bars = ax.bar(xs, ys, width, label=client)
        ax.bar_label(bars, labels=[f"{y:,.0f}" for y in ys], fontsize=7, padding=2)
    ax.set_xticks(range(len(cases)), cases)
    ax.set_ylabel("thousand records/s")
    ax.set_title(textwrap.fill(title, 90), fontsize=10)
    ax.legend(fontsize=8)
    ax.margins(y=0.12)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {path}")
