"""``send``'s one-call common case (``_internals/send_path.py``) against the full ``send``.

Three producers on fake clusters get the same records: one sends through the C
``SendPath``, one through the pure-Python ``PySendPath``, one through the full ``_send``
alone (the behaviour before either existed).  After every send the outcomes (future
fields or error), the batches' bytes and fields, the sticky partition, the metadata
touch and the wake-ups must be the same, and the two fast paths must give up on the same
records.  Also: ``_speedups.Lock`` behaves as ``threading.Lock``, the C ``murmur2``
equals the reference, and the producer binds the fast path only where it applies.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from millrace.client.errors import IllegalStateError
from millrace.client.producer import KafkaProducer, ProducerInterceptor, ProducerRecord
from millrace.client.producer._internals import send_path as send_path_module
from millrace.client.producer._internals.built_in_partitioner import murmur2, py_murmur2
from millrace.client.producer._internals.send_path import PySendPath
from millrace.client.producer.kafka_producer import _BATCH_AND_RECORD_OVERHEAD
from tests.unit.client.fakes import FakeCluster, make_producer, warm

try:
    from millrace.client.producer._internals import _speedups
except ImportError:
    _speedups = None  # type: ignore[assignment]

needs_c = pytest.mark.skipif(_speedups is None, reason="C accelerator not built")
TOPIC = "t"


# ---------------------------------------------------------------------------- helpers
class _Side:
    """A producer on its own fake cluster, sending through ``kind``: "c", "py" or "full"."""

    def __init__(self, kind: str, config: dict[str, Any]) -> None:
        self.producer, _, self.clock = make_producer(FakeCluster(topics={TOPIC: 3}), config)
        p = self.producer
        warm(p, TOPIC, self.clock)
        self.wakeups = 0
        self.fallbacks = 0

        def wakeup() -> None:
            self.wakeups += 1
            p._wakeup()

        def fallback(record: Any, callback: Any = None) -> Any:
            self.fallbacks += 1
            return p._send(record, callback)

        if kind == "full":
            self.send = p._send
            return
        cls = _speedups.SendPath if kind == "c" else PySendPath
        self.send = cls(ProducerRecord, p._metadata, p._accumulator, wakeup,
                        self.clock.milliseconds, p._max_record_size,
                        _BATCH_AND_RECORD_OVERHEAD, p._key_is_bytes, p._value_is_bytes,
                        p._ignore_keys, fallback)

    def seed(self) -> None:
        """The same sticky choices on every side."""
        info = self.producer._accumulator._topic_info(TOPIC)
        info.partitioner._random = random.Random(7)

    def outcome(self, record: Any, callback: Any) -> tuple[Any, ...]:
        try:
            f = self.send(record, callback)
        except Exception as e:
            return type(e).__name__, str(e)
        return ("ok", f._result.topic_partition, f._index, f._timestamp, f._key_size,
                f._value_size, f._callback)

    def state(self) -> tuple[Any, ...]:
        acc = self.producer._accumulator
        info = acc._topics.get(TOPIC)
        batches = {} if info is None else {
            p: [(bytes(b._buf), b.record_count, b.full, b.last_record_size,
                 b._base_timestamp, b._max_timestamp, b.buffer_size,
                 [f._index for f in b._thunks]) for b in dq]
            for p, dq in info.batches.items()}
        sticky = None if info is None or info.partitioner.current is None else (
            info.partitioner.current.partition, info.partitioner.current.produced_bytes)
        return (batches, sticky, len(acc._incomplete), self.producer._metadata._topics,
                self.producer.metrics(flat=True)["record-error-total"])


def _callback(metadata: Any, exception: Any) -> None:
    pass


blob = st.one_of(st.none(), st.binary(max_size=120))
send_args = st.tuples(
    st.one_of(st.none(), st.integers(0, 2)),                  # partition
    st.one_of(blob, st.just("text")),                         # key (str: not bytes)
    blob,                                                     # value
    st.one_of(st.none(), st.integers(0, 2**42), st.just(2**63)),  # timestamp
    st.sampled_from([None, [], (), [("h", b"1")]]),           # headers
    st.sampled_from([None, _callback]),
    st.integers(0, 3),                                        # ms the clock moves first
)


@needs_c
@settings(max_examples=80, deadline=None)
@given(batch_size=st.integers(80, 700), ignore_keys=st.booleans(),
       sends=st.lists(send_args, min_size=1, max_size=40))
def test_send_paths_match_the_full_send(batch_size: int, ignore_keys: bool,
                                        sends: list[Any]) -> None:
    config = {"batch.size": batch_size, "partitioner.ignore.keys": ignore_keys,
              "linger.ms": 1000}
    sides = [_Side(kind, config) for kind in ("c", "py", "full")]
    for side in sides:
        side.seed()
    for partition, key, value, timestamp, headers, callback, advance in sends:
        record = ProducerRecord(TOPIC, value, key=key, partition=partition,
                                timestamp=timestamp, headers=headers)
        outcomes = []
        for side in sides:
            side.clock.sleep(advance)
            outcomes.append(side.outcome(record, callback))
        assert outcomes[0] == outcomes[1] == outcomes[2], record
        states = [side.state() for side in sides]
        assert states[0] == states[1] == states[2]
        assert (sides[0].fallbacks, sides[0].wakeups) == (sides[1].fallbacks,
                                                          sides[1].wakeups)
    for side in sides:
        side.producer.close(0)


@needs_c
def test_the_fast_paths_take_the_common_case_and_give_up_on_the_rest() -> None:
    for kind in ("c", "py"):
        side = _Side(kind, {"batch.size": 16384, "max.block.ms": 0})
        side.send(ProducerRecord(TOPIC, b"v", partition=1))  # opens the batch: full send
        assert side.fallbacks == 1
        side.send(ProducerRecord(TOPIC, b"v", partition=1))
        side.send(ProducerRecord(TOPIC, b"v", partition=1), callback=_callback)
        side.send(ProducerRecord(TOPIC, None, partition=1, timestamp=5))
        assert side.fallbacks == 1, kind
        odd: Any
        for odd in (ProducerRecord(TOPIC, "str", partition=1),           # not bytes
                    ProducerRecord(TOPIC, b"v", partition=1, headers=[("h", b"")]),
                    ProducerRecord("other", b"v", partition=0),          # unknown topic
                    ProducerRecord(TOPIC, b"v", partition=9)):           # beyond count
            with contextlib.suppress(Exception):  # the full send's errors, or none
                side.send(odd)
        assert side.fallbacks == 5, kind
        side.send.close()
        side.send(ProducerRecord(TOPIC, b"v", partition=1))
        assert side.fallbacks == 6, kind
        side.producer.close(0)


@needs_c
def test_an_error_before_the_append_is_raised_by_the_full_send() -> None:
    for kind in ("c", "py", "full"):
        side = _Side(kind, {"batch.size": 16384})
        side.send(ProducerRecord(TOPIC, b"v", partition=0, timestamp=5))
        # try_append refuses a timestamp past int64 before it writes anything
        with pytest.raises(ValueError, match="int64"):
            side.send(ProducerRecord(TOPIC, b"v", partition=0, timestamp=2**63))
        errors = side.producer.metrics(flat=True)["record-error-total"]
        assert errors == 1, kind
        side.producer.close(0)


# ---------------------------------------------------------------------------- the producer
class _Noop(ProducerInterceptor):
    def on_send(self, record: Any) -> Any:
        return record

    def on_acknowledgement(self, metadata: Any, exception: Any) -> None:
        pass


@needs_c
def test_a_plain_producer_sends_through_the_c_path_until_closed() -> None:
    p, _, clock = make_producer(FakeCluster(topics={TOPIC: 1}))
    warm(p, TOPIC, clock)
    assert type(p.send) is _speedups.SendPath
    send = p.send
    send(ProducerRecord(TOPIC, b"a"))
    send(ProducerRecord(TOPIC, b"b"), callback=_callback)
    f = send(record=ProducerRecord(TOPIC, b"c"))  # keywords the C call does not take
    assert f._index == 2
    assert KafkaProducer.send(p, ProducerRecord(TOPIC, b"d"))._index == 3
    p.close(0)
    with pytest.raises(IllegalStateError, match="closed"):
        send(ProducerRecord(TOPIC, b"e"))


def test_the_fast_path_is_not_bound_where_it_does_not_apply() -> None:
    class Mine(KafkaProducer[bytes, bytes]):
        pass

    cluster = FakeCluster(topics={TOPIC: 1})
    for p in (make_producer(cluster, {"interceptor.classes": [_Noop]})[0],
              make_producer(cluster, {"transactional.id": "x"})[0]):
        assert p._send_path is None and "send" not in vars(p)
        p.close(0)
    if send_path_module.SendPath is None:
        return
    from millrace.common.time import MockTime
    from tests.unit.client.fakes import FakeSelector

    mine = Mine({"bootstrap.servers": "fake:9092"}, time=MockTime(),
                _selector=FakeSelector(cluster), _start_thread=False)
    assert mine._send_path is not None and "send" not in vars(mine)
    mine.close(0)


# ---------------------------------------------------------------------------- murmur2, Lock
@needs_c
@given(st.binary(max_size=64))
def test_murmur2_matches_the_reference(data: bytes) -> None:
    assert _speedups.murmur2(data) == py_murmur2(data)
    assert murmur2 is _speedups.murmur2


def _lock_outcome(fn: Any, *args: Any, **kwargs: Any) -> tuple[str, Any]:
    try:
        return "ok", fn(*args, **kwargs)
    except Exception as e:
        return type(e).__name__, str(e)


@needs_c
@pytest.mark.parametrize("call", [
    ((), {}), ((False,), {}), ((True, 0.01), {}), ((), {"timeout": 0.01}),
    ((), {"blocking": False}), ((False, 1), {}), ((True, -2), {}), ((), {"nope": 1}),
    ((True, 1e30), {}),
])
def test_lock_acquire_behaves_as_threading_lock(call: tuple[Any, dict[str, Any]]) -> None:
    args, kwargs = call
    for held in ((False,) if call == ((), {}) else (False, True)):  # (held: would wait)
        ours, theirs = _speedups.Lock(), threading.Lock()
        if held:
            ours.acquire()
            theirs.acquire()
        got = _lock_outcome(ours.acquire, *args, **kwargs)
        expected = _lock_outcome(theirs.acquire, *args, **kwargs)
        if expected[0] == "TypeError":  # the wording of argument errors differs
            assert got[0] == "TypeError"
        else:
            assert got == expected, (args, kwargs, held)
        assert ours.locked() == theirs.locked()


@needs_c
def test_lock_release_context_manager_and_waiting() -> None:
    lock = _speedups.Lock()
    with pytest.raises(RuntimeError, match="release unlocked lock"):
        lock.release()
    with lock:
        assert lock.locked()
        assert not lock.acquire(False)
    assert not lock.locked()
    lock.acquire()
    taken = threading.Event()

    def waiter() -> None:
        assert lock.acquire(timeout=10)
        taken.set()
        lock.release()

    thread = threading.Thread(target=waiter)
    thread.start()
    time.sleep(0.05)
    assert not taken.is_set()
    lock.release()
    thread.join(10)
    assert taken.is_set() and not lock.locked()
    with pytest.raises(TypeError):
        _speedups.Lock(1)  # type: ignore[call-arg]
