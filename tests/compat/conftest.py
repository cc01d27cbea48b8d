from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from millrace.testing.broker_process import BrokerProcess
from tests.compat.security_fixtures import secured_broker  # noqa: F401  (a fixture)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One real `millrace broker` process per test module."""
    data: Path = tmp_path_factory.mktemp("broker")
    with BrokerProcess(data) as b:
        yield b
    # A clean SIGTERM shutdown is part of every module's contract.
    assert b.proc is not None and b.proc.returncode == 0, b.logs()
    assert "stopped" in b.logs()
