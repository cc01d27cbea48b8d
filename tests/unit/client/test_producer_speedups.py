"""The producer's C cores (``_internals/_speedups.c``) against their pure-Python references.

``BatchCore.try_append`` must leave the same bytes, fields and futures as
``PyBatchCore.try_append`` for any sequence of appends (full batches, oversized first
records, headers, callbacks, odd timestamps), and raise the same errors; ``RecordCore``
(ProducerRecord's fields) must check and store exactly what ``PyRecordCore`` does.
Hypothesis drives the appends.  Skipped parts name what is missing; where a compiler is
available the extension must be built.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from millrace.client.producer import ProducerRecord
from millrace.client.producer._internals import batch_core
from millrace.client.producer._internals.batch_core import PyBatchCore, PyFutureCore
from millrace.client.producer._internals.future_record_metadata import FutureRecordMetadata
from millrace.client.producer.producer_record import PyRecordCore
from tests.unit.speedups_env import compiler_available, run_without_speedups, speedups_disabled

try:
    from millrace.client.producer._internals import _speedups
except ImportError:
    _speedups = None  # type: ignore[assignment]

needs_c = pytest.mark.skipif(_speedups is None, reason="C accelerator not built")


def test_the_extension_is_built_where_it_can_be() -> None:
    if speedups_disabled():
        assert not batch_core.SPEEDUPS
        return
    if compiler_available():
        assert _speedups is not None, "producer C accelerator not built: run pip install -e ."
        assert batch_core.SPEEDUPS
        assert issubclass(FutureRecordMetadata, _speedups.FutureCore)
        assert issubclass(ProducerRecord, _speedups.RecordCore)


def test_environment_variable_forces_the_python_cores() -> None:
    code = ("from millrace.client.producer._internals import batch_core as b; "
            "from millrace.client.producer import ProducerRecord as R; "
            "print(b.SPEEDUPS, R.__mro__[1].__name__)")
    assert run_without_speedups(code).split() == ["False", "PyRecordCore"]


# ---------------------------------------------------------------------------- BatchCore
class _PyFuture(PyFutureCore):
    __slots__ = ()


class _PyBatch(PyBatchCore):
    __slots__ = ()
    _future_type = _PyFuture


def _c_batch(limit: int, result: Any = "result") -> Any:
    assert _speedups is not None
    return _speedups.BatchCore(bytearray(61), limit, result)


def _state(batch: Any) -> tuple[Any, ...]:
    return (bytes(batch._buf), batch._base_timestamp, batch._max_timestamp,
            batch._write_limit, batch.record_count, batch.last_record_size, batch.full,
            batch.produce_future, [_future(f) for f in batch._thunks])


def _future(f: Any) -> tuple[Any, ...] | None:
    if f is None:
        return None
    return (f._result, f._index, f._timestamp, f._key_size, f._value_size, f._callback)


def _outcome(fn: Any, *args: Any) -> tuple[str, Any]:
    try:
        return "ok", _future(fn(*args))
    except Exception as e:  # the same type and message on both sides
        return type(e).__name__, str(e)


blob = st.one_of(st.none(), st.binary(max_size=300))
header = st.tuples(st.text(max_size=8), blob)
append = st.tuples(
    st.one_of(st.integers(0, 2**41), st.integers(-2**64, 2**64)),  # timestamp
    blob, blob,
    st.lists(header, max_size=3),
    st.sampled_from([None, print]),  # a callback or none
)


@needs_c
@settings(max_examples=300, deadline=None)
@given(limit=st.integers(61, 2000), appends=st.lists(append, max_size=25))
def test_try_append_matches_the_reference(limit: int, appends: list[Any]) -> None:
    py, c = _PyBatch(bytearray(61), limit, "result"), _c_batch(limit)
    for timestamp, key, value, headers, callback in appends:
        args = (timestamp, key, value, headers, callback, 0)
        assert _outcome(c.try_append, *args) == _outcome(py.try_append, *args)
        assert _state(c) == _state(py)


@needs_c
def test_try_append_rejects_what_the_reference_rejects() -> None:
    cases: list[tuple[Any, ...]] = [
        (-1, None, b"v", (), None, 0),          # a negative first timestamp
        (1.5, None, b"v", (), None, 0),         # not an int
        (2**70, None, b"v", (), None, 0),       # past int64
        (0, "text", b"v", (), None, 0),         # a str key: not bytes-like
        (0, None, b"v", [("k",)], None, 0),     # a malformed header
        (0, None, b"v", [(b"k", b"v")], None, 0),  # a bytes header key
    ]
    for args in cases:
        py, c = _PyBatch(bytearray(61), 1000, "r"), _c_batch(1000, "r")
        expected = _outcome(py.try_append, *args)
        assert expected[0] != "ok", args
        assert _outcome(c.try_append, *args) == expected
        assert _state(c) == _state(py)
    # a later record whose delta leaves int64
    py, c = _PyBatch(bytearray(61), 1000, "r"), _c_batch(1000, "r")
    for batch in (py, c):
        batch.try_append(2**40, None, b"v", (), None, 0)
    args = (-(2**63), None, b"v", (), None, 0)
    assert _outcome(c.try_append, *args) == _outcome(py.try_append, *args)
    assert _outcome(c.try_append, 0, None, b"v", (), None)[0] == "TypeError"


@needs_c
def test_futures_made_by_the_c_core_are_real_futures() -> None:
    from millrace.client.cluster import TopicPartition
    from millrace.client.producer._internals.producer_batch import ProducerBatch

    batch = ProducerBatch(TopicPartition("t", 3), 0, 16384)
    seen: list[Any] = []
    future = batch.try_append(7, b"k", b"value", (), lambda m, e: seen.append((m, e)), 0)
    assert type(future) is FutureRecordMetadata
    assert batch.complete(100, -1)
    metadata = future.get(0)
    assert (metadata.topic, metadata.partition, metadata.offset, metadata.timestamp,
            metadata.serialized_key_size, metadata.serialized_value_size) == \
        ("t", 3, 100, 7, 1, 5)
    assert seen == [(metadata, None)]
    # made from Python, the same class takes the same arguments
    again = FutureRecordMetadata(batch.produce_future, 0, 7, 1, 5)
    assert again.get(0) == metadata


# ---------------------------------------------------------------------------- RecordCore
record_args = st.fixed_dictionaries({}, optional={
    "value": blob, "key": blob,
    "partition": st.one_of(st.none(), st.integers(-3, 50)),
    "timestamp": st.one_of(st.none(), st.integers(-3, 2**45), st.floats(-2, 2)),
    "headers": st.one_of(st.none(), st.lists(header, max_size=2)),
})


def _record(cls: Any, topic: Any, kwargs: dict[str, Any]) -> tuple[str, Any]:
    try:
        r = cls(topic, **kwargs)
    except Exception as e:
        return type(e).__name__, str(e)
    return "ok", tuple(getattr(r, n) for n in PyRecordCore.__slots__)


@given(topic=st.one_of(st.text(max_size=5), st.none(), st.integers()), kwargs=record_args)
def test_producer_record_matches_the_reference(topic: Any, kwargs: dict[str, Any]) -> None:
    assert _record(ProducerRecord, topic, kwargs) == _record(PyRecordCore, topic, kwargs)
    positional = [kwargs.get(n) for n in ("value", "key", "partition", "timestamp",
                                            "headers")]
    expected = _record(PyRecordCore, topic, kwargs)
    try:
        r = ProducerRecord(topic, *positional)
        got: tuple[str, Any] = ("ok", tuple(getattr(r, n) for n in PyRecordCore.__slots__))
    except Exception as e:
        got = (type(e).__name__, str(e))
    assert got == expected


def test_producer_record_argument_errors() -> None:
    with pytest.raises(TypeError):
        ProducerRecord()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        ProducerRecord("t", b"v", value=b"w")  # type: ignore[misc]
    with pytest.raises(TypeError):
        ProducerRecord("t", nope=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        ProducerRecord("t", 1, 2, 3, 4, 5, 6)  # type: ignore[call-arg]


def test_a_subclass_of_producer_record_constructs_normally() -> None:
    class Tagged(ProducerRecord[bytes, bytes]):
        __slots__ = ("tag",)

        def __init__(self, topic: str, value: bytes, tag: str) -> None:
            super().__init__(topic, value)
            self.tag = tag

    t = Tagged("t", b"v", "x")
    assert (t.topic, t.value, t.tag, t.partition) == ("t", b"v", "x", None)
    assert t == ProducerRecord("t", b"v")


def test_producer_records_pickle_and_copy() -> None:
    import copy
    import pickle

    r = ProducerRecord("t", b"v", key=b"k", partition=1, timestamp=5, headers=[("h", b"1")])
    for clone in (pickle.loads(pickle.dumps(r)), copy.copy(r), copy.deepcopy(r)):
        assert type(clone) is ProducerRecord and clone == r

    class Tagged(ProducerRecord[bytes, bytes]):
        __slots__ = ("tag",)

    t = Tagged("t", b"v")
    t.tag = "x"
    clone = copy.copy(t)  # (a local class: pickle could not find it by name)
    assert (type(clone), clone.topic, clone.value, clone.tag) == (Tagged, "t", b"v", "x")
