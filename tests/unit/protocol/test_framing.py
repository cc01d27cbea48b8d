"""FrameDecoder: size-prefixed frames out of an arbitrary chunking of the byte stream."""

from __future__ import annotations

import random
import struct
import tracemalloc

import pytest

from millrace.common.errors import FrameTooLargeError, ProtocolDecodeError
from millrace.protocol import NEED_DATA, FrameDecoder
from millrace.protocol.framing import DEFAULT_MAX_FRAME, frame

PAYLOADS = [b"", b"a", b"hello world", bytes(range(256)) * 3, b"\x00\x00\x00\x05"]


def drain(decoder: FrameDecoder) -> list[bytes]:
    frames = []
    while (f := decoder.next_frame()) is not NEED_DATA:
        assert isinstance(f, bytes)
        frames.append(f)
    return frames


def test_frame_helper_prefixes_the_size() -> None:
    assert frame(b"abc") == b"\x00\x00\x00\x03abc"
    assert frame(b"") == b"\x00\x00\x00\x00"


def test_empty_decoder_needs_data() -> None:
    d = FrameDecoder()
    assert d.next_frame() is NEED_DATA
    assert repr(NEED_DATA) == "NEED_DATA"
    assert d.max_frame_size == DEFAULT_MAX_FRAME == 100 * 1024 * 1024


@pytest.mark.parametrize("payload", PAYLOADS)
def test_whole_frame(payload: bytes) -> None:
    d = FrameDecoder()
    d.receive_data(frame(payload))
    assert d.next_frame() == payload
    assert d.next_frame() is NEED_DATA
    assert d.buffered == 0


@pytest.mark.parametrize("payload", PAYLOADS)
def test_one_byte_at_a_time(payload: bytes) -> None:
    d = FrameDecoder()
    data = frame(payload)
    for i, byte in enumerate(data):
        assert d.next_frame() is NEED_DATA, f"frame handed out after {i} bytes"
        d.receive_data(bytes([byte]))
    assert d.next_frame() == payload
    assert d.next_frame() is NEED_DATA


def test_several_frames_in_one_chunk_and_a_partial_tail() -> None:
    d = FrameDecoder()
    stream = b"".join(frame(p) for p in PAYLOADS)
    d.receive_data(stream + frame(b"tail")[:6])
    assert drain(d) == PAYLOADS
    assert d.next_frame() is NEED_DATA
    d.receive_data(frame(b"tail")[6:])
    assert drain(d) == [b"tail"]


def test_random_chunking_preserves_frames() -> None:
    rng = random.Random(7)
    payloads = [bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 300)))
                for _ in range(50)]
    stream = b"".join(frame(p) for p in payloads)
    for _ in range(20):
        d = FrameDecoder()
        got: list[bytes] = []
        pos = 0
        while pos < len(stream):
            step = rng.randint(1, 64)
            d.receive_data(memoryview(stream)[pos:pos + step])
            pos += step
            got += drain(d)
        assert got == payloads


def test_accepts_bytearray_and_memoryview() -> None:
    d = FrameDecoder()
    d.receive_data(bytearray(frame(b"x")))
    d.receive_data(memoryview(frame(b"yz")))
    assert drain(d) == [b"x", b"yz"]


def test_frame_at_the_maximum_is_accepted() -> None:
    d = FrameDecoder(max_frame_size=10)
    d.receive_data(frame(b"0123456789"))
    assert d.next_frame() == b"0123456789"


def test_size_over_the_maximum_fails_on_the_prefix_alone() -> None:
    d = FrameDecoder(max_frame_size=1000)
    d.receive_data(struct.pack(">i", 1001))  # just the 4 prefix bytes, no body
    with pytest.raises(FrameTooLargeError, match="1001 bytes exceeds the maximum of 1000"):
        d.next_frame()
    # The decoder stays broken: the stream cannot be resynchronised.
    with pytest.raises(FrameTooLargeError):
        d.next_frame()
    with pytest.raises(FrameTooLargeError):
        d.receive_data(b"more")


def test_hostile_2gib_prefix_allocates_nothing() -> None:
    d = FrameDecoder()
    tracemalloc.start()
    try:
        d.receive_data(b"\x7f\xff\xff\xff")
        with pytest.raises(FrameTooLargeError):
            d.next_frame()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024


def test_prefix_arriving_in_pieces_is_checked_once_complete() -> None:
    d = FrameDecoder(max_frame_size=100)
    d.receive_data(b"\x00\x00")
    assert d.next_frame() is NEED_DATA
    d.receive_data(b"\x01\x00")  # 256
    with pytest.raises(FrameTooLargeError):
        d.next_frame()


@pytest.mark.parametrize("size", [-1, -(2**31)])
def test_negative_prefix_is_refused(size: int) -> None:
    d = FrameDecoder()
    d.receive_data(struct.pack(">i", size))
    with pytest.raises(ProtocolDecodeError, match="negative") as info:
        d.next_frame()
    assert not isinstance(info.value, FrameTooLargeError)
    with pytest.raises(ProtocolDecodeError):
        d.next_frame()


def test_frame_too_large_is_a_protocol_decode_error() -> None:
    assert issubclass(FrameTooLargeError, ProtocolDecodeError)
