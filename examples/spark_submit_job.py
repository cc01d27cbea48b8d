"""A user's own Spark job with millrace as its source and sink, run with ``spark-submit``.

It copies a topic to another topic, upper-casing each value, exactly once: the source
reads ``read_committed`` and the sink writes each micro-batch in Kafka transactions
(``deliveryGuarantee=exactly-once``), so a task run again or a driver restarted on the
same checkpoint never leaves a record twice for ``read_committed`` readers.  With
``trigger(availableNow=True)`` it copies what the input topic holds when it starts, then
ends; drop the trigger (and keep ``awaitTermination``) to run it for ever.

    $SPARK_HOME/bin/spark-submit --master spark://127.0.0.1:7077 \\
        --conf spark.pyspark.python=$PWD/.venv/bin/python \\
        examples/spark_submit_job.py 127.0.0.1:9092 orders orders-upper /tmp/orders-ck

``spark.pyspark.python`` is the interpreter of the driver and of every executor's Python
workers: one where ``millrace`` is installed (or ship it with ``--py-files``, see
docs/spark-cluster-notes.md).  Tasks read their partitions straight from the brokers.
"""

import sys

from pyspark.sql import SparkSession

from millrace.spark import register


def main() -> None:
    bootstrap, source_topic, output_topic, checkpoint = sys.argv[1:5]
    spark = SparkSession.builder.appName("millrace-example").getOrCreate()
    register(spark)  # makes format("millrace") known to this session

    orders = (spark.readStream.format("millrace")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", source_topic)
              .option("startingOffsets", "earliest")
              .option("kafka.isolation.level", "read_committed")
              .load())
    upper = orders.selectExpr("key", "upper(cast(value as string)) as value")
    query = (upper.writeStream.format("millrace")
             .option("kafka.bootstrap.servers", bootstrap)
             .option("topic", output_topic)
             .option("deliveryGuarantee", "exactly-once")
             .option("checkpointLocation", checkpoint)
             .trigger(availableNow=True)
             .start())
    query.awaitTermination()
    copied = sum(p["numInputRows"] for p in query.recentProgress)
    print(f"copied {copied} records from {source_topic} to {output_topic}")
    spark.stop()


if __name__ == "__main__":
    main()
