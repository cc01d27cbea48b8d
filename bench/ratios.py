"""The issue's ratio table, read back from the benchmarks' ``--json`` files.

    .venv/bin/python bench/ratios.py [--dir bench/results/quick] [--plot out.png] [--json out]

``bench/all.sh`` writes one JSON file per benchmark into a results directory; this reads
them and prints one row per figure of the table: the ratio (medians of interleaved runs),
the range of the per-run ratios where the runs pair up, the goal, met or not.  A file that
is missing or lacks the case shows as "no result".  Each benchmark keeps its own format;
the ``ROWS`` below say where each ratio lives:

- ``_common.print_table`` rows (broker_ingest, broker_fetch, security, partitions):
  ``results[]`` by case and target, ``ratio_vs_<base>``; per-run rates in
  ``extra.runs_rec_s`` of both targets, in run order;
- ``_compare.print_table`` rows (producers): ``ratio_vs_confluent_kafka``;
- pipeline: the ``topic`` row's ``ratio_vs_file`` (and its ``runs_rec_s``);
- replication: ``ratio_median_1kib`` and the per-run ratios in ``runs_1kib``;
- partitions: ``ratio`` and ``ratio_runs`` at the top level.

Nothing is asserted: the table reports.
"""

from __future__ import annotations

import argparse
import json
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
DEFAULT_DIR = BENCH / "results" / "quick"

Figure = tuple[float | None, list[float]]  # (ratio, per-run ratios)


@dataclass(frozen=True)
class Row:
    name: str
    file: str  # JSON file in the results directory
    goal: float
    extract: Callable[[dict[str, Any]], Figure]


def _result(doc: dict[str, Any], case: str, target: str, bench: str | None = None
            ) -> dict[str, Any] | None:
    return next((r for r in doc.get("results", [])
                 if r.get("case") == case and r.get("target") == target
                 and (bench is None or r.get("bench") == bench)), None)


def _paired(mine: dict[str, Any] | None, base: dict[str, Any] | None) -> list[float]:
    """Per-run ratios of two interleaved series of rates (run i against run i)."""
    a = (mine or {}).get("extra", mine or {}).get("runs_rec_s", [])
    b = (base or {}).get("extra", base or {}).get("runs_rec_s", [])
    return [x / y for x, y in zip(a, b, strict=False) if y] if len(a) == len(b) > 1 else []


def table_ratio(case: str, mine: str, base: str, key: str, bench: str | None = None
                ) -> Callable[[dict[str, Any]], Figure]:
    """A ratio from a ``print_table`` row: ``key`` on ``mine``'s row of ``case``."""
    def extract(doc: dict[str, Any]) -> Figure:
        ours, theirs = _result(doc, case, mine, bench), _result(doc, case, base, bench)
        value = ours.get(key) if ours else None
        return (None if value is None else float(value)), _paired(ours, theirs)
    return extract


def pipeline_ratio(doc: dict[str, Any]) -> Figure:
    rows = {r.get("case"): r for r in doc.get("results", [])}
    topic = rows.get("topic")
    value = topic.get("ratio_vs_file") if topic else None
    return (None if value is None else float(value)), _paired(topic, rows.get("file"))


def replication_1kib(doc: dict[str, Any]) -> Figure:
    value = doc.get("ratio_median_1kib")
    runs = [float(r["ratio"]) for r in doc.get("runs_1kib", [])]
    return (None if value is None else float(value)), runs if len(runs) > 1 else []


def partitions_ratio(doc: dict[str, Any]) -> Figure:
    value = doc.get("ratio")
    runs = [float(x) for x in doc.get("ratio_runs", [])]
    return (None if value is None else float(value)), runs if len(runs) > 1 else []


ROWS = (
    Row("broker ingest 1 KiB acks=1, millrace / mock", "broker_ingest.json", 0.8,
        table_ratio("1KiB acks=1", "millrace", "mock", "ratio_vs_mock")),
    Row("broker fetch 1 KiB window, millrace / mock", "broker_fetch.json", 0.9,
        table_ratio("1KiB", "millrace", "mock", "ratio_vs_mock")),
    Row("producer 100 B acks=1, millrace / confluent-kafka", "producers.json", 0.8,
        table_ratio("100B acks=1", "millrace", "confluent-kafka", "ratio_vs_confluent_kafka")),
    Row("producer 100 B acks=all, millrace / confluent-kafka", "producers.json", 0.8,
        table_ratio("100B acks=all", "millrace", "confluent-kafka",
                    "ratio_vs_confluent_kafka")),
    Row("ingest 1,000 partitions / 1 partition", "partitions.json", 0.75, partitions_ratio),
    Row("replication 1 KiB, acks=all RF 3 / acks=1 RF 1", "replication.json", 0.7,
        replication_1kib),
    Row("pipeline, topic source / file source", "pipeline.json", 1.0, pipeline_ratio),
    Row("SASL_SSL / plaintext, 1 KiB ingest", "security.json", 0.5,
        table_ratio("1KiB acks=1", "sasl_ssl", "plaintext", "ratio_vs_plaintext", "ingest")),
    Row("Avro serialize + produce, millrace / confluent-kafka", "avro_produce.json", 1.0,
        table_ratio("serialize+produce", "millrace", "confluent-kafka",
                    "ratio_vs_confluent_kafka")),
)


