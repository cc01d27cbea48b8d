"""The C record codec (``millrace.record._speedups``) against the pure-Python reference.

Both paths must produce identical bytes when encoding, identical objects when decoding, and
the same ``CorruptBatchError`` (same message) on hostile input -- never a crash, an overread
or another exception type.  Hypothesis drives all of it: valid records, random mutations,
truncations, wrong counts, hand-made over-long and out-of-range varints.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from millrace.common.errors import CorruptBatchError
from millrace.record import default_record
from millrace.record.default_record import (
    RECORD_FIELDS,
    Record,
    py_decode_record_run,
    py_decode_records,
    py_decode_records_as,
    py_encode_record,
)
from millrace.record.varint import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN
from tests.unit.speedups_env import compiler_available, run_without_speedups, speedups_disabled

try:
    from millrace.record import _speedups
except ImportError:
    _speedups = None  # type: ignore[assignment]


def test_the_extension_is_built_where_it_can_be() -> None:
    """With a compiler and without MILLRACE_NO_SPEEDUPS, the C codec must be in use:
    a broken build must not hide behind the fallback."""
    if speedups_disabled():
        assert not default_record.SPEEDUPS
        return
    if compiler_available():
        assert _speedups is not None, "C accelerator not built: run pip install -e ."
        assert default_record.SPEEDUPS
        assert default_record.encode_record is _speedups.encode_record


def test_environment_variable_forces_the_pure_python_codec() -> None:
    code = "from millrace.record import default_record as d; print(d.SPEEDUPS)"
    assert run_without_speedups(code).strip() == "False"


needs_c = pytest.mark.skipif(_speedups is None,
                             reason="C accelerator not built or disabled (MILLRACE_NO_SPEEDUPS)")


def _outcome(f: Any) -> tuple[str, Any]:
    """What a call did: its result, or the type and message of what it raised."""
    try:
        return "ok", f()
    except (CorruptBatchError, ValueError, TypeError, OverflowError) as e:
        return type(e).__name__, str(e)


# ------------------------------------------------------------------ strategies
int32_st = st.integers(INT32_MIN, INT32_MAX)
int64_st = st.integers(INT64_MIN, INT64_MAX)
small_or_any = st.one_of(st.integers(0, 70), st.integers(0, 20_000), int32_st)
blob_st = st.none() | st.binary(max_size=80) | st.binary(min_size=120, max_size=300)
headers_st = st.lists(st.tuples(st.text(max_size=10), st.none() | st.binary(max_size=20)),
                      max_size=4)
record_args_st = st.tuples(small_or_any, st.one_of(st.integers(-5, 20_000), int64_st),
                           blob_st, blob_st, headers_st)


def _encode(specs: list[tuple[Any, ...]]) -> bytes:
    out = bytearray()
    for spec in specs:
        py_encode_record(out, *spec)
    return bytes(out)


# ------------------------------------------------------------------ encoding
@needs_c
@given(st.lists(record_args_st, max_size=6))
def test_encode_produces_identical_bytes(specs: list[tuple[Any, ...]]) -> None:
    py_out, c_out = bytearray(b"prefix"), bytearray(b"prefix")
    for spec in specs:
        assert py_encode_record(py_out, *spec) == \
            _speedups.encode_record(c_out, *spec)
    assert py_out == c_out


@needs_c
@given(st.one_of(st.integers(INT32_MAX + 1, 1 << 70), st.integers(-(1 << 70), INT32_MIN - 1)),
       st.one_of(st.integers(INT64_MAX + 1, 1 << 80), st.integers(-(1 << 80), INT64_MIN - 1)))
def test_encode_rejects_out_of_range_deltas_alike(bad32: int, bad64: int) -> None:
    for offset_delta, ts_delta in ((bad32, 0), (0, bad64), (bad32, bad64)):
        outs: list[bytearray] = []
        results = []
        for encode in (py_encode_record, _speedups.encode_record):
            out = bytearray()
            outs.append(out)
            results.append(_outcome(lambda e=encode, o=out, d=offset_delta, t=ts_delta:
                                    e(o, d, t, None, b"v", ())))
        assert results[0] == results[1]
        assert results[0][0] == "ValueError"
        assert outs == [b"", b""]  # nothing appended


@needs_c
@pytest.mark.parametrize("headers", [[(b"bytes-key", b"v")], [("k", 5)], [("k", "str")]])
def test_encode_rejects_bad_header_types_alike(headers: Any) -> None:
    py = _outcome(lambda: py_encode_record(bytearray(), 0, 0, None, b"", headers))
    c = _outcome(lambda: _speedups.encode_record(bytearray(), 0, 0, None, b"",
                                                 headers))
    assert py[0] == c[0] == "TypeError"


# ------------------------------------------------------------------ decoding valid input
def _both(data: bytes, pos: int, end: int, count: int, base_offset: int = 0,
          base_timestamp: int = 0, append_time: int | None = None
          ) -> tuple[tuple[str, Any], tuple[str, Any]]:
    py = _outcome(lambda: py_decode_records(data, pos, end, count, base_offset,
                                            base_timestamp, append_time))
    c = _outcome(lambda: _speedups.decode_records_as(
        Record, RECORD_FIELDS, (), data, pos, end, count, base_offset, base_timestamp,
        append_time, max(count, 0))[0])
    return py, c


@needs_c
@given(st.lists(record_args_st, max_size=8), int64_st, int64_st,
       st.none() | int64_st)
def test_decode_produces_identical_records(specs: list[tuple[Any, ...]], base_offset: int,
                                           base_timestamp: int, append_time: int | None
                                           ) -> None:
    data = b"junk" + _encode(specs) + b"tail"
    py, c = _both(data, 4, len(data) - 4, len(specs), base_offset, base_timestamp,
                  append_time)
    assert py == c
    assert py[0] == "ok"
    assert [(r.key, r.value, r.headers) for r in py[1]] == \
        [(s[2], s[3], tuple(tuple(h) for h in s[4])) for s in specs]


class _Slotted:
    __slots__ = ("epoch", "headers", "key", "key_size", "offset", "partition", "timestamp",
                 "topic", "value", "value_size")


class _Plain:  # attributes in a __dict__
    pass


@needs_c
@given(st.lists(record_args_st, max_size=8),
       st.lists(st.integers(0, 4), min_size=1, max_size=10), st.sampled_from([_Slotted, _Plain]))
def test_decode_as_in_runs_matches_the_reference(specs: list[tuple[Any, ...]],
                                                 runs: list[int], cls: type) -> None:
    data = _encode(specs)
    fields = ("offset", "timestamp", "key", "value", "headers", "key_size", "value_size",
              "topic", "partition", "epoch")
    constants = ("topic-a", 3, None)
    got: dict[str, list[Any]] = {"py": [], "c": []}
    for name, decode in (("py", py_decode_records_as), ("c", _speedups.decode_records_as)):
        pos, left = 0, len(specs)
        for run in [*runs, len(specs)]:  # the last run takes the rest
            objs, pos = decode(cls, fields, constants, data, pos, len(data), left, 100, 7,
                               None, run)
            left -= len(objs)
            got[name] += [tuple(getattr(o, f) for f in fields) for o in objs]
        assert left == 0 and pos == len(data)
    assert got["py"] == got["c"]
    assert [g[5:7] for g in got["c"]] == \
        [(-1 if s[2] is None else len(s[2]), -1 if s[3] is None else len(s[3])) for s in specs]


@needs_c
def test_decoded_headers_are_immutable_tuples() -> None:
    """No container per record without headers (one shared ``()``), and a tuple of pairs
    otherwise, so records cannot alter each other's headers."""
    data = _encode([(0, 0, None, b"a", []), (1, 0, None, b"b", []),
                    (2, 0, None, b"c", [("h", b"1"), ("n", None)])])
    for decode in (_speedups.decode_records_as, py_decode_records_as):
        records, _ = decode(Record, RECORD_FIELDS, (), data, 0, len(data), 3, 0, 0, None, 3)
        assert records[0].headers == () and records[1].headers == ()
        assert records[2].headers == (("h", b"1"), ("n", None))
        assert all(type(r.headers) is tuple for r in records)


