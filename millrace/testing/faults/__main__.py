"""``python -m millrace.testing.faults``: run fault scenarios against a local cluster.

    python -m millrace.testing.faults --scenario leader-kills --faults 20 --seed 7
    python -m millrace.testing.faults --minutes 30 --seed 1     # every scenario, repeated
    python -m millrace.testing.faults --scenario security --seconds 180

Each run's history, report and broker logs stay under ``--out`` (default
``build/faults``); ``summary.json`` there collects every run.  Exit status 1 when any
run failed: a normal scenario with an anomaly, or a negative control the checker missed.
``scripts/faults.sh`` is the long profile's wrapper.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

from millrace.testing.faults.runner import SCENARIOS, RunResult, load_fault_modules, run_scenario


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m millrace.testing.faults",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS),
                        help="scenario to run (repeatable; default: all of them)")
    parser.add_argument("--seed", type=int, default=1, help="first seed (default 1)")
    parser.add_argument("--faults", type=int, default=None,
                        help="faults per run (default: 5, or 20 for leader-kills)")
    parser.add_argument("--seconds", type=float, default=None,
                        help="how long a run of a scenario without faults lasts (security, "
                             "control-no-authorizer; default: the scenario's own, 60 s)")
    parser.add_argument("--minutes", type=float, default=None,
                        help="keep cycling through the scenarios, with seed, seed+1 ..., "
                             "until this many minutes have passed")
    parser.add_argument("--out", type=Path, default=Path("build/faults"))
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    args = parser.parse_args(argv)
    missing = load_fault_modules()
    if args.list:
        for s in SCENARIOS.values():
            print(f"{s.name:28} {s.description}")
        for m in missing:
            print(f"(unavailable: {m})")
        return 0
    names = args.scenario or list(SCENARIOS)
    args.out.mkdir(parents=True, exist_ok=True)
    # the clients' own logs (retries, disconnects: expected under faults) go to a file
    logging.basicConfig(filename=args.out / "clients.log", level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    results: list[RunResult] = []
    deadline = time.monotonic() + args.minutes * 60 if args.minutes else None
    seed = args.seed
    while True:
        for name in names:
            scenario = SCENARIOS[name]
            if scenario.faults:
                faults = args.faults or (20 if name == "leader-kills" else 5)
                r = run_scenario(scenario, seed, args.out / f"{name}-seed{seed}",
                                 faults=faults)
            else:
                r = run_scenario(scenario, seed, args.out / f"{name}-seed{seed}",
                                 seconds=args.seconds)
            results.append(r)
            verdict = "PASS" if r.passed else "FAIL"
            print(f"{verdict} {name} seed={seed}: {r.faults_injected} faults, "
                  f"{r.seconds:.0f}s{' -- ' + r.error if r.error else ''}\n"
                  f"  {r.summary()}", flush=True)
            (args.out / "summary.json").write_text(
                json.dumps([x.to_json() for x in results], indent=2))
            if deadline is not None and time.monotonic() > deadline:
                break
        seed += 1
        if deadline is None or time.monotonic() > deadline:
            break
    failed = [r for r in results if not r.passed]
    print(f"{len(results)} runs, {len(failed)} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
