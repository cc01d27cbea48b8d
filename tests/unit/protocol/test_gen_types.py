"""types.pyi: the committed stub is the generator's output, it describes the runtime classes
of millrace.protocol.types (same names, same nesting, same fields in declared order), and
mypy holds typed code to it."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from millrace.protocol import CLASSES, gen_types, types
from millrace.protocol.schema import Field, Versions
from millrace.protocol.struct import Struct

STUB = Path(gen_types.__file__).with_name("types.pyi")


def test_committed_stub_is_the_generators_output() -> None:
    assert STUB.read_text(encoding="utf-8") == gen_types.render(), (
        "types.pyi is stale: run `python -m millrace.protocol.gen_types`")


def test_runtime_module_exports_every_class_under_its_name() -> None:
    assert sorted(types.__all__) == sorted(CLASSES)
    assert len(CLASSES) == 2 * (33 + 10 + 2 + 3 + 2 + 1)
    for name, cls in CLASSES.items():
        assert getattr(types, name) is cls


def _stub_tree(node: ast.ClassDef) -> tuple[list[str], dict[str, Any]]:
    fields: list[str] = []
    nested: dict[str, Any] = {}
    for item in node.body:
        if isinstance(item, ast.ClassDef):
            nested[item.name] = _stub_tree(item)
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            fields.append(item.target.id)
        elif isinstance(item, ast.FunctionDef) and item.name == "__init__":
            params = [a.arg for a in item.args.kwonlyargs]
            assert params == fields and not item.args.args[1:], node.name
        elif isinstance(item, ast.FunctionDef) and item.name not in fields:
            fields.append(item.name)  # a records property (getter, then setter)
    return fields, nested


def _runtime_tree(cls: type[Struct]) -> tuple[list[str], dict[str, Any]]:
    nested = {k: _runtime_tree(v) for k, v in vars(cls).items()
              if isinstance(v, type) and issubclass(v, Struct)}
    return list(cls._fields), nested


def test_stub_mirrors_the_runtime_classes() -> None:
    module = ast.parse(STUB.read_text(encoding="utf-8"))
    classes = {n.name: n for n in module.body if isinstance(n, ast.ClassDef)}
    assert list(classes) == list(CLASSES)  # declaration order
    for name, cls in CLASSES.items():
        assert _stub_tree(classes[name]) == _runtime_tree(cls), name


@pytest.mark.parametrize(("field", "annotation"), [
    (Field("a", "int8", Versions.parse("0+")), "int"),
    (Field("a", "uint16", Versions.parse("0+")), "int"),
    (Field("a", "float64", Versions.parse("0+")), "float"),
    (Field("a", "string", Versions.parse("0+"), nullable=Versions.parse("5+")), "str | None"),
    (Field("a", "string", Versions.parse("0+"), default=None), "str | None"),
    (Field("a", "bytes", Versions.parse("0+")), "bytes"),
    (Field("a", "uuid", Versions.parse("0+")), "_uuid.UUID"),
    (Field("a", "records", Versions.parse("0+"), nullable=Versions.parse("0+")), "bytes | None"),
    (Field("a", "[]int32", Versions.parse("0+")), "list[int]"),
    (Field("a", "[]Topic", Versions.parse("0+"), nullable=Versions.parse("1+")),
     "list[Topic] | None"),
    (Field("a", "Leader", Versions.parse("0+")), "Leader"),
])
def test_field_annotations(field: Field, annotation: str) -> None:
    assert gen_types.field_type(field) == annotation


SNIPPET = '''\
from millrace.protocol.types import FetchResponse, ProduceResponse

P = ProduceResponse.TopicProduceResponse.PartitionProduceResponse
ok = P(index=0, error_code=0)
message: str | None = ok.error_message
r = ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(partition_responses=[ok])])
epoch: int = r.responses[0].partition_responses[0].current_leader.leader_epoch
f = FetchResponse()
f.responses[0].partitions[0].records = memoryview(b"")
data: bytes | None = f.responses[0].partitions[0].records
P(index="0")  # error
P(0)  # error
r.throttle_time_ms = "x"  # error
r.thottle_time_ms  # error
text: str = ok.error_message  # error
ProduceResponse.TopicProduceResponse(partitions=[])  # error
'''


def test_mypy_holds_typed_code_to_the_stub(tmp_path: Path) -> None:
    api = pytest.importorskip("mypy.api")
    source = tmp_path / "snippet.py"
    source.write_text(SNIPPET, encoding="utf-8")
    stdout, _, _ = api.run([str(source), "--cache-dir", str(tmp_path / "cache"),
                            "--no-error-summary", "--hide-error-context"])
    lines = {int(line.split(":")[1]) for line in stdout.splitlines() if ": error:" in line}
    expected = {n + 1 for n, text in enumerate(SNIPPET.splitlines()) if "# error" in text}
    assert len(expected) == 6
    assert lines == expected, stdout