# ------------------------------------------------------------------ hostile input
@needs_c
@settings(max_examples=400)
@given(st.lists(record_args_st, min_size=1, max_size=5),
       st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=4),
       st.integers(0, 10_000), st.integers(-2, 3), st.binary(max_size=12))
def test_corrupt_input_fails_alike(specs: list[tuple[Any, ...]],
                                   mutations: list[tuple[int, int]], cut: int,
                                   count_change: int, tail: bytes) -> None:
    data = bytearray(_encode(specs))
    for where, byte in mutations:
        data[where % len(data)] = byte
    end = len(data) - cut % (len(data) + 1)  # sometimes truncated
    buf = bytes(data) + tail  # bytes past ``end`` are there but not ours
    py, c = _both(buf, 0, end, len(specs) + count_change)
    assert py == c
    assert py[0] in ("ok", "CorruptBatchError")


@needs_c
@given(st.binary(max_size=40), st.integers(-1, 6))
def test_random_bytes_fail_alike(data: bytes, count: int) -> None:
    py, c = _both(data, 0, len(data), count)
    assert py == c
    assert py[0] in ("ok", "CorruptBatchError")


def _record(length: bytes, body: bytes) -> bytes:
    return length + body


@needs_c
@pytest.mark.parametrize("data", [
    # timestamp delta as an 11-byte varlong (over-long)
    _record(b"\x1c", b"\x00" + b"\xff" * 10 + b"\x01" + b"\x00\x01\x01\x00"),
    # timestamp delta overflowing 64 bits in its 10th byte
    _record(b"\x1a", b"\x00" + b"\xff" * 9 + b"\x7f" + b"\x00\x01\x01\x00"),
    # offset delta of 5 bytes that does not fit 32 bits
    _record(b"\x14", b"\x00\x00" + b"\xff\xff\xff\xff\x7f" + b"\x01\x01\x00"),
    # offset delta of 6 bytes (over-long varint)
    _record(b"\x16", b"\x00\x00" + b"\x80" * 5 + b"\x00" + b"\x01\x01\x00"),
    # negative key length other than -1
    _record(b"\x0c", b"\x00\x00\x00\x03\x01\x00"),
    # huge header count
    _record(b"\x10", b"\x00\x00\x00\x01\x01\xfe\xff\xff\xff\x0f"),
    # header key length past the record
    _record(b"\x0e", b"\x00\x00\x00\x01\x01\x02\x7e"),
    # header key that is not UTF-8
    _record(b"\x10", b"\x00\x00\x00\x01\x01\x02\x02\xff\x01"),
    # length varint running off the end
    b"\x80",
    b"\xff\xff\xff",
    # record length claiming more than there is
    _record(b"\xfe\x01", b"\x00" * 8),
])
def test_hand_made_bad_varints_and_lengths_fail_alike(data: bytes) -> None:
    py, c = _both(data, 0, len(data), 1)
    assert py == c
    assert py[0] == "CorruptBatchError", py


@needs_c
@given(int64_st, st.integers(0, INT32_MAX))
def test_offsets_beyond_int64_are_exact(base_offset: int, delta: int) -> None:
    data = _encode([(delta, 0, None, None, [])])
    py, c = _both(data, 0, len(data), 1, base_offset=base_offset)
    assert py == c
    assert py[1][0].offset == base_offset + delta


@needs_c
def test_a_span_outside_the_buffer_is_refused_alike() -> None:
    data = _encode([(0, 0, None, b"v", [])])
    for pos, end in ((-1, len(data)), (0, len(data) + 1)):
        py = _outcome(lambda p=pos, e=end: py_decode_record_run(data, p, e, 1, 0, 0, None, 1))
        c = _outcome(lambda p=pos, e=end: _speedups.decode_records_as(
            Record, RECORD_FIELDS, (), data, p, e, 1, 0, 0, None, 1))
        assert py[0] == c[0] == "ValueError"
        assert py == c
