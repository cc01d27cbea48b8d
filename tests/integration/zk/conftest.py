"""Fixtures for the ZooKeeper tests: one real ZooKeeper server per module (Debian's
package, started by ``ZooKeeperProcess``) and, per test, a fresh chroot so tests never
see each other's znodes."""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from millrace.broker.zk import KafkaZkClient
from millrace.launcher.zookeeper_process import ZOOKEEPER_JAR, ZooKeeperProcess

if not ZOOKEEPER_JAR.exists() or shutil.which("java") is None:
    raise RuntimeError("the ZooKeeper tests need Debian's zookeeper package and java: "
                       "bash scripts/system-deps.sh java zookeeper")  # the test command does

_chroots = itertools.count()


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperProcess]:
    directory: Path = tmp_path_factory.mktemp("zookeeper")
    with ZooKeeperProcess(directory) as zk:
        yield zk


@pytest.fixture
def connect(zookeeper: ZooKeeperProcess) -> str:
    """``zookeeper.connect`` for this test: the server plus a chroot of its own."""
    return f"{zookeeper.connect_string}/t{next(_chroots)}"


@pytest.fixture
def zk_client_factory(connect: str) -> Iterator[Callable[[], KafkaZkClient]]:
    """Started clients on this test's chroot (top-level paths created), closed at the end."""
    made: list[KafkaZkClient] = []

    def make() -> KafkaZkClient:
        client = KafkaZkClient(connect, session_timeout_ms=6000,
                               connection_timeout_ms=10_000).start()
        client.create_top_level_paths()
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()
