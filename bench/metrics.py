"""Metrics benchmark: ingest with the broker's metrics on (recorded, served and scraped)
against the same broker build with them off, in one run.

    .venv/bin/python bench/metrics.py [--quick] [--repeat N] [--json out.json]

Two ``millrace broker`` child processes on this machine:

* ``metrics_off``: ``metrics.enabled=false`` -- no per-request or per-topic metric is
  recorded, no HTTP listener;
* ``metrics_on``: the default recording plus ``http.listeners``, scraped by a thread
  every ``SCRAPE_S`` seconds while the producer runs (a Prometheus at a 5 s interval,
  three times its default rate), each scrape checked to parse and timed (a scrape costs
  the broker's loop ~15 ms at ~1,200 series: at 15 s intervals 0.1 % of it).

The cases are broker_ingest's (its ``ingest`` function, imported: 100 B and 1 KiB
records with acks=1, 100 B with acks=all; confluent-kafka Producer, one partition);
targets alternate order between repeats.  The ratio is metrics_on rec/s over
metrics_off rec/s.  Goal (reported, never asserted): >= 0.97 -- a metric is recorded
per request or per partition of a request, never per record.
"""

from __future__ import annotations

import statistics
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from _common import (
    BenchFailure,
    Goal,
    MillraceTarget,
    Result,
    Target,
    main_guard,
    parse_args,
    print_table,
    write_json,
)
from broker_ingest import CASES, ingest_on_off
from prometheus_client.parser import text_string_to_metric_families

from millrace.testing.broker_process import free_port

ON, OFF = "metrics_on", "metrics_off"
SCRAPE_S = 5.0


def goal(mine: Result | None, base: Result | None) -> str:
    if mine is None or base is None or not base.rec_s:
        return ""
    return ("met" if mine.rec_s / base.rec_s >= 0.97 else "NOT met") + " (>=0.97 of off)"


class MetricsOffTarget(MillraceTarget):
    name = OFF

    def __init__(self) -> None:
        super().__init__({"metrics.enabled": "false"})


class MetricsOnTarget(MillraceTarget):
    """Metrics recorded and scraped every SCRAPE_S by a background thread."""

    name = ON

    def __init__(self) -> None:
        self.url = f"http://127.0.0.1:{free_port()}"
        super().__init__({"http.listeners": self.url})
        self.scrapes = 0
        self.series = 0
        self.scrape_s = 0.0
        self.probe_ms: list[float] = []  # /healthz and /readyz round trips under load
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._scrape_loop, daemon=True)
        self._thread.start()

    def _scrape_loop(self) -> None:
        while not self._stop.wait(SCRAPE_S):
            try:
                started = time.perf_counter()
                with urllib.request.urlopen(self.url + "/metrics", timeout=10) as r:
                    text = r.read().decode()
                self.scrape_s += time.perf_counter() - started
                for probe in ("/healthz", "/readyz"):
                    started = time.perf_counter()
                    with urllib.request.urlopen(self.url + probe, timeout=10) as r:
                        r.read()
                    self.probe_ms.append((time.perf_counter() - started) * 1000)
                self.series = sum(len(f.samples) for f in text_string_to_metric_families(text))
                self.scrapes += 1
            except BaseException as e:  # reported at the end: a failed scrape fails the run
                self.error = e
                return

    def close(self) -> None:
        self._stop.set()
        self._thread.join(15)
        super().close()


@contextmanager
def targets() -> Iterator[list[Target]]:
    with ExitStack() as stack:
        off = MetricsOffTarget()
        stack.callback(off.close)
        on = MetricsOnTarget()
        stack.callback(on.close)
        yield [off, on]
        if on.error is not None:
            raise BenchFailure(f"{ON}: a scrape of {on.url}/metrics failed: {on.error!r}")
        print(f"  {ON}: {on.scrapes} scrapes, {on.series} samples in the last one, "
              f"{on.scrape_s / max(on.scrapes, 1) * 1000:.1f} ms per scrape; /healthz and "
              f"/readyz under load: median {statistics.median(on.probe_ms or [0]):.1f} ms, "
              f"max {max(on.probe_ms or [0]):.1f} ms")


def run() -> None:
    args = parse_args(__doc__ or "")
    with targets() as ts:
        results = ingest_on_off(ts, CASES, "bench-metrics-", args)
    goals: dict[str, Goal] = {c.name: goal for c in CASES}
    rows: list[dict[str, Any]] = print_table(
        f"ingest with metrics on (recorded, scraped every {SCRAPE_S:g} s) vs off "
        "(confluent-kafka Producer, as broker_ingest)", results, goals, ON, OFF)
    write_json(args.json, "metrics", rows)


if __name__ == "__main__":
    main_guard(run)
