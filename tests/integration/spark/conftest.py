"""Fixtures for the Spark tests: one local SparkSession per test run, a broker per module,
a 2-worker standalone cluster per module that uses ``cluster``.

The session is the embedded default (`millrace.spark.local_session`: local[2], two shuffle
partitions, worker Python = this interpreter).  Tests that must kill a query abruptly run
the pipeline in a child process instead of using this session.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from millrace.launcher.spark_cluster import SparkStandaloneCluster, spark_missing
from millrace.testing.broker_process import BrokerProcess

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.integration]


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from millrace.spark import local_session

    session = local_session("millrace-tests")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One real `millrace broker` process per test module."""
    data: Path = tmp_path_factory.mktemp("broker")
    with BrokerProcess(data) as b:
        yield b
    assert b.proc is not None and b.proc.returncode == 0, b.logs()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkStandaloneCluster]:
    """A 2-worker Spark standalone cluster (1 core, 1g each) per test module that asks."""
    reason = spark_missing()
    if reason is not None:
        pytest.skip(reason)
    with SparkStandaloneCluster(tmp_path_factory.mktemp("spark"), workers=2) as spark:
        yield spark
