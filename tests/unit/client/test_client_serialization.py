"""Serializers encode exactly as Kafka's Java ones; bad input is a SerializationError."""

from __future__ import annotations

import re
import struct
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from millrace.client.errors import SerializationError
from millrace.client.serialization import (
    ByteArraySerializer,
    DoubleDeserializer,
    DoubleSerializer,
    FloatSerializer,
    FunctionSerializer,
    IntegerDeserializer,
    IntegerSerializer,
    JsonDeserializer,
    JsonSerializer,
    LongDeserializer,
    LongSerializer,
    ShortSerializer,
    StringDeserializer,
    StringSerializer,
    resolve_deserializer,
    resolve_serializer,
)
from millrace.common.errors import ConfigError


@given(st.integers(-(2**31), 2**31 - 1))
def test_integer_round_trip(n: int) -> None:
    data = IntegerSerializer().serialize("t", n)
    assert data == struct.pack(">i", n)
    assert IntegerDeserializer().deserialize("t", data) == n


@given(st.integers(-(2**63), 2**63 - 1))
def test_long_round_trip(n: int) -> None:
    data = LongSerializer().serialize("t", n)
    assert LongDeserializer().deserialize("t", data) == n


@given(st.floats(allow_nan=False))
def test_double_round_trip(x: float) -> None:
    assert DoubleDeserializer().deserialize("t", DoubleSerializer().serialize("t", x)) == x


@given(st.text())
def test_string_round_trip(s: str) -> None:
    data = StringSerializer().serialize("t", s)
    assert data == s.encode("utf-8")
    assert StringDeserializer().deserialize("t", data) == s


def test_none_stays_none() -> None:
    for serializer in (ByteArraySerializer(), StringSerializer(), IntegerSerializer(),
                       LongSerializer(), DoubleSerializer(), JsonSerializer(),
                       ShortSerializer(), FloatSerializer()):
        assert serializer.serialize("t", None) is None


def test_json_is_compact_utf8_and_round_trips() -> None:
    data = JsonSerializer().serialize("t", {"k": ["é", 1]})
    assert data == '{"k":["é",1]}'.encode()
    assert JsonDeserializer().deserialize("t", data) == {"k": ["é", 1]}


@pytest.mark.parametrize(("serializer", "value"), [
    (IntegerSerializer(), 2**31), (IntegerSerializer(), "1"), (IntegerSerializer(), True),
    (LongSerializer(), 1.5), (ShortSerializer(), 40000), (DoubleSerializer(), "x"),
    (StringSerializer(), b"x"), (ByteArraySerializer(), "x"), (JsonSerializer(), object()),
    (StringSerializer("ascii"), "é"),
])
def test_bad_input_is_a_serialization_error(serializer: Any, value: Any) -> None:
    with pytest.raises(SerializationError):
        serializer.serialize("t", value)


def test_deserializers_check_sizes() -> None:
    with pytest.raises(SerializationError, match="size of data"):
        IntegerDeserializer().deserialize("t", b"\x00\x01")


def test_function_serializer() -> None:
    assert FunctionSerializer(lambda v: bytearray(v * 2)).serialize("t", b"ab") == b"abab"
    with pytest.raises(SerializationError, match="returned a str"):
        FunctionSerializer(lambda v: "s").serialize("t", 1)
    with pytest.raises(SerializationError, match="failed"):
        FunctionSerializer(lambda v: 1 / 0).serialize("t", 1)


def test_resolution_by_name_class_instance_and_java_name() -> None:
    assert isinstance(resolve_serializer(None, "key.serializer", {}, True), ByteArraySerializer)
    assert isinstance(resolve_serializer("str", "key.serializer", {}, True), StringSerializer)
    assert isinstance(resolve_serializer(
        "org.apache.kafka.common.serialization.LongSerializer", "key.serializer", {}, True),
        LongSerializer)
    assert isinstance(resolve_serializer(JsonSerializer, "value.serializer", {}, False),
                      JsonSerializer)
    assert isinstance(resolve_serializer(
        "millrace.client.serialization:DoubleSerializer", "value.serializer", {}, False),
        DoubleSerializer)
    assert isinstance(resolve_deserializer("int", "key.deserializer", {}, True),
                      IntegerDeserializer)
    with pytest.raises(ConfigError, match=re.escape("value.serializer")):
        resolve_serializer(int, "value.serializer", {}, False)
    with pytest.raises(ConfigError, match=re.escape("key.serializer")):
        resolve_serializer("nope.Nope", "key.serializer", {}, True)


def test_string_encoding_from_config() -> None:
    serializer = resolve_serializer("str", "value.serializer",
                                    {"value.serializer.encoding": "utf-16-be"}, False)
    assert serializer.serialize("t", "a") == b"\x00a"
