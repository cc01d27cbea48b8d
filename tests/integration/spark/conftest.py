"""Fixtures for the Spark tests: one local SparkSession per test run, a broker per module,
one 2-worker standalone cluster shared by the modules that use ``cluster``, and a cluster
of its own for a test that kills a part of it (``own_cluster``).

The session is the embedded default (`millrace.spark.local_session`: local[2], two shuffle
partitions, worker Python = this interpreter).  Tests that must kill a query abruptly run
the pipeline in a child process instead of using this session.

The shared cluster (a master and two workers: about 15 s to start, more on a busy machine)
starts for the first test that asks for ``cluster`` and stops after the last test of the
run that asks for it (``pytest_runtest_teardown`` below), not at the end of the session:
its JVMs do not idle through the rest of the suite.  Tests on it stay independent: each
runs its own application with its own topics, tables and checkpoint, kills at most its own
driver or executors (an application's, not the cluster's), and starts on an idle cluster:
the fixture waits until the master runs no application and no executor JVM is left.  A
test that kills a worker or the master takes ``own_cluster`` instead.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from millrace.launcher.spark_cluster import SparkStandaloneCluster, spark_missing
from millrace.testing.broker_process import BrokerProcess
from tests.shared_fixtures import still_wanted

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.integration]

HERE = Path(__file__).parent
IDLE_WAIT_S = 120.0
_shared: list[SparkStandaloneCluster] = []  # the running shared cluster, if any


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


def _new_cluster(tmp_path_factory: pytest.TempPathFactory) -> SparkStandaloneCluster:
    reason = spark_missing()
    if reason is not None:
        pytest.skip(reason)
    return SparkStandaloneCluster(tmp_path_factory.mktemp("spark"), workers=2)


@pytest.fixture
def cluster(tmp_path_factory: pytest.TempPathFactory) -> SparkStandaloneCluster:
    """The shared 2-worker Spark standalone cluster (1 core, 1g each): see the module doc."""
    if not _shared:
        _shared.append(_new_cluster(tmp_path_factory).start())
    spark = _shared[0]
    # an idle cluster for every test: the last test's application gone, its executors too
    # (the master drops an application shortly after its driver ends)
    deadline = time.monotonic() + IDLE_WAIT_S
    while spark.applications() or spark.executor_pids():
        if time.monotonic() > deadline:
            raise AssertionError(f"the shared Spark cluster still runs an earlier test's "
                                 f"application after {IDLE_WAIT_S:.0f}s: "
                                 f"{spark.applications()}, executors {spark.executor_pids()}")
        time.sleep(0.1)
    return spark


@pytest.fixture
def own_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkStandaloneCluster]:
    """A 2-worker Spark standalone cluster of the test's own, for a test that kills part
    of it."""
    with _new_cluster(tmp_path_factory) as spark:
        yield spark


def _stop_shared() -> None:
    while _shared:
        _shared.pop().stop()


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Stop the shared cluster once no test still to run asks for it."""
    if not _shared:
        return
    if not still_wanted(item, nextitem, "cluster", HERE):
        _stop_shared()


def pytest_sessionfinish(session: pytest.Session) -> None:
    _stop_shared()
