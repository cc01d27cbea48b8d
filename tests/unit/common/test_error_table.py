"""One table of error codes: ``millrace.common.errors.Errors``, and nothing else.

``local_error_codes`` reads source with ``ast`` (nothing is imported) and reports every
module- or class-level assignment that binds one of Kafka's error names (``Errors``'
member names except ``NONE``; leading underscores ignored) to an integer literal, and
every enum other than ``common/errors.py``'s ``Errors`` with a member named like a Kafka
error holding that error's code: a second table that can drift from the first.  Names
bound inside functions are not declarations and are not checked.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from millrace.common.errors import Errors, KafkaError, for_code, for_name

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "millrace"
TABLE = PACKAGE / "common" / "errors.py"

# Kafka error names a constant or enum member must not take.  NONE (0) is also the name
# of unrelated "nothing" values (SubscriptionType, OffsetResetStrategy, CompressionType).
ERROR_NAMES = frozenset(Errors.__members__) - {"NONE"}
_ENUM_BASES = frozenset({"Enum", "IntEnum"})


def _int_literal(node: ast.expr) -> int | None:
    """The value of ``16``, ``-1`` or ``+3``; None for anything else (bools included)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _int_literal(node.operand)
        if value is None:
            return None
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def _bindings(stmt: ast.stmt) -> Iterator[tuple[str, ast.expr]]:
    """(name, value) for each plain name an assignment statement binds."""
    if isinstance(stmt, ast.Assign):
        pairs = [(target, stmt.value) for target in stmt.targets]
    elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        pairs = [(stmt.target, stmt.value)]
    else:
        return
    while pairs:
        target, value = pairs.pop(0)
        if isinstance(target, ast.Name):
            yield target.id, value
        elif (isinstance(target, ast.Tuple | ast.List) and isinstance(value, ast.Tuple | ast.List)
              and len(target.elts) == len(value.elts)):
            pairs[:0] = zip(target.elts, value.elts)


def _is_enum(cls: ast.ClassDef) -> bool:
    for base in cls.bases:
        name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", None)
        if name in _ENUM_BASES:
            return True
    return False


def _enum_member_code(value: ast.expr) -> int | None:
    """An enum member's code: ``16`` or the first item of ``(16, "NotCoordinatorError", ...)``."""
    if isinstance(value, ast.Tuple) and value.elts:
        return _int_literal(value.elts[0])
    return _int_literal(value)


def _scope(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of a module or class body, through if/try/with/for/while blocks
    (same scope) and into nested classes; function bodies are another scope."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if isinstance(stmt, ast.ClassDef):
            yield from _scope(stmt.body)
            continue
        for field in ("body", "orelse", "finalbody", "handlers"):
            for child in getattr(stmt, field, ()):
                yield from _scope(child.body if isinstance(child, ast.ExceptHandler)
                                  else [child])
        if isinstance(stmt, ast.Match):
            for case in stmt.cases:
                yield from _scope(case.body)


def check_source(source: str, filename: str, *, table: bool = False) -> list[str]:
    """Violations in one module's source as ``"<filename>:<line>: <what>"``.  ``table`` is
    for common/errors.py itself: only its enums are checked, and ``Errors`` is allowed."""
    found = []
    for stmt in _scope(ast.parse(source, filename).body):
        if not table:
            for name, value in _bindings(stmt):
                code = _int_literal(value)
                if name.lstrip("_") in ERROR_NAMES and code is not None:
                    found.append(f"{filename}:{stmt.lineno}: {name} = {code} "
                                 f"(use Errors.{name.lstrip('_')})")
        if isinstance(stmt, ast.ClassDef) and _is_enum(stmt):
            if table and stmt.name == "Errors":
                continue
            for member in stmt.body:
                for name, value in _bindings(member):
                    if name in ERROR_NAMES and _enum_member_code(value) == Errors[name]:
                        found.append(f"{filename}:{member.lineno}: enum {stmt.name} "
                                     f"repeats {name} = {int(Errors[name])} (use Errors)")
    return found


def local_error_codes(paths: Iterable[Path]) -> list[str]:
    """Violations in the given files, named relative to the repository root."""
    found = []
    for path in paths:
        path = path.resolve()
        name = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)
        found += check_source(path.read_text(encoding="utf-8"), name, table=path == TABLE)
    return found


def _package_files() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_no_module_declares_error_codes_of_its_own() -> None:
    found = local_error_codes(_package_files())
    assert not found, "error codes declared outside Errors:\n" + "\n".join(found)


def test_the_package_is_scanned() -> None:
    files = _package_files()
    assert TABLE in files
    assert ROOT / "millrace" / "protocol" / "connection.py" in files


