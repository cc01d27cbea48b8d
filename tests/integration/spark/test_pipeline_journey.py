"""The journey of a record through the pipeline (issue 28): a real broker process with
an HTTP listener, a topic armed for tracing, a record produced with ``send_traced``
among untraced ones, and the pipeline on Spark local with the source option
``traceReports=true`` writing them into SQLite.  The broker's trace of the record then
holds ``spark.batch`` (the micro-batch that read it, reported by the source when it was
planned) and ``sink.write`` (the database transaction that wrote it, reported by the sink
writer after the commit), both covering the record's offset, in time order after
``broker.append``; the row is in the table.  Negative control: the same pipeline with
the option off leaves no spark or sink event on a traced record it wrote."""

from __future__ import annotations

import json
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from pipeline_events import VALUE_SCHEMA, create_topic, events, produce

from millrace.client.producer import KafkaProducer, ProducerRecord
from millrace.launcher.console_process import ConsoleProcess
from millrace.spark.pipeline import Pipeline, PipelineConfig, SourceConfig, StateSink
from millrace.spark.sinks import open_database
from millrace.testing.broker_process import BrokerProcess

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [
    pytest.mark.integration, pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]


@pytest.fixture(scope="module")
def traced_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data: Path = tmp_path_factory.mktemp("broker-journey")
    with BrokerProcess(data, overrides={"http.listeners": "http://127.0.0.1:0"}) as b:
        yield b
    assert b.proc is not None and b.proc.returncode == 0, b.logs()[-5000:]
    assert "Traceback" not in b.logs()


def call(url: str, body: dict[str, Any] | None = None) -> Any:
    request = urllib.request.Request(
        url, data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json"}, method="GET" if body is None else "POST")
    with urllib.request.urlopen(request, timeout=10) as reply:
        return json.loads(reply.read())


def traced_record(broker: BrokerProcess, topic: str) -> tuple[str, int, str]:
    """Arm ``topic``, then produce untraced records around one traced one: (trace id,
    offset, its order id)."""
    (url,) = broker.http_urls
    assert call(url + "/v1/traces/arm", {"topic": topic, "ttl_ms": 300_000})["partitions"] == 1
    before, traced, after = events(5, seed=3), events(1, seed=4)[0], events(5, seed=5)
    produce(broker.bootstrap, topic, before)
    producer: KafkaProducer[bytes, bytes] = KafkaProducer(
        {"bootstrap.servers": broker.bootstrap, "acks": "all"})
    with producer:
        future, journey = producer.send_traced(ProducerRecord(
            topic, traced.to_json(), key=traced.order_id.encode()))
        offset = future.get(20).offset
    produce(broker.bootstrap, topic, after)
    return journey.trace_id, offset, traced.order_id


def job(broker: BrokerProcess, topic: str, tmp_path: Path, reports: bool) -> PipelineConfig:
    options = {"startingOffsets": "earliest", "maxOffsetsPerTrigger": "1000"}
    if reports:
        options["traceReports"] = "true"
    return PipelineConfig(
        name=topic, source=SourceConfig(bootstrap_servers=broker.bootstrap, subscribe=topic,
                                        options=options),
        value_format="json", value_schema=VALUE_SCHEMA,
        state_sinks=[StateSink(table="orders", key=["order_id"])],
        database=f"sqlite:///{tmp_path / 'journey.db'}",
        checkpoint_dir=str(tmp_path / f"checkpoints-{topic}"), trigger="available-now")


def stages(broker: BrokerProcess, trace_id: str) -> list[dict[str, Any]]:
    (url,) = broker.http_urls
    (record,) = call(f"{url}/v1/traces/{trace_id}")["records"]
    events: list[dict[str, Any]] = record["events"]
    return events


def test_a_traced_records_micro_batch_and_database_write(
        spark: SparkSession, traced_broker: BrokerProcess, tmp_path: Path) -> None:
    topic = f"journey-{uuid.uuid4().hex[:8]}"
    create_topic(traced_broker.bootstrap, topic, 1)
    trace_id, offset, order_id = traced_record(traced_broker, topic)
    config = job(traced_broker, topic, tmp_path, reports=True)
    result = Pipeline(config, spark).run()
    assert result.input_rows == 11 and offset == 5  # one batch: offsets 0..10

    # the broker adds a reported stage only to the traced records in the range reported

    found = stages(traced_broker, trace_id)
    by_stage = {e["stage"]: e for e in found}
    append, batch, write = (by_stage["broker.append"], by_stage["spark.batch"],
                            by_stage["sink.write"])
    assert append["t_us"] <= batch["t_us"] <= write["t_us"], found
    assert [e["stage"] for e in found].index("spark.batch") > \
        [e["stage"] for e in found].index("broker.append")
    assert batch["lane"] == f"spark {topic}"
    assert f"{topic}-0 0..10" in batch["detail"] and batch["partitions"] == 1
    assert write["lane"] == "sink orders"
    assert write["detail"].startswith("micro-batch 0 committed in ")
    assert "orders (11)" in write["detail"], write
    assert (write["batch_id"], write["tables"], write["rows"]) == (0, "orders", 11)
    assert sum(e["stage"] in ("spark.batch", "sink.write") for e in found) == 2

    # the console's "trace offset N of partition P" shows them in the pipeline's lanes
    with ConsoleProcess(traced_broker.bootstrap, tmp_path / "console") as console:
        looked = call(f"{console.url}api/journey?topic={topic}&partition=0&offset={offset}")
    assert looked["record"]["trace_id"] == trace_id
    lanes = {e["stage"]: e["lane"] for e in looked["stages"]}
    assert (lanes["spark.batch"], lanes["sink.write"]) == (f"spark {topic}", "sink orders")
    assert lanes["broker.append"] == "broker 0"

    db = open_database(config.database)
    try:
        rows = db.query(f"SELECT order_id FROM orders WHERE order_id = '{order_id}'")
    finally:
        db.close()
    assert [tuple(r) for r in rows] == [(order_id,)]

    # negative control: the option off, the same pipeline reports nothing
    other = f"journey-off-{uuid.uuid4().hex[:8]}"
    create_topic(traced_broker.bootstrap, other, 1)
    quiet_trace, _, _ = traced_record(traced_broker, other)
    quiet = replace(job(traced_broker, other, tmp_path, reports=False), name=other)
    assert Pipeline(quiet, spark).run().input_rows == 11
    quiet_stages = [e["stage"] for e in stages(traced_broker, quiet_trace)]
    assert "broker.append" in quiet_stages
    assert not [s for s in quiet_stages if s.startswith(("spark.", "sink."))], quiet_stages
