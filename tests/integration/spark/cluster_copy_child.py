"""Child process of test_cluster_faults.py: a topic-to-topic copy on a Spark cluster, the
millrace source (read_committed) into the millrace sink, run to the end of the input
(``availableNow``) and then exit 0.

Usage: python cluster_copy_child.py MASTER UI_PORT BOOTSTRAP INPUT OUTPUT CHECKPOINT GUARANTEE

This process is the driver (its web UI on ``UI_PORT``, so the test can see which executor
runs a task); the reads and the sink's writes run in the cluster's executors.
``GUARANTEE`` is the sink's ``deliveryGuarantee`` (exactly-once or at-least-once).
"""

from __future__ import annotations

import sys

from millrace.spark import local_session

BATCH = "150"  # maxOffsetsPerTrigger: many micro-batches


def main() -> None:
    master, ui_port, bootstrap, source, output, checkpoint, guarantee = sys.argv[1:8]
    spark = local_session("cluster-copy", master=master,
                          conf={"spark.ui.enabled": "true", "spark.ui.port": ui_port})
    rows = (spark.readStream.format("millrace")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", BATCH)
            .option("kafka.isolation.level", "read_committed")
            .load())
    query = (rows.selectExpr("key", "value", "partition").writeStream.format("millrace")
             .option("kafka.bootstrap.servers", bootstrap)
             .option("topic", output)
             .option("deliveryGuarantee", guarantee)
             .option("checkpointLocation", checkpoint)
             .trigger(availableNow=True)
             .start())
    print("query started", flush=True)
    query.awaitTermination()
    print("copy finished", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
