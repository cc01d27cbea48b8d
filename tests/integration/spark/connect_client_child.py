"""Child process of test_spark_connect.py: a Spark Connect client using ``format("millrace")``.

A Connect session marks its whole process as a Connect one (pyspark sets
``SPARK_CONNECT_MODE_ENABLED``), so it runs here, away from the tests' classic session.
Prints one JSON document: each step's result, or its error.

Usage: python connect_client_child.py sc://127.0.0.1:PORT BOOTSTRAP INPUT OUTPUT CHECKPOINT
"""

from __future__ import annotations

import json
import sys
import warnings
from collections.abc import Callable
from typing import Any


def main() -> None:
    url, bootstrap, source_topic, output_topic, checkpoint = sys.argv[1:6]
    # pyspark 4.3 warns that it does not fully support pandas 3; nothing here uses pandas
    warnings.filterwarnings("ignore", "PySpark does not yet fully support pandas",
                            FutureWarning)
    from pyspark.sql import SparkSession

    from millrace.spark.source import MillraceDataSource

    spark: Any = SparkSession.builder.remote(url).getOrCreate()
    results: dict[str, Any] = {"session": type(spark).__module__}

    def step(name: str, action: Callable[[], Any]) -> None:
        try:
            results[name] = action()
        except Exception as e:  # the report is the point: what a Connect client meets
            results[name] = {"error": type(e).__name__, "message": str(e)[:2000]}

    def batch_values(topic: str) -> list[str]:
        rows = (spark.read.format("millrace").option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", topic).option("kafka.isolation.level", "read_committed")
                .load().selectExpr("cast(value as string) as v").collect())
        return sorted(r.v for r in rows)

    def stream_copy() -> list[int]:
        query = (spark.readStream.format("millrace")
                 .option("kafka.bootstrap.servers", bootstrap)
                 .option("subscribe", source_topic).option("startingOffsets", "earliest")
                 .load().selectExpr("key", "upper(cast(value as string)) as value")
                 .writeStream.format("millrace").option("kafka.bootstrap.servers", bootstrap)
                 .option("topic", output_topic).option("deliveryGuarantee", "exactly-once")
                 .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        query.awaitTermination()
        if query.exception() is not None:
            raise RuntimeError(str(query.exception()))
        return [p.numInputRows for p in query.recentProgress]

    def batch_write() -> int:
        rows = spark.createDataFrame([("k1", "written-1"), ("k2", "written-2")],
                                     "key string, value string")
        (rows.write.format("millrace").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", output_topic).mode("append").save())
        return 2

    step("register", lambda: spark.dataSource.register(MillraceDataSource))
    step("batch_read", lambda: batch_values(source_topic))
    step("stream_copy", stream_copy)
    step("batch_write", batch_write)
    step("output", lambda: batch_values(output_topic))
    spark.stop()
    print(json.dumps(results), flush=True)


if __name__ == "__main__":
    main()
