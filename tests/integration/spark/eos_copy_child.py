"""Child process of test_sink_exactly_once.py: a streaming topic-to-topic copy through the
millrace source (read_committed) and the exactly-once millrace sink, until killed.

Usage: python eos_copy_child.py BOOTSTRAP INPUT OUTPUT CHECKPOINT
"""

from __future__ import annotations

import os
import sys

from millrace.spark import local_session


def main() -> None:
    bootstrap, source_topic, output_topic, checkpoint = sys.argv[1:5]
    spark = local_session("eos-copy")
    rows = (spark.readStream.format("millrace")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", source_topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "150")
            .option("kafka.isolation.level", "read_committed")
            .load())
    query = (rows.selectExpr("key", "value", "partition").writeStream.format("millrace")
             .option("kafka.bootstrap.servers", bootstrap)
             .option("topic", output_topic)
             .option("deliveryGuarantee", os.environ.get("EOS_CHILD_GUARANTEE", "exactly-once"))
             .option("checkpointLocation", checkpoint)
             .trigger(processingTime="200 milliseconds")
             .start())
    print("query started", flush=True)
    query.awaitTermination()


if __name__ == "__main__":
    main()
