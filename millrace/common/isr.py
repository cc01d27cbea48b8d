"""How an ISR change is told: which replicas left it, which joined, in one sentence each.
Shared by the broker's record of its state changes (``PartitionStateLog``) and the
console's own observations, so both read the same."""

from __future__ import annotations

from collections.abc import Sequence


def isr_changes(old: Sequence[int], new: Sequence[int]) -> list[tuple[str, str]]:
    """``(kind, text)`` for ``old`` -> ``new``: an ``isr-shrink`` naming the replicas that
    left, an ``isr-expand`` naming those that joined; both for a swap, none for no change."""
    gone = [r for r in old if r not in new]
    added = [r for r in new if r not in old]
    changes = []
    if gone:
        changes.append(("isr-shrink", f"{gone} left the ISR {list(old)} -> {list(new)}"))
    if added:
        changes.append(("isr-expand", f"{added} joined the ISR {list(old)} -> {list(new)}"))
    return changes
