"""Fixtures of the cluster tests: a real ZooKeeper (Debian's package) and three real
``millrace broker`` processes, started by ``LocalCluster`` under ``tmp_path``.

``cluster`` is shared by a module whose tests leave the cluster as they found it;
``shared_cluster`` (``FAST`` and ``TXN``) by such tests across modules -- started for the
first test that asks, stopped after the last one, each test with topics and ids of its
own; ``fresh_cluster`` starts a new one for a test that kills, stops or pauses brokers.  A
cluster is stopped cleanly (controlled shutdown of each broker, then ZooKeeper) after a
passing test and killed after a failing one, whose brokers' logs stay in ``tmp_path``.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_support import FAST, TXN, ClusterFactory
from console_support import (
    Guarded,
    browser_fixture,
    guarded_fixture,
    playwright_fixture,
    shots_fixture,
)
from playwright.sync_api import Browser, Playwright

from millrace.launcher.dev_security import DevSecurity
from millrace.launcher.local_cluster import LocalCluster
from millrace.launcher.zookeeper_process import ZOOKEEPER_JAR
from tests.shared_fixtures import still_wanted

if not ZOOKEEPER_JAR.exists() or shutil.which("java") is None:
    # the test command installs both: their absence is a broken setup, not a skip
    raise RuntimeError("the cluster tests need Debian's zookeeper package and java: "
                       "bash scripts/system-deps.sh java zookeeper")



@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory,
            request: pytest.FixtureRequest) -> Iterator[LocalCluster]:
    directory: Path = tmp_path_factory.mktemp("cluster")
    failed = request.session.testsfailed
    c = LocalCluster(directory, 3, overrides=FAST).start()
    yield c
    _finish(c, request.session.testsfailed > failed)


def _finish(c: LocalCluster, failed: bool) -> None:
    if failed:
        c.kill_all()
    else:
        c.stop()


HERE = Path(__file__).parent
_shared: list[tuple[LocalCluster, int]] = []  # the running shared cluster, failures before


@pytest.fixture
def shared_cluster(tmp_path_factory: pytest.TempPathFactory,
                   request: pytest.FixtureRequest) -> LocalCluster:
    """One cluster (``FAST`` and ``TXN``) for the tests of several modules that leave it
    as they found it: saves a start and a stop per module."""
    if not _shared:
        c = LocalCluster(tmp_path_factory.mktemp("shared-cluster"), 3,
                         overrides={**FAST, **TXN}).start()
        _shared.append((c, request.session.testsfailed))
    return _shared[0][0]


def _stop_shared(session: pytest.Session) -> None:
    while _shared:
        c, failed = _shared.pop()
        _finish(c, session.testsfailed > failed)


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Stop the shared cluster once no test still to run asks for it."""
    if not _shared:
        return
    if not still_wanted(item, nextitem, "shared_cluster", HERE):
        _stop_shared(item.session)


def pytest_sessionfinish(session: pytest.Session) -> None:
    _stop_shared(session)


@pytest.fixture
def fresh_cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[ClusterFactory]:
    """``fresh_cluster(brokers=3, overrides=..., broker_overrides=...)`` starts a cluster
    with ``FAST`` plus the given overrides; it is stopped at the end of the test."""
    started: list[LocalCluster] = []
    failed = request.session.testsfailed

    def start(brokers: int = 3, overrides: dict[str, str] | None = None,
              broker_overrides: dict[int, dict[str, str]] | None = None,
              secured: bool = False) -> LocalCluster:
        directory = tmp_path / f"cluster-{len(started)}"
        c = LocalCluster(directory, brokers,
                         overrides={**FAST, **(overrides or {})},
                         broker_overrides=broker_overrides,
                         security=DevSecurity.create(directory) if secured else None)
        started.append(c)
        return c.start()

    yield start
    for c in started:
        _finish(c, request.session.testsfailed > failed)


# ---------------------------------------------------------------------- the console's browser
@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    yield from playwright_fixture()


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    yield from browser_fixture(playwright)


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shots_fixture(tmp_path_factory)


@pytest.fixture
def guarded(browser: Browser) -> Iterator[Guarded]:
    yield from guarded_fixture(browser)
