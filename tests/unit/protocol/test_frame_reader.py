"""FrameReader: frames read in place into reusable buffers and handed out as views.

The same framing rules as FrameDecoder (size prefix checked before anything is allocated,
any chunking of the stream), plus what reuse must never break: a frame's view keeps its
bytes however much arrives after it, and a buffer is reused only once no view of it is
alive.
"""

from __future__ import annotations

import gc
import random
import struct
import tracemalloc

import pytest

from millrace.common.errors import FrameTooLargeError, ProtocolDecodeError
from millrace.protocol import NEED_DATA
from millrace.protocol.framing import KEEP_FREE, MIN_READ, FrameReader, _unpinned, frame


def feed(reader: FrameReader, data: bytes, step: int | None = None) -> None:
    """What a BufferedProtocol transport does: read into the lent buffer."""
    pos = 0
    while pos < len(data):
        room = reader.get_buffer(-1)
        n = min(len(room), len(data) - pos, step or len(data))
        room[:n] = data[pos:pos + n]
        room.release()
        reader.buffer_updated(n)
        pos += n


def drain(reader: FrameReader) -> list[memoryview]:
    out = []
    while (f := reader.next_frame()) is not NEED_DATA:
        assert isinstance(f, memoryview) and not f.readonly
        out.append(f)
    return out


def test_frames_from_any_chunking() -> None:
    rng = random.Random(11)
    payloads = [rng.randbytes(rng.choice([0, 1, 5, 300, 70_000, 200_000])) for _ in range(60)]
    stream = b"".join(frame(p) for p in payloads)
    for step in (1, 3, 4096, 65_536, None):
        r = FrameReader()
        got: list[bytes] = []
        pos = 0
        while pos < len(stream):
            n = step or rng.randint(1, 300_000)
            feed(r, stream[pos:pos + n])
            pos += n
            got += [bytes(f) for f in drain(r)]
        assert got == payloads, f"step {step}"
        assert r.buffered == 0


def test_receive_data_copies_in_for_plain_transports() -> None:
    r = FrameReader()
    r.receive_data(frame(b"abc") + frame(b"")[:2])
    assert [bytes(f) for f in drain(r)] == [b"abc"]
    r.receive_data(memoryview(frame(b"")[2:]))
    assert [bytes(f) for f in drain(r)] == [b""]


def test_a_held_frame_keeps_its_bytes_while_more_arrives() -> None:
    r = FrameReader()
    first = frame(b"A" * 100_000)
    feed(r, first)
    (held,) = drain(r)
    for i in range(50):  # far more than one buffer's worth, in every size
        feed(r, frame(bytes([i % 250]) * (i * 7_001)))
        drain(r)  # dropped at once: those buffers may be reused
    assert bytes(held) == b"A" * 100_000


def test_buffers_are_reused_once_released() -> None:
    r = FrameReader()
    seen: set[int] = set()
    for _ in range(200):
        feed(r, frame(b"x" * 1_000_000))
        (f,) = drain(r)
        seen.add(id(r._buf))
        assert len(f) == 1_000_000
        del f
    assert len(seen) <= KEEP_FREE + 1


def test_a_pinned_buffer_is_not_reused() -> None:
    r = FrameReader()
    held = []
    for i in range(10):
        feed(r, frame(bytes([i]) * 300_000))
        held += drain(r)
    assert [bytes(f) for f in held] == [bytes([i]) * 300_000 for i in range(10)]
    bases = {id(f.obj) for f in held}
    assert len(bases) > 1  # the reader moved on to other buffers meanwhile


def test_unpinned_probe() -> None:
    buf = bytearray(b"abc")
    view = memoryview(buf)[1:]
    assert not _unpinned(buf)
    del view
    gc.collect()
    assert _unpinned(buf) and buf == bytearray(b"abc")  # contents kept


def test_get_buffer_offers_room_for_the_whole_frame() -> None:
    r = FrameReader()
    feed(r, struct.pack(">i", 5_000_000))
    room = r.get_buffer(-1)
    assert len(room) >= 5_000_000
    room.release()


