"""JSON Schema compatibility: does the reader accept every document the writer accepts?

JSON Schema has no resolution step: a consumer "reads" a document when it validates
against the consumer's schema.  So the writer is compatible with the reader when the
writer's set of valid documents is a subset of the reader's, which is what Confluent's
JSON Schema rules approximate.  This module checks a sound subset, keyword by keyword (it
may call a compatible change incompatible in the corners it does not model, never the
other way round within what it models):

- ``true``/``{}`` accepts everything, ``false`` nothing;
- ``type``: every writer type must be accepted by the reader (``integer`` is accepted by
  ``number``: widening is compatible, narrowing is not); a schema without ``type`` allows
  every type (its ``enum``/``const`` values' types when it has those);
- ``enum``/``const``: the writer's values must all be in the reader's (values removed or an
  enum added by the reader are incompatible);
- strings: ``maxLength``/``minLength`` tightened by the reader, ``pattern`` or ``format``
  added or changed;
- numbers: ``maximum``/``exclusiveMaximum`` lowered, ``minimum``/``exclusiveMinimum``
  raised (or added), ``multipleOf`` added or changed to a value that does not divide
  the writer's;
- objects (the content model is *open* unless ``additionalProperties`` is ``false``):
  a property both have is compared recursively; a property the reader adds is compatible
  when the writer's model is closed (it never writes it) and incompatible when it is open
  (it may write it with any value) unless the reader's schema for it accepts anything;
  a property the reader removes is compatible when the reader's model is open and
  incompatible when it is closed; ``additionalProperties`` closed by the reader, or a
  schema for it, compared like a property; ``patternProperties`` compared by identical
  pattern; a property made ``required`` by the reader is incompatible;
  ``maxProperties``/``minProperties`` tightened;
- arrays: ``items`` (one schema, or a tuple compared position by position) and
  ``additionalItems``; ``maxItems``/``minItems`` tightened, ``uniqueItems`` added;
- ``anyOf``/``oneOf``: every writer branch must be accepted by some reader branch (a
  non-combined schema is a one-branch union); ``allOf``: the writer must satisfy every
  reader member, and a writer's ``allOf`` is read as its members merged;
- ``$ref``: local JSON pointers (``#/definitions/x``, ``#/$defs/x``) and references to
  other registered schemas by their reference name; recursive references are assumed
  compatible when a (reader, writer) pair is met again.

Not modelled: ``not``, ``if``/``then``/``else``, ``dependencies``/``dependentSchemas``/
``dependentRequired``, ``contains``, ``propertyNames``, ``unevaluated*``,
``prefixItems`` (2020-12), and ``$ref`` into a remote URL; a reader keyword among these
that the writer does not share identically is reported as a change that cannot be proven
compatible.

Paths in the messages are JSON pointers into the reader's schema.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from millrace.client.schema_registry.schemas import JsonSchema

ALL_TYPES = frozenset({"null", "boolean", "object", "array", "number", "integer", "string"})
ANNOTATIONS = frozenset({"$schema", "$id", "id", "$comment", "title", "description", "default",
                         "examples", "definitions", "$defs", "readOnly", "writeOnly",
                         "deprecated", "contentEncoding", "contentMediaType"})
UNMODELLED = ("not", "if", "then", "else", "dependencies", "dependentSchemas",
              "dependentRequired", "contains", "propertyNames", "unevaluatedProperties",
              "unevaluatedItems", "prefixItems")
UPPER_BOUNDS = {"string": ("maxLength",), "number": ("maximum", "exclusiveMaximum"),
                "object": ("maxProperties",), "array": ("maxItems",)}
LOWER_BOUNDS = {"string": ("minLength",), "number": ("minimum", "exclusiveMinimum"),
                "object": ("minProperties",), "array": ("minItems",)}


def json_incompatibilities(reader: JsonSchema, writer: JsonSchema) -> list[str]:
    checker = _Checker(_Document(reader), _Document(writer))
    return list(dict.fromkeys(checker.check(reader.document, writer.document, "")))


class _Document:
    """Resolves ``$ref`` within one schema and the schemas it references."""

    def __init__(self, schema: JsonSchema) -> None:
        self.root = schema.document
        self.resources: dict[str, Any] = {name: resource.contents
                                          for name, resource in schema.resources}

    def resolve(self, node: Any, base: Any) -> tuple[Any, Any, str | None]:
        """(the node, the document it is in, the reference followed or None)."""
        ref = node.get("$ref") if isinstance(node, Mapping) else None
        if not isinstance(ref, str):
            return node, base, None
        name, _, pointer = ref.partition("#")
        document = base if not name else self.resources.get(name)
        if document is None:
            raise _Unresolvable(ref)
        target = document
        for part in [p for p in pointer.split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            try:
                target = target[int(part)] if isinstance(target, list) else target[part]
            except (KeyError, IndexError, ValueError, TypeError):
                raise _Unresolvable(ref) from None
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        if siblings and isinstance(target, Mapping):
            target = {**target, **siblings}
        return target, document, f"{id(document)}{ref}"


class _Unresolvable(Exception):
    pass


def _pointer(path: str, *parts: object) -> str:
    for part in parts:
        path += "/" + str(part).replace("~", "~0").replace("/", "~1")
    return path


def _at(path: str) -> str:
    return path or "/"


def _trivial(schema: Any) -> bool:
    return schema is True or (isinstance(schema, Mapping) and set(schema) <= ANNOTATIONS)


def _types(schema: Mapping[str, Any]) -> frozenset[str]:
    declared = schema.get("type")
    if isinstance(declared, str):
        return frozenset({declared})
    if isinstance(declared, list):
        return frozenset(declared)
    values = ([schema["const"]] if "const" in schema
              else schema["enum"] if isinstance(schema.get("enum"), list) else None)
    if values is not None:
        return frozenset(_type_of(v) for v in values)
    return ALL_TYPES


def _type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _accepts_type(reader_types: frozenset[str], t: str) -> bool:
    return t in reader_types or (t == "integer" and "number" in reader_types)


def _merge_all_of(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A writer's ``allOf`` read as one schema: its members' keywords merged."""
    merged = {k: v for k, v in schema.items() if k != "allOf"}
    for member in schema["allOf"]:
        if not isinstance(member, Mapping):
            continue
        for key, value in member.items():
            if key == "properties" and isinstance(merged.get(key), Mapping):
                merged[key] = {**merged[key], **value}
            elif key == "required" and isinstance(merged.get(key), list):
                merged[key] = [*merged[key], *value]
            else:
                merged.setdefault(key, value)
    return merged


