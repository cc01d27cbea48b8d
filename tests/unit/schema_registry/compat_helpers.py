"""Shared by the compatibility tests: one assertion for a verdict, used by every table."""

from __future__ import annotations

from millrace.client.schema_registry.schemas import ParsedSchema
from millrace.schema_registry.compatibility import (
    CompatibilityLevel,
    check,
    incompatibilities,
)


def assert_verdict(reader: ParsedSchema, writer: ParsedSchema, compatible: bool,
                   reason: str | None = None) -> list[str]:
    """``reader`` reads ``writer``'s data iff ``compatible``; an incompatible verdict must
    carry a message containing ``reason`` when one is given."""
    problems = incompatibilities(reader, writer)
    if compatible:
        assert problems == [], f"expected compatible, got {problems}"
    else:
        assert problems, "expected incompatible, got no problems"
        assert all(isinstance(p, str) and p.startswith("/") for p in problems), problems
        if reason is not None:
            assert any(reason in p for p in problems), f"no {reason!r} in {problems}"
    return problems


def assert_levels(reader: ParsedSchema, writer: ParsedSchema, backward: bool,
                  forward: bool) -> None:
    """A pair's verdicts carried to every level: the reader registered after [writer,
    writer] (every level sees the change), and after [writer, reader] (only the transitive
    levels see version 1)."""
    for level in CompatibilityLevel:
        rejects = (level.backward and not backward) or (level.forward and not forward)
        assert bool(check(level, reader, [writer, writer])) == rejects, level
        assert bool(check(level, reader, [writer, reader])) == (rejects and level.transitive), \
            level
