"""Compile message declarations into encoders and decoders.

Kafka's Java build generates a class per message from its JSON; we do the same at run
time: for each (struct, version) the first ``encode``/``decode`` call writes the Python
source of a straight-line function for exactly that version (no per-field branching on
the version at run time), compiles it once and caches it.  The generated decoders read
with precompiled ``struct`` unpackers and bounded helpers from ``primitives``; any
failure inside them surfaces as ``ProtocolDecodeError`` naming the message and version.

``encode_chunks`` supports zero-copy: a ``records`` value that is not a bytes-like object
(e.g. the broker's file-range handle) is left out of the byte stream and returned as its
own chunk, its length prefix already written, so the transport can ``sendfile`` it.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from millrace.common.errors import ProtocolDecodeError
from millrace.protocol import primitives as p
from millrace.protocol.schema import Field, Message
from millrace.protocol.struct import Struct, build_message_class

Decoder = Callable[[p.Buf, int], tuple[Any, int]]
Encoder = Callable[[Any, bytearray, list[tuple[int, Any]]], None]

_FIXED = {
    "int8": ("INT8", 1), "int16": ("INT16", 2), "int32": ("INT32", 4), "int64": ("INT64", 8),
    "uint16": ("UINT16", 2), "float64": ("FLOAT64", 8),
}
_BUFFER_TYPES = (bytes, bytearray, memoryview)


def _write_records(out: bytearray, value: Any, splices: list[tuple[int, Any]], flexible: bool,
                   nullable: bool, field: str) -> None:
    if value is None:
        if not nullable:
            raise ValueError(f"field {field!r} is not nullable in this version but is None")
        if flexible:
            out.append(0)
        else:
            out += b"\xff\xff\xff\xff"
        return
    size = len(value)
    if flexible:
        p.write_uvarint(out, size + 1)
    else:
        out += p.INT32.pack(size)
    if isinstance(value, _BUFFER_TYPES):
        out += value
    else:
        splices.append((len(out), value))


def _read_fixed_array(buf: bytes, pos: int, n: int, code: str, width: int) -> tuple[list[Any], int]:
    need = n * width
    if need > len(buf) - pos:
        raise p.short("array", need, len(buf) - pos)
    return list(struct.unpack_from(f">{n}{code}", buf, pos)), pos + need


_ARRAY_CODES = {"int8": "b", "int16": "h", "int32": "i", "int64": "q", "uint16": "H",
                "float64": "d"}


class _Compiler:
    """Generates the source of one struct's decoder and encoder at one version."""

    def __init__(self, version: int, flexible: bool) -> None:
        self.version = version
        self.flexible = flexible
        self.env: dict[str, Any] = {"p": p, "ProtocolDecodeError": ProtocolDecodeError,
                                    "_write_records": _write_records,
                                    "_read_fixed_array": _read_fixed_array}
        for name, _ in _FIXED.values():
            self.env[f"_U_{name}"] = getattr(p, name).unpack_from
            self.env[f"_P_{name}"] = getattr(p, name).pack
        self.counter = 0
        self.lines: list[str] = []

    def name(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    # ---------------------------------------------------------------- decode
    def read_value(self, f: Field, target: str, ind: str, out: list[str]) -> None:
        """Lines that read one value of ``f``'s type at ``pos`` into ``target``."""
        v, fx = self.version, self.flexible
        nullable = v in f.nullable
        t = f.type
        if f.is_array:
            n = self.name("n")
            reader = "read_compact_array_len" if fx else "read_array_len"
            out.append(f"{ind}{n}, pos = p.{reader}(buf, pos, {nullable}, {f.name!r})")
            out.append(f"{ind}if {n} < 0:")
            out.append(f"{ind}    {target} = None")
            out.append(f"{ind}else:")
            el = f.element_type
            if el in _ARRAY_CODES:
                width = _FIXED[el][1]
                out.append(f"{ind}    {target}, pos = _read_fixed_array(buf, pos, {n}, "
                           f"{_ARRAY_CODES[el]!r}, {width})")
                return
            lst = self.name("L")
            out.append(f"{ind}    {lst} = []")
            out.append(f"{ind}    for _ in range({n}):")
            elem = Field(f.name, el, f.versions, fields=f.fields)
            self.read_value(elem, "_e", ind + "        ", out)
            out.append(f"{ind}        {lst}.append(_e)")
            out.append(f"{ind}    {target} = {lst}")
            return
        if f.is_struct:
            dec = self.struct_decoder(f)
            if nullable:
                out.append(f"{ind}if _U_INT8(buf, pos)[0] < 0:")
                out.append(f"{ind}    {target} = None; pos += 1")
                out.append(f"{ind}else:")
                out.append(f"{ind}    {target}, pos = {dec}(buf, pos + 1)")
            else:
                out.append(f"{ind}{target}, pos = {dec}(buf, pos)")
            return
        if t in _FIXED:
            name, width = _FIXED[t]
            out.append(f"{ind}{target} = _U_{name}(buf, pos)[0]; pos += {width}")
        elif t == "bool":
            out.append(f"{ind}{target}, pos = p.read_bool(buf, pos)")
        elif t == "uuid":
            out.append(f"{ind}{target}, pos = p.read_uuid(buf, pos)")
        elif t == "records" and not fx:
            out.append(f"{ind}{target}, pos = p.read_records(buf, pos)")
        elif t == "records":
            out.append(f"{ind}{target}, pos = p.read_compact_records(buf, pos)")
        elif t in ("string", "bytes"):
            fn = "read_" + ("compact_" if fx else "") + ("nullable_" if nullable else "") + t
            out.append(f"{ind}{target}, pos = p.{fn}(buf, pos)")
        else:  # pragma: no cover - declarations are checked by tests
            raise TypeError(f"unknown type {t!r}")

    def struct_decoder(self, f: Field) -> str:
        """Compile a nested struct's decoder; returns its name in the environment."""
        cls = self.cls_stack[-1].__dict__[f.element_type]
        return self.compile_struct(cls, f.fields)

    cls_stack: list[type[Struct]]

    def compile_struct(self, cls: type[Struct], fields: tuple[Field, ...]) -> str:
        self.cls_stack.append(cls)
        try:
            dec_name = self.name(f"_dec_{cls.__name__}_")
            enc_name = self.name(f"_enc_{cls.__name__}_")
            self.env[f"C_{dec_name}"] = cls
            self._compile_decoder(dec_name, cls, fields)
            self._compile_encoder(enc_name, cls, fields)
            self.env.setdefault("_encoders", {})[dec_name] = enc_name
            return dec_name
        finally:
            self.cls_stack.pop()

    def _compile_decoder(self, fn: str, cls: type[Struct], fields: tuple[Field, ...]) -> None:
        v = self.version
        src = [f"def {fn}(buf, pos):", f"    o = C_{fn}.__new__(C_{fn})"]
        tagged = []
        for i, f in enumerate(fields):
            if f.tagged_in(v) and self.flexible:
                tagged.append((i, f))
                src.append(f"    o.{f.name} = C_{fn}._factories[{i}]()")
            elif f.present_in(v):
                self.read_value(f, f"o.{f.name}", "    ", src)
            else:
                src.append(f"    o.{f.name} = C_{fn}._factories[{i}]()")
        if self.flexible:
            src.append("    nt, pos = p.read_uvarint(buf, pos)")
            src.append("    for _ in range(nt):")
            src.append("        tag, s, e = p.skip_tagged_field(buf, pos)")
            for _, f in tagged:
                reader = self.value_reader(f)
                src.append(f"        if tag == {f.tag}:")
                src.append(f"            o.{f.name}, q = {reader}(bytes(buf[s:e]), 0)")
                src.append("            if q != e - s:")
                src.append(f"                raise ProtocolDecodeError('tagged field {f.name} "
                           "does not fill its declared size')")
            src.append("        pos = e")
        src.append("    return o, pos")
        exec(compile("\n".join(src), f"<decoder {cls.__name__} v{v}>", "exec"), self.env)

    def value_reader(self, f: Field) -> str:
        """A function ``(buf, pos) -> (value, pos)`` reading one value of ``f``."""
        fn = self.name(f"_tag_{f.name}_")
        src = [f"def {fn}(buf, pos):"]
        self.read_value(f, "v", "    ", src)
        src.append("    return v, pos")
        exec(compile("\n".join(src), f"<tagged {f.name} v{self.version}>", "exec"), self.env)
        return fn

    # ---------------------------------------------------------------- encode
    def write_value(self, f: Field, expr: str, ind: str, out: list[str]) -> None:
        v, fx = self.version, self.flexible
        nullable = v in f.nullable
        t = f.type
        if f.is_array:
            val = self.name("a")
            out.append(f"{ind}{val} = {expr}")
            out.append(f"{ind}if {val} is None:")
            if nullable:
                out.append(f"{ind}    out.append(0)" if fx else f"{ind}    out += b'\\xff\\xff\\xff\\xff'")
            else:
                out.append(f"{ind}    raise ValueError('array {f.name} is not nullable "
                           f"in version {v}')")
            out.append(f"{ind}else:")
            if fx:
                out.append(f"{ind}    p.write_uvarint(out, len({val}) + 1)")
            else:
                out.append(f"{ind}    out += _P_INT32(len({val}))")
            el = f.element_type
            if el in _ARRAY_CODES:
                out.append(f"{ind}    out += p.struct.pack('>%d{_ARRAY_CODES[el]}' % "
                           f"len({val}), *{val})")
                return
            item = self.name("x")
            out.append(f"{ind}    for {item} in {val}:")
            elem = Field(f.name, el, f.versions, fields=f.fields)
            self.write_value(elem, item, ind + "        ", out)
            return
        if f.is_struct:
            dec = self.struct_decoder(f)
            enc = self.env["_encoders"][dec]
            if nullable:
                out.append(f"{ind}if {expr} is None:")
                out.append(f"{ind}    out += b'\\xff'")
                out.append(f"{ind}else:")
                out.append(f"{ind}    out += b'\\x01'; {enc}({expr}, out, splices)")
            else:
                out.append(f"{ind}{enc}({expr}, out, splices)")
            return
        if t in _FIXED:
            out.append(f"{ind}out += _P_{_FIXED[t][0]}({expr})")
        elif t == "bool":
            out.append(f"{ind}out.append(1 if {expr} else 0)")
        elif t == "uuid":
            out.append(f"{ind}out += {expr}.bytes")
        elif t == "records":
            out.append(f"{ind}_write_records(out, {expr}, splices, {fx}, {nullable}, {f.name!r})")
        elif t in ("string", "bytes"):
            fn = "write_" + ("compact_" if fx else "") + ("nullable_" if nullable else "") + t
            out.append(f"{ind}p.{fn}(out, {expr}, {f.name!r})")
        else:  # pragma: no cover
            raise TypeError(f"unknown type {t!r}")

    def _compile_encoder(self, fn: str, cls: type[Struct], fields: tuple[Field, ...]) -> None:
        v = self.version
        src = [f"def {fn}(o, out, splices):"]
        tagged = []
        for i, f in enumerate(fields):
            if self.flexible and f.tagged_in(v):
                tagged.append((i, f))
            elif f.present_in(v):
                self.write_value(f, f"o.{f.name}", "    ", src)
        if self.flexible:
            if not tagged:
                src.append("    out.append(0)")
            else:
                self.env[f"C_{fn}"] = cls
                src.append("    tags = []")
                for i, f in sorted(tagged, key=lambda it: it[1].tag or 0):
                    src.append(f"    if o.{f.name} != C_{fn}._factories[{i}]():")
                    src.append("        outer = out; out = bytearray()")
                    self.write_value(f, f"o.{f.name}", "        ", src)
                    src.append(f"        tags.append(({f.tag}, out)); out = outer")
                src.append("    p.write_uvarint(out, len(tags))")
                src.append("    for tag, data in tags:")
                src.append("        p.write_uvarint(out, tag); p.write_uvarint(out, len(data)); "
                           "out += data")
        if len(src) == 1:
            src.append("    pass")
        exec(compile("\n".join(src), f"<encoder {cls.__name__} v{v}>", "exec"), self.env)


class MessageCodec:
    """Encoder/decoder of one message (all its versions) plus its value class."""

    def __init__(self, message: Message) -> None:
        self.message = message
        self.cls: type[Struct] = build_message_class(message)
        self._decoders: dict[int, Decoder] = {}
        self._encoders: dict[int, Encoder] = {}

    def _compile(self, version: int) -> None:
        m = self.message
        if version not in m.versions:
            raise ProtocolDecodeError(
                f"{m.name} has no version {version} (valid: {m.versions})")
        c = _Compiler(version, m.is_flexible(version))
        c.cls_stack = []
        dec = c.compile_struct(self.cls, m.fields)
        self._decoders[version] = c.env[dec]
        self._encoders[version] = c.env[c.env["_encoders"][dec]]

    def decode(self, buf: bytes | bytearray | memoryview, version: int, pos: int = 0,
               allow_trailing: bool = False) -> Any:
        dec = self._decoders.get(version)
        if dec is None:
            self._compile(version)
            dec = self._decoders[version]
        # bytes and memoryviews are read as they are (``records`` come out as slices of
        # ``buf``: views of a memoryview); anything else is copied once.
        data = buf if isinstance(buf, bytes | memoryview) else bytes(buf)
        try:
            obj, end = dec(data, pos)
        except ProtocolDecodeError as e:
            raise ProtocolDecodeError(f"{self.message.name} v{version}: {e}") from None
        except (struct.error, IndexError, ValueError, OverflowError) as e:
            raise ProtocolDecodeError(
                f"{self.message.name} v{version}: truncated or malformed ({e})") from None
        if end != len(data) and not allow_trailing:
            raise ProtocolDecodeError(
                f"{self.message.name} v{version}: {len(data) - end} trailing bytes")
        return obj

    def decode_prefix(self, buf: bytes, version: int, pos: int = 0) -> tuple[Any, int]:
        """Decode at ``pos`` and return ``(value, end)`` without the trailing-bytes check."""
        dec = self._decoders.get(version)
        if dec is None:
            self._compile(version)
            dec = self._decoders[version]
        try:
            return dec(buf, pos)
        except ProtocolDecodeError as e:
            raise ProtocolDecodeError(f"{self.message.name} v{version}: {e}") from None
        except (struct.error, IndexError, ValueError, OverflowError) as e:
            raise ProtocolDecodeError(
                f"{self.message.name} v{version}: truncated or malformed ({e})") from None

    def encode_into(self, obj: Any, version: int, out: bytearray,
                    splices: list[tuple[int, Any]]) -> None:
        enc = self._encoders.get(version)
        if enc is None:
            self._compile(version)
            enc = self._encoders[version]
        enc(obj, out, splices)

    def encode(self, obj: Any, version: int) -> bytes:
        out = bytearray()
        splices: list[tuple[int, Any]] = []
        self.encode_into(obj, version, out, splices)
        if splices:
            raise TypeError("records values must be bytes-like; use encode_chunks for file "
                            "regions")
        return bytes(out)


def chunks_from(out: bytearray, splices: list[tuple[int, Any]]) -> list[Any]:
    """Split an encoder's output at its splice points: [bytes, region, bytes, ...]."""
    if not splices:
        return [bytes(out)]
    parts: list[Any] = []
    start = 0
    for at, region in splices:
        parts.append(bytes(out[start:at]))
        parts.append(region)
        start = at
    parts.append(bytes(out[start:]))
    return [x for x in parts if not isinstance(x, bytes) or x]
