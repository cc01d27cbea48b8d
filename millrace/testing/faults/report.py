"""Tables and plots of fault runs: ``python -m millrace.testing.faults.report <out dir>``.

Reads ``summary.json`` and each run's ``history.jsonl`` under the output directory of
``python -m millrace.testing.faults`` and prints a Markdown table per scenario (runs,
faults, records acknowledged, unknown, lost, duplicated, divergent ...), then draws, for
the runs named with ``--plot``, a timeline: records acknowledged per second (by the time
the acknowledgement came) and the share of sends that were eventually acknowledged (by
the time they were sent), with each fault's span shaded from injection to heal.

Runs with hostile clients (the security scenarios) get two more tables: per scenario the
hostile attempts, denials, authentication failures, unauthorized successes, hostile
records left in the log, authorized records lost and the brokers' RSS growth; and per
kind of attempt what the brokers answered.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from millrace.testing.faults.history import History


def table(runs: list[dict[str, Any]]) -> str:
    by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in runs:
        by[r["scenario"]].append(r)
    head = ("| scenario | runs | passed | faults | acknowledged | unknown | lost | duplicated "
            "| misplaced | reordered | divergent | commits back | other |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for name, rs in by.items():
        rep = [r["report"] for r in rs]

        def total(key: str, rep: list[dict[str, Any]] = rep) -> int:
            return sum(int(x.get(key, 0)) for x in rep)
        other = total("phantom") + total("ownership") + total("unconsumed")
        lines.append(
            f"| {name} | {len(rs)} | {sum(r['passed'] for r in rs)} | "
            f"{sum(r['faults_injected'] for r in rs)} | {total('acknowledged')} | "
            f"{total('unknown')} | {total('lost')} | {total('duplicated')} | "
            f"{total('misplaced')} | {total('reordered')} | {total('divergent')} | "
            f"{total('commits_backwards')} | {other} |")
    return "\n".join(lines)


def security_table(runs: list[dict[str, Any]]) -> str:
    """One row per scenario that ran hostile clients ('' when none did)."""
    by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in runs:
        if r.get("security"):
            by[r["scenario"]].append(r)
    if not by:
        return ""
    head = ("| scenario | runs | passed | hostile attempts | denied | bad SASL refused "
            "| unauthorized successes | hostile records | effects | records acknowledged "
            "| authorized records lost | broker RSS start → end, MiB (2nd half) |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for name, rs in by.items():
        sec = [r["security"] for r in rs]

        def total(key: str, sec: list[dict[str, Any]] = sec) -> int:
            return sum(int(x.get(key, 0)) for x in sec)
        rss = "; ".join(
            ", ".join(f"{v['start_kib'] / 1024:.0f} → {v['end_kib'] / 1024:.0f} "
                      f"({v.get('second_half_growth_kib', 0) / 1024:+.1f})"
                      for _, v in sorted(x["rss"].items())) for x in sec)
        lines.append(
            f"| {name} | {len(rs)} | {sum(r['passed'] for r in rs)} | "
            f"{total('attempts')} | {total('denied')} | {total('auth_failures')} | "
            f"{total('unauthorized_successes')} | {total('hostile_records')} | "
            f"{sum(len(x['examples']['effects']) for x in sec)} | "
            f"{sum(int(r['report']['acknowledged']) for r in rs)} | "
            f"{sum(int(r['report']['lost']) for r in rs)} | {rss} |")
    return "\n".join(lines)


def hostile_kinds_table(runs: list[dict[str, Any]], scenario: str) -> str:
    """What the brokers answered each kind of hostile attempt, over ``scenario``'s runs."""
    kinds: dict[str, dict[str, Any]] = {}
    for r in runs:
        if r["scenario"] != scenario or not r.get("security"):
            continue
        for kind, t in r["security"]["kinds"].items():
            k = kinds.setdefault(kind, {"attempts": 0, "denied": 0, "succeeded": 0,
                                        "refused": 0, "failed": 0, "codes": {}})
            for key in ("attempts", "denied", "succeeded", "refused", "failed"):
                k[key] += t[key]
            for code, n in t["codes"].items():
                k["codes"][code] = k["codes"].get(code, 0) + n
    head = "| attempt | sent | denied | succeeded | refused otherwise (codes, per error slot) | no answer |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for kind, k in kinds.items():
        codes = ", ".join(f"{c} {n}" for c, n in sorted(k["codes"].items()))
        lines.append(f"| {kind} | {k['attempts']} | {k['denied']} | {k['succeeded']} | "
                     f"{k['refused']}{f' ({codes})' if codes else ''} | {k['failed']} |")
    return "\n".join(lines)


def fault_counts(runs: list[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for r in runs:
        for f in r.get("faults", []):
            counts[f["kind"]] += 1
    return dict(sorted(counts.items()))


def timeline(history: History, bucket: float = 1.0
             ) -> tuple[list[float], list[float], list[float]]:
    """(bucket start, acknowledgements per second, share of sends acknowledged)."""
    end = max([op.completed or op.invoked for op in history.sends] + [0.0])
    n = int(end / bucket) + 1
    acks = [0.0] * n
    sent = [0] * n
    ok = [0] * n
    for op in history.sends:
        i = int(op.invoked / bucket)
        sent[i] += 1
        if op.outcome == "ok":
            ok[i] += 1
            if op.completed is not None:
                acks[int(op.completed / bucket)] += 1 / bucket
    share = [ok[i] / sent[i] if sent[i] else float("nan") for i in range(n)]
    return [i * bucket for i in range(n)], acks, share


def plot(history: History, title: str, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    t, acks, share = timeline(history)
    fig, (a, b) = plt.subplots(2, 1, figsize=(11, 5.5), sharex=True)
    a.plot(t, acks, lw=1, color="tab:blue")
    a.set_ylabel("acks / s")
    b.plot(t, share, lw=1, color="tab:green")
    b.set_ylabel("sent then acked")
    b.set_ylim(-0.05, 1.05)
    b.set_xlabel("seconds since start")
    for f in history.faults:
        for ax in (a, b):
            ax.axvspan(f.start, f.healed or f.start, color="tab:red", alpha=0.15, lw=0)
    a.set_title(title + "  (red: fault injected .. healed)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m millrace.testing.faults.report")
    parser.add_argument("out", type=Path, help="the --out directory of a fault run")
    parser.add_argument("--plot", action="append", default=[],
                        help="run directory name to plot (e.g. leader-kills-seed1)")
    parser.add_argument("--plot-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    runs = json.loads((args.out / "summary.json").read_text())
    print(table(runs))
    print()
    print("faults injected: " + ", ".join(f"{k} {v}" for k, v in fault_counts(runs).items()))
    security = security_table(runs)
    if security:
        print()
        print(security)
        for name in dict.fromkeys(r["scenario"] for r in runs if r.get("security")):
            print()
            print(f"{name}:")
            print(hostile_kinds_table(runs, name))
    for r in runs:
        if not r["passed"] or r["error"]:
            print(f"- {r['scenario']} seed {r['seed']}: passed={r['passed']} "
                  f"error={r['error']}")
    for name in args.plot:
        history = History.load(args.out / name / "history.jsonl")
        target = (args.plot_dir or args.out) / f"{name}.png"
        plot(history, name, target)
        print(f"plot: {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