class _Checker:
    def __init__(self, reader: _Document, writer: _Document) -> None:
        self.reader = reader
        self.writer = writer
        self.reader_base: Any = reader.root
        self.writer_base: Any = writer.root
        self.in_progress: set[tuple[str | None, str | None]] = set()

    def check(self, r: Any, w: Any, path: str) -> list[str]:
        try:
            r, r_base, r_ref = self.reader.resolve(r, self.reader_base)
            w, w_base, w_ref = self.writer.resolve(w, self.writer_base)
        except _Unresolvable as e:
            return [f"{_at(path)}: cannot resolve $ref {e.args[0]!r}"]
        key = (r_ref, w_ref)
        if r_ref is not None or w_ref is not None:
            if key in self.in_progress:
                return []  # a recursive pair met again: assumed compatible
            self.in_progress.add(key)
        saved = self.reader_base, self.writer_base
        self.reader_base, self.writer_base = r_base, w_base
        try:
            return self._check(r, w, path)
        finally:
            self.reader_base, self.writer_base = saved
            self.in_progress.discard(key)

    def _check(self, r: Any, w: Any, path: str) -> list[str]:
        if _trivial(r) or w is False:
            return []
        if r is False:
            return [f"{_at(path)}: the reader accepts nothing (false) and the writer "
                    f"accepts some documents"]
        if w is True:
            w = {}
        if not isinstance(r, Mapping) or not isinstance(w, Mapping):
            return [f"{_at(path)}: not a schema"]
        if isinstance(w.get("allOf"), list):
            return self._check(r, _merge_all_of(w), path)
        for union in ("anyOf", "oneOf"):
            if isinstance(w.get(union), list):
                rest = {k: v for k, v in w.items() if k != union}
                return [p for branch in w[union]
                        for p in self.check(r, {**rest, **branch}
                                            if isinstance(branch, Mapping) else branch, path)]
        if isinstance(r.get("allOf"), list):
            rest = {k: v for k, v in r.items() if k != "allOf"}
            problems = [p for i, member in enumerate(r["allOf"])
                        for p in self.check(member, w, _pointer(path, "allOf", i))]
            return problems + (self._check(rest, w, path) if rest else [])
        for union in ("anyOf", "oneOf"):
            if isinstance(r.get(union), list):
                return self._reader_union(r, union, w, path)
        return self._keywords(r, w, path)

    def _reader_union(self, r: Mapping[str, Any], union: str, w: Mapping[str, Any],
                      path: str) -> list[str]:
        rest = {k: v for k, v in r.items() if k != union}
        first: list[str] | None = None
        for i, branch in enumerate(r[union]):
            candidate = {**rest, **branch} if isinstance(branch, Mapping) else branch
            problems = self.check(candidate, w, _pointer(path, union, i))
            if not problems:
                return []
            if first is None and isinstance(candidate, Mapping) and \
                    _types(candidate) & _types(w):
                first = problems
        return first or [f"{_at(path)}: the writer's schema matches no branch of the "
                         f"reader's {union}"]

    def _keywords(self, r: Mapping[str, Any], w: Mapping[str, Any], path: str) -> list[str]:
        problems: list[str] = []
        r_types, w_types = _types(r), _types(w)
        narrowed = sorted(t for t in w_types if not _accepts_type(r_types, t))
        if narrowed:
            problems.append(f"{_at(path)}: type narrowed: the reader does not accept "
                            f"{', '.join(narrowed)}")
        problems += self._values(r, w, path)
        live = {t for t in w_types if _accepts_type(r_types, t)}
        if "integer" in live:
            live.add("number")
        for t in sorted(live & {"string", "number", "object", "array"}):
            problems += self._bounds(r, w, path, t)
        if "string" in live:
            for keyword in ("pattern", "format"):
                if keyword in r and r[keyword] != w.get(keyword):
                    problems.append(f"{_at(path)}: {keyword} {'changed' if keyword in w else 'added'}"
                                    f" by the reader ({w.get(keyword)!r} -> {r[keyword]!r})")
        if "number" in live and "multipleOf" in r:
            problems += self._multiple_of(r, w, path)
        if "object" in live:
            problems += self._object(r, w, path)
        if "array" in live:
            problems += self._array(r, w, path)
        for keyword in UNMODELLED:
            if keyword in r and r[keyword] != w.get(keyword):
                problems.append(f"{_at(path)}: {keyword} added or changed by the reader "
                                f"(not modelled: cannot be shown compatible)")
        return problems

    def _values(self, r: Mapping[str, Any], w: Mapping[str, Any], path: str) -> list[str]:
        allowed = ([r["const"]] if "const" in r
                   else r["enum"] if isinstance(r.get("enum"), list) else None)
        if allowed is None:
            return []
        written = ([w["const"]] if "const" in w
                   else w["enum"] if isinstance(w.get("enum"), list) else None)
        keyword = "const" if "const" in r else "enum"
        if written is None:
            return [f"{_at(path)}: {keyword} added by the reader (the writer's values are "
                    f"not restricted)"]
        missing = [v for v in written if not any(_json_equal(v, a) for a in allowed)]
        if missing:
            return [f"{_at(path)}: {keyword} narrowed: the reader does not accept "
                    f"{', '.join(map(repr, missing))}"]
        return []

    def _bounds(self, r: Mapping[str, Any], w: Mapping[str, Any], path: str,
                t: str) -> list[str]:
        problems: list[str] = []
        for keywords, tighter in ((UPPER_BOUNDS[t], lambda a, b: a < b),
                                  (LOWER_BOUNDS[t], lambda a, b: a > b)):
            for keyword in keywords:
                bound = r.get(keyword)
                if not _number(bound):
                    continue
                old = w.get(keyword)
                if not _number(old):
                    problems.append(f"{_at(path)}: {keyword} added by the reader ({bound})")
                elif tighter(bound, old):
                    problems.append(f"{_at(path)}: {keyword} tightened by the reader "
                                    f"({old} -> {bound})")
        return problems

    def _multiple_of(self, r: Mapping[str, Any], w: Mapping[str, Any], path: str) -> list[str]:
        new, old = r["multipleOf"], w.get("multipleOf")
        if _number(new) and _number(old) and old != 0 and \
                math.isclose(old / new, round(old / new)):
            return []
        return [f"{_at(path)}: multipleOf {'changed' if old is not None else 'added'} by the "
                f"reader ({old} -> {new})"]

    def _object(self, r: Mapping[str, Any], w: Mapping[str, Any], path: str) -> list[str]:
        problems: list[str] = []
        r_props: Mapping[str, Any] = r.get("properties") or {}
        w_props: Mapping[str, Any] = w.get("properties") or {}
        r_patterns: Mapping[str, Any] = r.get("patternProperties") or {}
        w_patterns: Mapping[str, Any] = w.get("patternProperties") or {}
        r_extra = r.get("additionalProperties", True)
        w_extra = w.get("additionalProperties", True)
        for name, w_schema in w_props.items():
            where = _pointer(path, "properties", name)
            if name in r_props:
                problems += self.check(r_props[name], w_schema, where)
                continue
            matching = [p for p in r_patterns if _search(p, name)]
            if matching:
                for p in matching:
                    problems += self.check(r_patterns[p], w_schema,
                                           _pointer(path, "patternProperties", p))
            elif r_extra is False:
                problems.append(f"{where}: property {name!r} removed from a closed content "
                                f"model (the reader rejects it; the writer may write it)")
            else:
                problems += self.check(r_extra, w_schema, _pointer(path, "additionalProperties"))
        for name, r_schema in r_props.items():
            if name in w_props:
                continue
            where = _pointer(path, "properties", name)
            matching = [p for p in w_patterns if _search(p, name)]
            written = [w_patterns[p] for p in matching] or [w_extra]
            for w_schema in written:
                if w_schema is not False and not _trivial(r_schema) and _trivial(w_schema):
                    problems.append(f"{where}: property {name!r} added to an open content "
                                    f"model (the writer may write it with any value)")
                else:
                    problems += self.check(r_schema, w_schema, where)
        for pattern, w_schema in w_patterns.items():
            where = _pointer(path, "patternProperties", pattern)
            if pattern in r_patterns:
                problems += self.check(r_patterns[pattern], w_schema, where)
            elif r_extra is False:
                problems.append(f"{where}: pattern property {pattern!r} removed from a "
                                f"closed content model")
            else:
                problems += self.check(r_extra, w_schema, _pointer(path, "additionalProperties"))
        for pattern, r_schema in r_patterns.items():
            if pattern not in w_patterns and w_extra is not False:
                problems += self.check(r_schema, w_extra, _pointer(path, "patternProperties",
                                                                   pattern))
        if w_extra is not False:
            if r_extra is False:
                problems.append(f"{_pointer(path, 'additionalProperties')}: the reader closes "
                                f"the content model the writer leaves open")
            elif not _trivial(r_extra):
                problems += self.check(r_extra, w_extra, _pointer(path, "additionalProperties"))
        required = set(w.get("required") or ())
        for name in r.get("required") or ():
            if name not in required:
                problems.append(f"{_pointer(path, 'required')}: property {name!r} is required "
                                f"by the reader and not by the writer")
        return problems

    def _array(self, r: Mapping[str, Any], w: Mapping[str, Any], path: str) -> list[str]:
        problems: list[str] = []
        r_items, w_items = r.get("items", True), w.get("items", True)
        r_more, w_more = r.get("additionalItems", True), w.get("additionalItems", True)
        if isinstance(r_items, list) or isinstance(w_items, list):
            r_tuple = r_items if isinstance(r_items, list) else []
            w_tuple = w_items if isinstance(w_items, list) else []
            r_rest = r_more if isinstance(r_items, list) else r_items
            w_rest = w_more if isinstance(w_items, list) else w_items
            for i in range(max(len(r_tuple), len(w_tuple))):
                problems += self.check(r_tuple[i] if i < len(r_tuple) else r_rest,
                                       w_tuple[i] if i < len(w_tuple) else w_rest,
                                       _pointer(path, "items", i))
            problems += self.check(r_rest, w_rest, _pointer(path, "additionalItems"))
        else:
            problems += self.check(r_items, w_items, _pointer(path, "items"))
        if r.get("uniqueItems") is True and w.get("uniqueItems") is not True:
            problems.append(f"{_at(path)}: uniqueItems added by the reader")
        return problems


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, Sequence) and not isinstance(a, str):
        return (isinstance(b, Sequence) and not isinstance(b, str) and len(a) == len(b)
                and all(_json_equal(x, y) for x, y in zip(a, b)))
    return bool(a == b)


def _search(pattern: str, name: str) -> bool:
    try:
        return re.search(pattern, name) is not None
    except re.error:
        return False
