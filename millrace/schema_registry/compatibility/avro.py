"""Avro compatibility: can data written with one schema be read with another?

The rules are the Avro specification's "Schema Resolution", applied to the schemas rather
than to a datum (Java's counterpart: ``org.apache.avro.SchemaCompatibility``):

- primitives match themselves, and the writer's type may be promoted: int to long, float
  or double; long to float or double; float to double; string to bytes and bytes to
  string.  Logical types follow their underlying type;
- records, enums and fixed match by unqualified name, or when one of the reader's aliases
  (qualified by the reader's namespace) is the writer's full name;
- records: each reader field is found in the writer by its name or one of its aliases and
  resolved recursively; a reader field the writer lacks needs a default; writer fields the
  reader lacks are skipped;
- enums: a writer symbol the reader lacks is an error unless the reader has a default;
- fixed: the sizes must be equal;
- arrays and maps: their items and values, recursively;
- unions: every branch the writer may write must be readable by some branch of the reader
  (a non-union on either side is a one-branch union).

Named types may be recursive: a (reader, writer) pair of named types already being checked
is assumed compatible (the check is co-inductive), and a pair already checked answers from
its memo, so every pair is visited once.

Paths in the messages point into the reader's schema: ``/fields/2 (coupon)``,
``/fields/1 (tags)/items``, ``/fields/0 (id)/1`` (branch 1 of a union).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from millrace.client.schema_registry.schemas import AvroSchema

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
NAMED = frozenset({"record", "error", "enum", "fixed"})
# writer type -> the reader types that can read it besides itself
PROMOTIONS: dict[str, frozenset[str]] = {
    "int": frozenset({"long", "float", "double"}),
    "long": frozenset({"float", "double"}),
    "float": frozenset({"double"}),
    "string": frozenset({"bytes"}),
    "bytes": frozenset({"string"}),
}


def avro_incompatibilities(reader: AvroSchema, writer: AvroSchema) -> list[str]:
    checker = _Checker(reader.named, writer.named)
    return _unique(checker.check(reader.parsed, writer.parsed, ""))


def _unique(problems: list[str]) -> list[str]:
    return list(dict.fromkeys(problems))


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _namespace(full_name: str) -> str:
    return full_name.rsplit(".", 1)[0] if "." in full_name else ""


def _aliases(definition: Mapping[str, Any]) -> set[str]:
    namespace = _namespace(str(definition["name"]))
    return {a if "." in a or not namespace else f"{namespace}.{a}"
            for a in definition.get("aliases", ())}


def _at(path: str) -> str:
    return path or "/"


class _Checker:
    def __init__(self, reader_named: Mapping[str, Any], writer_named: Mapping[str, Any]) -> None:
        self.reader_named = reader_named
        self.writer_named = writer_named
        # (reader full name, writer full name) -> problems; None while being checked
        self.memo: dict[tuple[str, str], list[str] | None] = {}

    def check(self, reader: Any, writer: Any, path: str) -> list[str]:
        r = _normal(reader, self.reader_named)
        w = _normal(writer, self.writer_named)
        if isinstance(w, list):
            if isinstance(r, list):
                problems: list[str] = []
                for i, branch in enumerate(w):
                    problems += self._union_branch(r, branch, path, f"writer's union branch {i}")
                return problems
            # every branch the writer may write must be readable by the reader's one type
            return [p for branch in w for p in self.check(r, branch, path)]
        if isinstance(r, list):
            return self._union_branch(r, w, path, "writer's type")
        return self._match(r, w, path)

    def _union_branch(self, reader_union: list[Any], writer: Any, path: str,
                      what: str) -> list[str]:
        """``writer`` (not a union) must be readable by one branch of ``reader_union``."""
        closest: list[str] | None = None
        for i, branch in enumerate(reader_union):
            problems = self.check(branch, writer, f"{path}/{i}")
            if not problems:
                return []
            if closest is None and _same_kind(_normal(branch, self.reader_named),
                                              _normal(writer, self.writer_named)):
                closest = problems
        if closest is not None:
            return closest
        return [f"{_at(path)}: {what} ({_describe(writer, self.writer_named)}) matches no "
                f"branch of the reader's union "
                f"({', '.join(_describe(b, self.reader_named) for b in reader_union)})"]

    def _match(self, r: Any, w: Any, path: str) -> list[str]:
        if isinstance(r, str) and isinstance(w, str):
            if r == w or r in PROMOTIONS.get(w, ()):
                return []
            return [self._mismatch(r, w, path)]
        kind = _kind(r)
        if kind != _kind(w):
            return [self._mismatch(r, w, path)]
        if kind == "array":
            return self.check(r["items"], w["items"], f"{path}/items")
        if kind == "map":
            return self.check(r["values"], w["values"], f"{path}/values")
        if not _names_match(r, w):
            return [f"{_at(path)}: reader {kind} {r['name']} cannot read writer {w['type']} "
                    f"{w['name']}: the names differ and no alias of the reader's matches"]
        if kind == "fixed":
            if r["size"] != w["size"]:
                return [f"{_at(path)}: fixed {r['name']} has size {r['size']} in the reader "
                        f"and {w['size']} in the writer"]
            return []
        if kind == "enum":
            missing = [s for s in w["symbols"] if s not in r["symbols"]]
            if missing and "default" not in r:
                return [f"{_at(path)}: enum {r['name']}: the writer's symbols "
                        f"{', '.join(missing)} are missing from the reader, which has no default"]
            return []
        return self._record(r, w, path)

    def _record(self, r: Mapping[str, Any], w: Mapping[str, Any], path: str) -> list[str]:
        key = (str(r["name"]), str(w["name"]))
        if key in self.memo:
            return self.memo[key] or []  # in progress (None): assumed compatible
        self.memo[key] = None
        writer_fields = {f["name"]: f for f in w["fields"]}
        problems: list[str] = []
        for i, field in enumerate(r["fields"]):
            where = f"{path}/fields/{i} ({field['name']})"
            found = next((writer_fields[n] for n in (field["name"], *field.get("aliases", ()))
                          if n in writer_fields), None)
            if found is None:
                if "default" not in field:
                    problems.append(f"{where}: reader field has no default and is missing "
                                    f"from the writer")
                continue
            problems += self.check(field["type"], found["type"], where)
        self.memo[key] = problems
        return problems

    def _mismatch(self, r: Any, w: Any, path: str) -> str:
        return (f"{_at(path)}: reader type {_describe(r, self.reader_named)} cannot read "
                f"writer type {_describe(w, self.writer_named)}")


def _normal(schema: Any, named: Mapping[str, Any]) -> Any:
    """A primitive's name, a union's list, or a complex type's definition (names looked up,
    logical types dropped)."""
    while True:
        if isinstance(schema, str):
            if schema in PRIMITIVES:
                return schema
            try:
                schema = named[schema]
            except KeyError:
                raise ValueError(f"unknown Avro type {schema!r}") from None
        elif isinstance(schema, list):
            return schema
        elif isinstance(schema, Mapping):
            kind = schema.get("type")
            if isinstance(kind, str) and (kind in NAMED or kind in ("array", "map")):
                return schema
            schema = kind  # a primitive with attributes (a logical type), or a nested type
        else:
            raise ValueError(f"not an Avro schema: {schema!r}")


def _same_kind(r: Any, w: Any) -> bool:
    """Shallow match: the reader branch a writer's type would be resolved against."""
    if isinstance(r, str) or isinstance(w, str):
        return isinstance(r, str) and isinstance(w, str) and (r == w or r in PROMOTIONS.get(w, ()))
    if isinstance(r, list) or isinstance(w, list):
        return False
    if _kind(r) != _kind(w):
        return False
    return _kind(r) in ("array", "map") or _names_match(r, w)


def _kind(s: Any) -> str:
    if isinstance(s, str):
        return s
    if isinstance(s, list):
        return "union"
    return "record" if s["type"] == "error" else str(s["type"])


def _names_match(r: Mapping[str, Any], w: Mapping[str, Any]) -> bool:
    writer_name = str(w["name"])
    return _short(str(r["name"])) == _short(writer_name) or writer_name in _aliases(r)


def _describe(schema: Any, named: Mapping[str, Any]) -> str:
    s = _normal(schema, named)
    if isinstance(s, str):
        return s
    if isinstance(s, list):
        return "union"
    if s["type"] in NAMED:
        return f"{s['type']} {s['name']}"
    return str(s["type"])
