"""Random message values generated from the declarations (shared by the protocol tests).

``random_message(codec, version, rng)`` walks the ``Field`` tree of a message at one
version and fills every field present in that version with a random value of its type:
integers across their whole range (edges included), strings with non-ASCII text, None
where the field is nullable in that version, arrays of 0-3 elements, tagged fields only
some of the time, random UUIDs and opaque ``records`` bytes.  Fields absent in the
version keep their defaults, so ``decode(encode(x)) == x`` is the exact expectation.

``samples(codec, version, seed, n)`` yields the all-defaults value followed by ``n``
random ones from a seeded generator, so failures are reproducible.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from typing import Any

from millrace.protocol import API
from millrace.protocol.codec import MessageCodec
from millrace.protocol.schema import Field, Message
from millrace.protocol.struct import Struct

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
}

TEXTS = ("", "a", "topic-1", "grüße", "日本語のトピック", "emoji 🚀 ok", "x" * 130, "\u0000nul")


def all_messages() -> list[tuple[MessageCodec, int]]:
    """Every (codec, version) pair: requests and responses of every API."""
    out: list[tuple[MessageCodec, int]] = []
    for api in API.values():
        for codec in (api.request, api.response):
            m = codec.message
            out.extend((codec, v) for v in range(m.versions.low, m.versions.high + 1))
    return out


def message_id(codec: MessageCodec, version: int) -> str:
    return f"{codec.message.name}-v{version}"


def _int(rng: random.Random, t: str) -> int:
    lo, hi = INT_RANGES[t]
    r = rng.random()
    if r < 0.15:
        return lo
    if r < 0.3:
        return hi
    if r < 0.5:
        return rng.choice((-1, 0, 1)) if lo < 0 else rng.choice((0, 1))
    return rng.randint(lo, hi)


def random_scalar(t: str, rng: random.Random) -> Any:
    if t in INT_RANGES:
        return _int(rng, t)
    if t == "bool":
        return rng.random() < 0.5
    if t == "float64":
        return rng.choice((0.0, -1.5, 3.25, 1e300, -2.0**-1074))
    if t == "string":
        if rng.random() < 0.5:
            return rng.choice(TEXTS)
        return "".join(chr(rng.choice((rng.randint(32, 126), rng.randint(0xA0, 0xD7FF),
                                       rng.randint(0x10000, 0x10FFFF))))
                       for _ in range(rng.randint(0, 12)))
    if t in ("bytes", "records"):
        return bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 40)))
    if t == "uuid":
        return uuid.UUID(int=rng.getrandbits(128))
    raise AssertionError(f"unknown type {t}")


def random_struct(cls: type[Struct], fields: tuple[Field, ...], version: int, flexible: bool,
                  rng: random.Random) -> Struct:
    obj = cls()
    for f in fields:
        if not f.present_in(version):
            continue
        if flexible and f.tagged_in(version) and rng.random() < 0.4:
            continue  # leave the tagged field unset (default): takes no space on the wire
        setattr(obj, f.name, random_field(cls, f, version, flexible, rng))
    return obj


def random_field(parent: type[Struct], f: Field, version: int, flexible: bool,
                 rng: random.Random) -> Any:
    if version in f.nullable and rng.random() < 0.2:
        return None
    if f.is_array:
        n = rng.randint(0, 3)
        if f.is_struct:
            sub = getattr(parent, f.element_type)
            return [random_struct(sub, f.fields, version, flexible, rng) for _ in range(n)]
        return [random_scalar(f.element_type, rng) for _ in range(n)]
    if f.is_struct:
        return random_struct(getattr(parent, f.element_type), f.fields, version, flexible, rng)
    return random_scalar(f.type, rng)


def random_message(codec: MessageCodec, version: int, rng: random.Random) -> Struct:
    m: Message = codec.message
    return random_struct(codec.cls, m.fields, version, m.is_flexible(version), rng)


def samples(codec: MessageCodec, version: int, seed: int, n: int) -> Iterator[Struct]:
    yield codec.cls()
    rng = random.Random(f"{codec.message.name}/{version}/{seed}")
    for _ in range(n):
        yield random_message(codec, version, rng)


def present_values(obj: Any, fields: tuple[Field, ...], version: int) -> dict[str, Any]:
    """``obj`` as nested dicts holding only the fields present in ``version``."""
    out: dict[str, Any] = {}
    for f in fields:
        if not f.present_in(version):
            continue
        value = getattr(obj, f.name)
        if f.is_struct and value is not None:
            if f.is_array:
                value = [present_values(x, f.fields, version) for x in value]
            else:
                value = present_values(value, f.fields, version)
        out[f.name] = value
    return out
