"""The test profiles: CI's bounded one (the default) and the long one.

Tests marked ``long`` repeat, at length, what faster tests and the long scripts cover:

- fault scenarios of the harness, whose long profile is ``scripts/faults.sh`` (every
  scenario, over and over): the network partitions (CI keeps
  tests/faults/test_network_partitions.py's targeted cases) and the leader kills (CI keeps
  tests/integration/cluster's targeted leader kills, test_cluster_failover.py and the
  clients' failover tests, and the harness's other scenarios and negative controls);
- run by ``scripts/pipeline-soak.sh``: the demo on a Spark cluster and the driver kill's
  unguarded control (test_cluster_restarts.py); the plaintext demo on three brokers
  (test_demo_cluster.py: CI runs the SASL_SSL one, which checks the same things); the
  pipeline's kill-twice test in both dialects (test_pipeline_exactly_once.py: CI runs the
  driver kill into PostgreSQL on the Spark cluster, and the SQLite sink through executor
  and worker kills); the exactly-once topic sink's kill-twice copy
  (test_sink_exactly_once.py: CI runs that sink through an executor kill and a replayed
  micro-batch on the Spark cluster, test_cluster_faults.py, and a task's rerun and a
  zombie attempt without Spark); the executor kill of the pipeline into SQLite on the
  Spark cluster (test_cluster_faults.py: CI runs the executor kill with the topic sink,
  and the pipeline into SQLite there through a worker kill, with the same checks).

They are deselected -- and counted in the summary line -- unless ``MILLRACE_TESTS=all``
(``MILLRACE_TESTS=all bash scripts/test.sh`` runs everything), so the test command stays
within CI's time budget.

Tests marked ``third_party_leaks`` use a third-party client against a broker they kill;
the client can leave sockets behind that its captured log records keep alive until pytest
drops them, after the test's teardown.  They are collected then, with their
``ResourceWarning`` ignored, instead of warning (an error here) in whichever later test
runs the next collection.
"""

from __future__ import annotations

import gc
import os
import warnings
from collections.abc import Generator

import pytest

PROFILE_ENV = "MILLRACE_TESTS"


def long_tests_run() -> bool:
    return os.environ.get(PROFILE_ENV, "") == "all"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if long_tests_run():
        return
    long = [item for item in items if item.get_closest_marker("long") is not None]
    if long:
        config.hook.pytest_deselected(items=long)
        items[:] = [item for item in items if item.get_closest_marker("long") is None]


def pytest_report_header(config: pytest.Config) -> str:
    if long_tests_run():
        return f"profile: all ({PROFILE_ENV}=all): the long tests run too"
    return (f"profile: CI's bounded one; tests marked long are deselected "
            f"({PROFILE_ENV}=all runs them)")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None
                            ) -> Generator[None, None, None]:
    # tryfirst: the outermost wrapper, so this runs after the logging plugin has dropped
    # the test's captured records (and what their tracebacks hold)
    try:
        return (yield)
    finally:
        if item.get_closest_marker("third_party_leaks") is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ResourceWarning)
                gc.collect()
