"""The client metrics at the end of a perf run, printed as Kafka's perf tools print them with
``--print-metrics`` (``ToolsUtils.printMetrics``): one line per metric, sorted by its display
name ``group:name:{tag=value, ...}``, the value with three decimals::

    Metric Name                                                        Value
    producer-metrics:batch-size-avg:{client-id=perf-producer-1}      : 15561.000

No I/O: the caller prints the lines.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from millrace.client.metrics import MetricName


def display_name(metric_name: MetricName) -> str:
    tags = ", ".join(f"{k}={v}" for k, v in metric_name.tags)
    return f"{metric_name.group}:{metric_name.name}:{{{tags}}}"


def by_display_name(raw: Mapping[MetricName, float]) -> dict[str, float]:
    """``{display name: value}``, sorted by name (what the JSON output carries)."""
    return dict(sorted((display_name(mn), value) for mn, value in raw.items()))


def format_metrics(metrics: Mapping[str, float]) -> list[str]:
    """The table's lines: a blank line, the header, then one line per metric."""
    if not metrics:
        return []
    width = max(len(name) for name in metrics)
    lines = ["", f"{'Metric Name':<{width}}   Value"]
    for name in sorted(metrics):
        value = metrics[name]
        shown = "NaN" if math.isnan(value) else f"{value:.3f}"
        lines.append(f"{name:<{width}} : {shown}")
    return lines