def collect(directory: Path) -> list[dict[str, Any]]:
    """One dict per row: name, ratio (None: no result), runs, goal, met, file."""
    out: list[dict[str, Any]] = []
    for row in ROWS:
        path = directory / row.file
        ratio: float | None = None
        runs: list[float] = []
        note = ""
        try:
            ratio, runs = row.extract(json.loads(path.read_text()))
        except FileNotFoundError:
            note = f"no {row.file}"
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            note = f"unreadable {row.file}: {e}"
        if ratio is None and not note:
            note = f"no such case in {row.file}"
        out.append({"row": row.name, "ratio": ratio, "runs": runs, "goal": row.goal,
                    "met": None if ratio is None else ratio >= row.goal,
                    "file": str(path), "note": note})
    return out


def print_ratios(rows: list[dict[str, Any]], directory: Path) -> None:
    print(f"\nissue 25 ratios, from {directory}")
    width = max(len(r["row"]) for r in rows)
    header = f"{'row':<{width}} {'figure':>7} {'runs':>11} {'goal':>7}  met"
    print(header)
    print("-" * len(header))
    for r in rows:
        if r["ratio"] is None:
            print(f"{r['row']:<{width}} {'-':>7} {'':>11} {'>= ' + format(r['goal'], 'g'):>7}  "
                  f"no result ({r['note']})")
            continue
        runs = f"{min(r['runs']):.2f}..{max(r['runs']):.2f}" if r["runs"] else ""
        print(f"{r['row']:<{width}} {r['ratio']:>7.2f} {runs:>11} "
              f"{'>= ' + format(r['goal'], 'g'):>7}  {'met' if r['met'] else 'NOT met'}")
    met = sum(1 for r in rows if r["met"])
    measured = sum(1 for r in rows if r["ratio"] is not None)
    print(f"\n{met} of {measured} measured figures meet their goal ({len(rows)} rows)")


def plot(rows: list[dict[str, Any]], path: Path, directory: Path) -> None:
    """Horizontal bars: each figure against its goal (a tick), green met, red not; the
    per-run range as an error bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 0.55 * len(rows) + 1.6))
    ys = list(range(len(rows)))[::-1]
    for y, r in zip(ys, rows, strict=True):
        if r["ratio"] is not None:
            color = "tab:green" if r["met"] else "tab:red"
            ax.barh(y, r["ratio"], color=color, alpha=0.8, height=0.6)
            if r["runs"]:
                lo, hi = min(r["runs"]), max(r["runs"])
                ax.errorbar(r["ratio"], y, xerr=[[max(0.0, r["ratio"] - lo)],
                                                 [max(0.0, hi - r["ratio"])]],
                            fmt="none", ecolor="k", capsize=3, lw=1)
            right = max([r["ratio"], r["goal"], *r["runs"]])  # clear of bar, tick, whisker
            ax.text(right + 0.02, y, f"{r['ratio']:.2f}", va="center", fontsize=8)
        else:
            ax.text(0.02, y, "no result", va="center", fontsize=8, color="gray")
        ax.plot([r["goal"], r["goal"]], [y - 0.4, y + 0.4], color="k", lw=2)
    ax.set_yticks(ys, [textwrap.fill(r["row"], 40) for r in rows], fontsize=8)
    ax.set_xlabel("ratio (bar; range of runs as whiskers); black tick: the issue's goal")
    top = max([1.1, *(r["ratio"] or 0 for r in rows), *(max(r["runs"], default=0) for r in rows)])
    ax.set_xlim(0, top * 1.12)
    ax.set_title(f"issue 25 ratios ({directory.name})", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {path}")


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--dir", type=Path, default=DEFAULT_DIR,
                    help=f"where the JSON files are (default {DEFAULT_DIR.relative_to(BENCH.parent)})")
    ap.add_argument("--plot", type=Path, metavar="PNG", help="also draw the ratios against goals")
    ap.add_argument("--json", type=Path, metavar="PATH", help="also write the table as JSON")
    args = ap.parse_args()
    rows = collect(args.dir)
    print_ratios(rows, args.dir)
    if args.json:
        args.json.write_text(json.dumps({"dir": str(args.dir), "rows": rows}, indent=1) + "\n")
        print(f"wrote {args.json}")
    if args.plot:
        plot(rows, args.plot, args.dir)


if __name__ == "__main__":
    main()
