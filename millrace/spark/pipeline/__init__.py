"""The millrace pipeline: a topic -> Spark Structured Streaming -> database, exactly once.

::

    from millrace.spark.pipeline import (PipelineConfig, SourceConfig, StateSink,
                                          AggregateSink, Pipeline)
    config = PipelineConfig(
        name="orders",
        source=SourceConfig(bootstrap_servers="127.0.0.1:9092", subscribe="orders",
                            options={"startingOffsets": "earliest"}),
        value_format="json", value_schema="order_id STRING, price DOUBLE, ...",
        state_sinks=[StateSink(table="orders", key=["order_id"])],
        aggregate_sinks=[AggregateSink(table="revenue_per_minute", event_time="event_time",
                                       window="1 minute", aggregates={"n": "count(*)"})],
        database="sqlite:///abs/path/millrace.db", checkpoint_dir="/abs/path/checkpoints")
    result = Pipeline(config).run(progress=print)

``config.py`` holds the configuration and its validation, ``plan.py`` turns it into one
streaming DataFrame per sink, ``runner.py`` runs the queries with exactly-once writers
(``millrace.spark.sinks``) and reports progress.
"""

from __future__ import annotations

from millrace.spark.pipeline.config import (
    AggregateSink,
    PipelineConfig,
    SourceConfig,
    StateSink,
    Trigger,
)
from millrace.spark.pipeline.runner import (
    BatchProgress,
    Pipeline,
    PipelineError,
    PipelineResult,
    SinkWriter,
)

__all__ = ["AggregateSink", "BatchProgress", "Pipeline", "PipelineConfig", "PipelineError",
           "PipelineResult", "SinkWriter", "SourceConfig", "StateSink", "Trigger"]
