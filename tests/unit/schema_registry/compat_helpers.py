"""Shared by the compatibility tests: one assertion for a verdict, used by every table."""

from __future__ import annotations

from millrace.client.schema_registry.schemas import ParsedSchema
from millrace.schema_registry.compatibility import incompatibilities


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
