"""Spark sessions for millrace: registration of the data source and a local session.

``register(spark)`` makes ``format("millrace")`` resolvable in a session (on a cluster,
call it in the driver script submitted with ``spark-submit``; executors import
``millrace`` from the Python environment Spark ships with the job).

``local_session()`` is the embedded default used by the pipeline, the demo and the tests:
``local[2]``, small shuffle partitions, no UI, loopback only, and the worker Python set to
the interpreter running the driver (the virtual environment), so executors import the same
``millrace`` as the driver.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FORMAT = "millrace"


def register(spark: SparkSession) -> None:
    """Register the ``millrace`` data source in ``spark`` (idempotent)."""
    from millrace.spark.source import MillraceDataSource

    spark.dataSource.register(MillraceDataSource)


def local_session(app_name: str = "millrace", master: str = "local[2]",
                  shuffle_partitions: int = 2,
                  conf: dict[str, str] | None = None) -> SparkSession:
    """A local SparkSession with the ``millrace`` source registered.

    Environment set before the JVM starts: ``PYSPARK_PYTHON`` / ``PYSPARK_DRIVER_PYTHON``
    (this interpreter, unless already set) and ``SPARK_LOCAL_IP`` (127.0.0.1 unless set).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder: Any = (SparkSession.builder.appName(app_name).master(master)
                    .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
                    .config("spark.ui.enabled", "false")
                    .config("spark.ui.showConsoleProgress", "false")
                    .config("spark.driver.host", os.environ["SPARK_LOCAL_IP"])
                    .config("spark.sql.session.timeZone", "UTC"))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark: SparkSession = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    register(spark)
    return spark