def test_the_checker_reports_a_constant_with_file_and_line() -> None:
    source = "import x\n\nNOT_COORDINATOR = 16\n"
    assert check_source(source, "m.py") == [
        "m.py:3: NOT_COORDINATOR = 16 (use Errors.NOT_COORDINATOR)"]


@pytest.mark.parametrize("source", [
    "_NOT_COORDINATOR = 16",
    "UNKNOWN_SERVER_ERROR = -1",
    "NOT_COORDINATOR: int = 16",
    "NOT_COORDINATOR = 15",  # any integer, not only the right one
    "A, NOT_COORDINATOR = 1, 16",
    "X = NOT_COORDINATOR = 16",
    "if True:\n    NOT_COORDINATOR = 16",
    "try:\n    pass\nexcept E:\n    NOT_COORDINATOR = 16",
    "class C:\n    NOT_COORDINATOR = 16",
    "class C:\n    class D:\n        NOT_COORDINATOR = 16",
], ids=["underscore", "negative", "annotated", "wrong-code", "tuple", "chained", "if-block",
        "except", "class", "nested-class"])
def test_the_checker_reports(source: str) -> None:
    assert len(check_source(source, "m.py")) == 1


@pytest.mark.parametrize("source", [
    "NONE = 0",
    "NOT_COORDINATOR = Errors.NOT_COORDINATOR",
    "NOT_COORDINATOR = True",
    "NOT_COORDINATOR_TIMEOUT_MS = 16",
    "def f():\n    NOT_COORDINATOR = 16\n    return NOT_COORDINATOR",
    "x = {16: 'NOT_COORDINATOR'}",
], ids=["none", "alias", "bool", "other-name", "function-local", "literal-use"])
def test_the_checker_accepts(source: str) -> None:
    assert check_source(source, "m.py") == []


@pytest.mark.parametrize("base", ["IntEnum", "Enum", "enum.IntEnum"])
def test_the_checker_reports_a_second_enum(base: str) -> None:
    source = (f"class GroupErrors({base}):\n    NONE = 0\n    NOT_COORDINATOR = 16\n"
              f"    UNKNOWN_MEMBER_ID = (25, 'UnknownMemberIdError')\n    OTHER = 3\n")
    # In common/errors.py itself only enums are checked (its Errors is the table).
    assert check_source(source, "m.py", table=True) == [
        "m.py:3: enum GroupErrors repeats NOT_COORDINATOR = 16 (use Errors)",
        "m.py:4: enum GroupErrors repeats UNKNOWN_MEMBER_ID = 25 (use Errors)"]
    assert "m.py:3: NOT_COORDINATOR = 16 (use Errors.NOT_COORDINATOR)" in check_source(
        source, "m.py")


def test_the_checker_allows_only_the_table_itself() -> None:
    source = 'class Errors(IntEnum):\n    NOT_COORDINATOR = (16, "NotCoordinatorError", True)\n'
    assert check_source(source, "errors.py", table=True) == []
    assert check_source(source, "other.py") == [
        "other.py:2: enum Errors repeats NOT_COORDINATOR = 16 (use Errors)"]


def test_codes_and_names_are_unique() -> None:
    aliases = [name for name, member in Errors.__members__.items() if member.name != name]
    assert aliases == []  # an IntEnum makes a repeated code an alias of the first name
    assert len({int(e) for e in Errors}) == len(Errors.__members__)
    assert len({e.exception_name for e in Errors if e > 0}) == len(Errors) - 2


@pytest.mark.parametrize("error", [e for e in Errors if e > 0], ids=lambda e: e.name)
def test_every_member_maps_to_its_class(error: Errors) -> None:
    cls = for_code(error)
    assert cls is for_name(error.name) is error.exception
    assert (cls.code, cls.name, cls.__name__) == (int(error), error.name, error.exception_name)
    assert cls.retriable is error.retriable


def test_every_name_but_none_is_its_class_name() -> None:
    # Moved from the group coordinator's own enum (broker/group/errors.py), now gone.
    for e in Errors:
        if e is not Errors.NONE:
            assert for_code(e.value).name == e.name


def test_unknown_server_error_and_none() -> None:
    assert Errors.UNKNOWN_SERVER_ERROR == -1 and Errors.NONE == 0
    assert for_code(Errors.UNKNOWN_SERVER_ERROR) is KafkaError
    assert for_name("UNKNOWN_SERVER_ERROR") is KafkaError is Errors.UNKNOWN_SERVER_ERROR.exception
    assert Errors.NONE.exception is KafkaError and not Errors.NONE.retriable
    with pytest.raises(KeyError):
        for_name("NONE")  # 0 is no error: there is no class for it
