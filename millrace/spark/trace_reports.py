"""``TraceReporter``: the Spark stages of traced records, reported to the brokers (issue 28).

A millrace broker keeps the events of *traced* records (a W3C ``traceparent`` header on
an armed topic, or a watched record: ``millrace.broker.record_tracer``) and takes
stages from the clients that handled them at ``POST /v1/traces/report``: a range of
offsets of a partition, a stage name (``spark.*``, ``sink.*``), a lane and a detail.
The broker adds the event to the traced records of the range, once per (stage, lane),
so a retried report or a replayed micro-batch adds nothing.

With the source option ``traceReports=true`` (off by default):

- the stream reader (``source.py``, Spark's Python source process) reports
  ``spark.batch`` when ``partitions(start, end)`` plans a micro-batch, lane
  ``spark <traceReportsName>`` (the pipeline's name under ``Pipeline``);
- a pipeline's ``SinkWriter`` (the driver) reports ``sink.write`` when the micro-batch's
  database transaction has committed, lane ``sink <tables>``, for the offsets of that
  batch as Spark's offset log in the query's checkpoint has them (``batch_offsets``).

Reports go to every broker of the cluster (``describe_cluster``, looked up again after
``NODES_TTL_S``): one POST per broker per stage and micro-batch, the ranges of every
partition in it, through ``BrokerHttp`` with the source's client settings.  Reporting
never fails the query: the first failure is logged at WARNING, later ones at DEBUG.
Nothing is sent for a batch with no records.

Thread ownership: one instance per thread that reports (the source's driver methods run
one at a time; the sink writer's batches one at a time).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from millrace.common.topic_partition import TopicPartition

if TYPE_CHECKING:
    from millrace.client.admin.broker_http import BrokerHttp
    from millrace.client.admin.kafka_admin_client import KafkaAdminClient
    from millrace.client.cluster import Node

log = logging.getLogger(__name__)

REPORT_PATH = "/v1/traces/report"
NODES_TTL_S = 60.0
HTTP_TIMEOUT_S = 2.0
ADMIN_TIMEOUT_MS = 5_000
MAX_TEXT = 200  # the broker's bound on a lane and a detail

Ranges = Mapping[TopicPartition, tuple[int, int]]  # [from, until) per partition


class TraceReporter:
    """Reports stages of offset ranges to every broker; see the module docstring."""

    def __init__(self, client_config: Mapping[str, Any], lane: str) -> None:
        self._client_config = dict(client_config)
        self.lane = lane[:MAX_TEXT]
        self._admin: KafkaAdminClient | None = None
        self._http: BrokerHttp | None = None
        self._nodes: list[Node] = []
        self._nodes_at = 0.0
        self._warned = False

    def report(self, stage: str, ranges: Ranges, detail: str, *,
               t_us: int | None = None, attrs: Mapping[str, Any] | None = None) -> int:
        """POST ``stage`` for the non-empty ``ranges`` to every broker; the number of
        traced records the brokers matched (0 when a report failed)."""
        entries = [{"topic": tp.topic, "partition": tp.partition, "from_offset": a,
                    "until_offset": b} for tp, (a, b) in sorted(ranges.items()) if a < b]
        if not entries:
            return 0
        body: dict[str, Any] = {"ranges": entries, "stage": stage, "lane": self.lane,
                                "detail": detail[:MAX_TEXT],
                                "t_us": time.time_ns() // 1000 if t_us is None else t_us}
        if attrs:
            body["attrs"] = dict(attrs)
        matched = 0
        try:
            http = self._connect()
            for node in self._brokers():
                try:
                    matched += int(http.post(node.id, node.host, REPORT_PATH,
                                             body).get("matched", 0))
                except Exception as e:  # reporting never fails the query
                    self.failed(f"broker {node.id}", e)
        except Exception as e:
            self.failed("the cluster", e)
        return matched

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = self._http = None

    def _connect(self) -> BrokerHttp:
        if self._http is None:
            from millrace.client.admin import KafkaAdminClient
            from millrace.client.admin.broker_http import BrokerHttp
            from millrace.spark.options import admin_config

            # a report waits at most seconds for the cluster, never a query's minute
            self._admin = KafkaAdminClient({**admin_config(self._client_config),
                                            "client.id": "millrace-spark-trace-reports",
                                            "default.api.timeout.ms": ADMIN_TIMEOUT_MS})
            self._http = BrokerHttp(self._admin, self._client_config, HTTP_TIMEOUT_S)
        return self._http

    def _brokers(self) -> list[Node]:
        now = time.monotonic()
        if not self._nodes or now - self._nodes_at > NODES_TTL_S:
            assert self._admin is not None
            self._nodes = list(self._admin.describe_cluster().nodes)
            self._nodes_at = now
        return self._nodes

    def failed(self, where: str, error: Exception) -> None:
        """Log a failure to report: the first at WARNING, the rest at DEBUG."""
        text = (str(error).strip().splitlines() or [type(error).__name__])[0][:300]
        if not self._warned:
            self._warned = True
            log.warning("trace reports (lane %r) to %s failed: %s; the query goes on "
                        "(further failures are logged at DEBUG)", self.lane, where, text)
        else:
            log.debug("trace reports (lane %r) to %s failed: %s", self.lane, where, text)


def batch_offsets(checkpoint: str, batch_id: int) -> tuple[Ranges, bool] | None:
    """The offsets micro-batch ``batch_id`` of a one-source query read, from Spark's
    offset log under ``checkpoint`` (``offsets/<id>``: a version line, the batch's
    metadata, the end offsets as ``{"topic": {"partition": offset}}``; the batch starts
    where ``offsets/<id - 1>`` ends).  With the second true the start is not known (the
    first batch, or its predecessor's entry purged) and the ranges start at 0.  None
    for a checkpoint that is not a local path, or an entry that cannot be read."""
    parts = urlsplit(checkpoint)
    if parts.scheme not in ("", "file"):
        return None
    base = Path(unquote(parts.path) if parts.scheme else checkpoint) / "offsets"
    end = _logged_offsets(base / str(batch_id))
    if end is None:
        return None
    start = _logged_offsets(base / str(batch_id - 1)) if batch_id > 0 else None
    return ({tp: ((start or {}).get(tp, 0), until) for tp, until in end.items()},
            start is None)


def _logged_offsets(path: Path) -> dict[TopicPartition, int] | None:
    try:
        lines = path.read_text("utf-8").splitlines()
    except OSError:
        return None
    if len(lines) < 3:
        return None
    try:
        doc = json.loads(lines[2])
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    out: dict[TopicPartition, int] = {}
    for topic, partitions in doc.items():
        if not isinstance(partitions, dict):
            return None
        for partition, offset in partitions.items():
            if not str(partition).isdigit() or isinstance(offset, bool) or \
                    not isinstance(offset, int) or offset < 0:
                continue
            out[TopicPartition(topic, int(partition))] = offset
    return out
