"""The PySpark connector: ``format("millrace")`` for reads, streaming reads and writes.

Built on Spark 4's Python Data Source API.  Option names and the output schema follow
Spark's built-in Kafka source, so switching from ``format("kafka")`` is a one-word change::

    from millrace.spark import register
    register(spark)
    df = (spark.readStream.format("millrace")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "orders").load())

Nothing here imports pyspark at module import time except the modules that define the
data source itself, so ``millrace`` works without the ``spark`` extra installed.
"""

from __future__ import annotations

from millrace.spark.session import local_session, register

__all__ = ["local_session", "register"]
