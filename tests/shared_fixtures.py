"""What several conftests share about a fixture kept for the session but started late:
whether any test still to run asks for it (so that it stops after its last user, not
at the end of the whole run beside unrelated tests)."""

from __future__ import annotations

from pathlib import Path

import pytest


def still_wanted(item: pytest.Item, nextitem: pytest.Item | None, fixture: str,
                 directory: Path) -> bool:
    """Whether a test after ``item`` (under ``directory``) uses ``fixture``."""
    items = item.session.items
    try:
        later = items[items.index(item) + 1:]
    except ValueError:
        later = [nextitem] if nextitem is not None else []
    return any(fixture in getattr(i, "fixturenames", ()) and i.path.is_relative_to(directory)
               for i in later)