def test_size_over_the_maximum_fails_on_the_prefix_alone() -> None:
    r = FrameReader(max_frame_size=1000)
    feed(r, struct.pack(">i", 1001))
    with pytest.raises(FrameTooLargeError, match="1001 bytes exceeds the maximum of 1000"):
        r.next_frame()
    with pytest.raises(FrameTooLargeError):
        r.next_frame()
    # get_buffer never raises (asyncio would log a traceback); nothing is kept
    room = r.get_buffer(-1)
    assert len(room) == MIN_READ
    room.release()


def test_negative_prefix() -> None:
    r = FrameReader()
    feed(r, struct.pack(">i", -1))
    with pytest.raises(ProtocolDecodeError, match="negative"):
        r.next_frame()


def test_hostile_2gib_prefix_allocates_nothing() -> None:
    r = FrameReader()
    tracemalloc.start()
    try:
        feed(r, b"\x7f\xff\xff\xff")
        r.get_buffer(-1).release()  # the prefix is over the limit: no room is made for it
        with pytest.raises(FrameTooLargeError):
            r.next_frame()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 256 * 1024


def test_trim_gives_the_buffers_back_and_keeps_unread_bytes() -> None:
    r = FrameReader()
    feed(r, frame(b"y" * 2_000_000) + frame(b"partial")[:6])
    assert [len(f) for f in drain(r)] == [2_000_000]
    r.trim()
    assert len(r._buf) == 6 and not r._free
    feed(r, frame(b"partial")[6:])
    assert [bytes(f) for f in drain(r)] == [b"partial"]


def test_buffers_released_by_a_window_of_waiting_requests_are_reused() -> None:
    """Many acks=all requests wait at once, each holding its frame; as each completes, its
    buffer serves a later frame instead of a new one being allocated (and faulted in)."""
    r = FrameReader()
    window = 8
    held: list[memoryview] = []
    seen: list[bytearray] = []  # every buffer the reader read into (kept: ids stay unique)
    for i in range(100):
        feed(r, frame(bytes([i % 250]) * 300_000))
        held += drain(r)
        if not any(r._buf is b for b in seen):
            seen.append(r._buf)
        if len(held) > window:
            oldest = held.pop(0)
            assert bytes(oldest[:1]) == bytes([(i - window) % 250])
            oldest.release()
    # the window's buffers, the one being filled and the spares: nothing per request
    assert len(seen) <= window + KEEP_FREE + 2


def test_a_burst_of_released_buffers_serves_the_next_burst() -> None:
    """Reading pauses while 64 requests wait on a connection and resumes when 32 do:
    buffers come back 32 at a time, and the next 32 frames reuse them."""
    r = FrameReader()
    held: list[memoryview] = []
    seen: list[bytearray] = []
    for i in range(64 * 4):
        feed(r, frame(bytes([i % 250]) * 300_000))
        held += drain(r)
        if not any(r._buf is b for b in seen):
            seen.append(r._buf)
        if len(held) == 64:  # the queue is full: half of it is served meanwhile
            for view in held[:32]:
                view.release()
            del held[:32]
    assert len(seen) <= 64 + KEEP_FREE + 2  # the first full queue's buffers, then no more


def test_released_buffers_beyond_those_still_viewed_are_dropped() -> None:
    """After a burst ends, a connection keeps only ``KEEP_FREE`` released buffers (plus as
    many as are still viewed), not the whole burst's memory."""
    r = FrameReader()
    held: list[memoryview] = []
    for i in range(20):
        feed(r, frame(bytes([i]) * 300_000))
        held += drain(r)
    for view in held:
        view.release()
    feed(r, frame(b"x" * 300_000))  # one more frame: reclaims one, drops the excess
    assert [bytes(f[:1]) for f in drain(r)] == [b"x"]
    assert len(r._lent) + len(r._free) <= KEEP_FREE + 1
