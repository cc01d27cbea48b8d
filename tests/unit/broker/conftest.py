"""The ``broker`` fixture: in-process broker services over ``tmp_path`` (see brokergen)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.broker.brokergen import Broker


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(str(tmp_path / "logs"))
    try:
        yield b
    finally:
        b.close()
