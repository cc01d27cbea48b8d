"""Spark sessions for millrace: registration of the data source and a local session.

``register(spark)`` makes ``format("millrace")`` resolvable in a session (on a cluster,
call it in the driver script submitted with ``spark-submit``; executors import
``millrace`` from the Python environment Spark ships with the job).

``local_session()`` is the embedded default used by the pipeline, the demo and the tests:
``local[2]``, small shuffle partitions, no UI, loopback only, and the worker Python set to
the interpreter running the driver (the virtual environment), so executors import the same
``millrace`` as the driver.  ``jvm_log`` sends the JVM's own stdout and stderr (its start-up
notices, log4j's console output, the Python workers' stderr) to a file instead of the
terminal: pyspark's ``launch_gateway`` takes the child's ``Popen`` arguments, and a
``SparkContext`` given that gateway is the one the session builder then finds.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
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
                  conf: dict[str, str] | None = None,
                  jvm_log: Path | None = None) -> SparkSession:
    """A local SparkSession with the ``millrace`` source registered.

    Environment set before the JVM starts: ``PYSPARK_PYTHON`` / ``PYSPARK_DRIVER_PYTHON``
    (this interpreter, unless already set) and ``SPARK_LOCAL_IP`` (127.0.0.1 unless set).
    ``jvm_log``: the file the JVM's stdout and stderr go to (truncated), when this call
    starts the JVM; a JVM this process already started keeps its own.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    settings = {"spark.app.name": app_name, "spark.master": master,
                "spark.sql.shuffle.partitions": str(shuffle_partitions),
                "spark.ui.enabled": "false",
                "spark.ui.showConsoleProgress": "false",
                "spark.driver.host": os.environ["SPARK_LOCAL_IP"],
                "spark.sql.session.timeZone": "UTC", **(conf or {})}
    if jvm_log is not None:
        _start_jvm(settings, jvm_log)
    builder: Any = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark: SparkSession = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    register(spark)
    return spark


def _start_jvm(settings: dict[str, str], jvm_log: Path) -> None:
    """Start Spark's JVM with its stdout/stderr in ``jvm_log`` and a SparkContext on it
    (what the builder would do, but with the child's output redirected)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if getattr(SparkContext, "_gateway", None) is not None:
        return  # the JVM is running (a stopped session leaves it up): its output is set
    spark_conf = SparkConf(loadDefaults=False).setAll(list(settings.items()))
    with open(jvm_log, "wb") as log:  # the child keeps its own descriptor
        gateway = launch_gateway(spark_conf, popen_kwargs={"stdout": log,
                                                           "stderr": subprocess.STDOUT})
    SparkContext(conf=spark_conf, gateway=gateway)
