"""Codecs: wire formats Java/librdkafka read, round trips, corrupt input, compression bombs."""

from __future__ import annotations

import gzip
import os
import struct
import time
import tracemalloc

import cramjam
import pytest

from millrace.common.errors import CorruptBatchError, DecompressionLimitError
from millrace.record.compression import (
    DEFAULT_MAX_DECOMPRESSED,
    CompressionType,
    compress,
    decompress,
    repair_legacy_lz4_header,
    xxh32,
)

CODECS = list(CompressionType)
COMPRESSED = [c for c in CompressionType if c != CompressionType.NONE]
XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
MIB = 1 << 20

PAYLOADS = {
    "empty": b"",
    "one": b"x",
    "text": b"the quick brown fox jumps over the lazy dog " * 50,
    # spans several 32 KiB xerial blocks and 64 KiB lz4 blocks, half incompressible
    "mixed": os.urandom(70_000) + bytes(130_000),
}


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
@pytest.mark.parametrize("name", PAYLOADS)
def test_round_trip(codec: CompressionType, name: str) -> None:
    data = PAYLOADS[name]
    packed = compress(codec, data)
    assert decompress(codec, packed) == data
    assert decompress(codec, memoryview(bytearray(packed))) == data
    assert decompress(codec, packed, max_size=len(data)) == data  # the cap is inclusive


@pytest.mark.parametrize("codec", COMPRESSED, ids=lambda c: c.name)
def test_compress_accepts_memoryview_slices(codec: CompressionType) -> None:
    buf = bytearray(b"header" + b"abc" * 1000)
    with memoryview(buf) as view:
        packed = compress(codec, view[6:])
    assert decompress(codec, packed) == b"abc" * 1000
    buf += b"still resizable"  # no buffer export left behind


def test_from_name() -> None:
    assert CompressionType.from_name("none") is CompressionType.NONE
    assert CompressionType.from_name("gzip") is CompressionType.GZIP
    assert CompressionType.from_name("snappy") is CompressionType.SNAPPY
    assert CompressionType.from_name("lz4") is CompressionType.LZ4
    assert CompressionType.from_name("ZSTD") is CompressionType.ZSTD
    with pytest.raises(ValueError, match="'brotli'"):
        CompressionType.from_name("brotli")
    with pytest.raises(CorruptBatchError, match="codec id 5"):
        CompressionType.from_id(5)


def test_gzip_is_a_real_gzip_stream() -> None:
    packed = compress(CompressionType.GZIP, b"hello" * 100)
    assert packed[:2] == b"\x1f\x8b"
    assert gzip.decompress(packed) == b"hello" * 100


def test_snappy_writes_xerial_framing_in_32k_blocks() -> None:
    data = os.urandom(40_000)
    packed = compress(CompressionType.SNAPPY, data)
    assert packed[:16] == XERIAL_HEADER
    (first,) = struct.unpack_from(">i", packed, 16)
    block = packed[20 : 20 + first]
    assert bytes(cramjam.snappy.decompress_raw(block)) == data[:32768]
    (second,) = struct.unpack_from(">i", packed, 20 + first)
    assert 24 + first + second == len(packed)
    assert compress(CompressionType.SNAPPY, b"") == XERIAL_HEADER


def test_snappy_reads_raw_blocks_like_librdkafka_writes() -> None:
    data = b"raw snappy from librdkafka " * 100
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert decompress(CompressionType.SNAPPY, raw) == data


def test_snappy_reads_concatenated_xerial_streams() -> None:
    packed = compress(CompressionType.SNAPPY, b"one") + compress(CompressionType.SNAPPY, b"two")
    assert decompress(CompressionType.SNAPPY, packed) == b"onetwo"


def test_lz4_writes_frames_with_independent_blocks() -> None:
    packed = compress(CompressionType.LZ4, b"abc" * 50_000)
    assert packed[:4] == b"\x04\x22\x4d\x18"
    flg, bd = packed[4], packed[5]
    assert flg >> 6 == 1  # version 01
    assert flg & 0x20  # block independence (Java rejects linked blocks)
    assert bd == 0x40  # 64 KiB blocks, as Java writes
    lz4_frame = pytest.importorskip("lz4.frame")
    assert lz4_frame.decompress(packed) == b"abc" * 50_000


def test_zstd_writes_a_standard_frame() -> None:
    packed = compress(CompressionType.ZSTD, b"zstd " * 1000)
    zstandard = pytest.importorskip("zstandard")
    assert zstandard.ZstdDecompressor().decompressobj().decompress(packed) == b"zstd " * 1000


@pytest.mark.parametrize("codec", COMPRESSED, ids=lambda c: c.name)
def test_corrupt_input_names_the_codec(codec: CompressionType) -> None:
    packed = compress(codec, PAYLOADS["text"])
    for bad in (b"", b"\x00" * 40, packed[: len(packed) // 2], b"junk" + packed):
        with pytest.raises(CorruptBatchError, match=codec.name.lower()):
            decompress(codec, bad)


def test_corrupt_xerial_block_length() -> None:
    packed = bytearray(compress(CompressionType.SNAPPY, b"data" * 100))
    struct.pack_into(">i", packed, 16, 1 << 30)
    with pytest.raises(CorruptBatchError, match="claims"):
        decompress(CompressionType.SNAPPY, packed)
    with pytest.raises(CorruptBatchError, match="truncated"):
        decompress(CompressionType.SNAPPY, XERIAL_HEADER + b"\x00\x00")


def test_negative_cap_is_a_caller_error() -> None:
    with pytest.raises(ValueError):
        decompress(CompressionType.GZIP, b"", max_size=-1)


def test_none_codec_respects_the_cap() -> None:
    assert decompress(CompressionType.NONE, b"abc") == b"abc"
    with pytest.raises(DecompressionLimitError):
        decompress(CompressionType.NONE, b"abcd", max_size=3)


def test_default_cap() -> None:
    assert DEFAULT_MAX_DECOMPRESSED == 64 * MIB


# ------------------------------------------------------------------ compression bombs
BOMB = 200 * MIB


def _stream(compressor: object, chunk: bytes, times: int) -> bytes:
    for _ in range(times):
        compressor.compress(chunk)  # type: ignore[attr-defined]
    return bytes(compressor.finish())  # type: ignore[attr-defined]


def _bombs() -> dict[str, tuple[CompressionType, bytes]]:
    chunk = bytes(MIB)
    gz = _stream(cramjam.gzip.Compressor(level=1), chunk, BOMB // MIB)
    lying_gz = gz[:-4] + struct.pack("<I", 10)  # ISIZE claims 10 bytes
    lz4_frame = _stream(
        cramjam.lz4.Compressor(block_linked=False, content_checksum=False), chunk, BOMB // MIB
    )  # no content size in the header
    zstd_stream = _stream(cramjam.zstd.Compressor(), chunk, BOMB // MIB)  # no content size
    block = bytes(cramjam.snappy.compress_raw(bytes(32 * 1024)))
    xerial = XERIAL_HEADER + (struct.pack(">i", len(block)) + block) * (BOMB // (32 * 1024))
    return {
        "gzip": (CompressionType.GZIP, gz),
        "gzip-lying-isize": (CompressionType.GZIP, lying_gz),
        "lz4": (CompressionType.LZ4, lz4_frame),
        "lz4-content-size": (CompressionType.LZ4, bytes(cramjam.lz4.compress(bytes(BOMB)))),
        "zstd": (CompressionType.ZSTD, zstd_stream),
        "zstd-content-size": (CompressionType.ZSTD, bytes(cramjam.zstd.compress(bytes(BOMB)))),
        "snappy-raw": (CompressionType.SNAPPY, bytes(cramjam.snappy.compress_raw(bytes(BOMB)))),
        "snappy-xerial": (CompressionType.SNAPPY, xerial),
    }


@pytest.fixture(scope="module")
def bombs() -> dict[str, tuple[CompressionType, bytes]]:
    return _bombs()


BOMB_NAMES = ["gzip", "gzip-lying-isize", "lz4", "lz4-content-size", "zstd",
              "zstd-content-size", "snappy-raw", "snappy-xerial"]


@pytest.mark.parametrize("name", BOMB_NAMES)
def test_compression_bomb_is_refused_quickly_with_little_memory(
    bombs: dict[str, tuple[CompressionType, bytes]], name: str
) -> None:
    codec, packed = bombs[name]
    assert len(packed) < 12 * MIB
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(DecompressionLimitError, match=f"{codec.name.lower()}.*{MIB}"):
            decompress(codec, packed, max_size=MIB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - started < 1.0
    assert peak < 4 * MIB, f"peak Python allocation {peak} bytes"


@pytest.mark.parametrize("codec", COMPRESSED, ids=lambda c: c.name)
def test_output_just_over_the_cap_is_refused(codec: CompressionType) -> None:
    data = os.urandom(1000) * 100
    packed = compress(codec, data)
    assert decompress(codec, packed, max_size=len(data)) == data
    with pytest.raises(DecompressionLimitError):
        decompress(codec, packed, max_size=len(data) - 1)


def test_growth_path_without_size_hint_returns_everything() -> None:
    data = bytes(range(256)) * 4000  # ~1 MB, far past the first guessed buffer
    packed = _stream(cramjam.zstd.Compressor(), data, 1)
    assert decompress(CompressionType.ZSTD, packed) == data


# ------------------------------------------------------------------ legacy lz4 / xxh32
def test_xxh32_known_values() -> None:
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"a" * 100) == xxh32(b"a" * 100)
    for _ in range(20):  # agrees with the header checksum LZ4 itself writes
        frame = compress(CompressionType.LZ4, os.urandom(10))
        assert frame[6] == (xxh32(frame[4:6]) >> 8) & 0xFF


def test_xxh32_long_inputs_against_lz4_content_checksum() -> None:
    for size in (15, 16, 17, 31, 32, 33, 1000):
        data = os.urandom(size)
        compressor = cramjam.lz4.Compressor(content_checksum=True, block_linked=False)
        compressor.compress(data)
        frame = bytes(compressor.finish())
        assert xxh32(data) == int.from_bytes(frame[-4:], "little")  # content checksum
    lz4_frame = pytest.importorskip("lz4.frame")
    frame = lz4_frame.compress(b"x" * 100, store_size=True)
    assert frame[4] & 0x08  # content size present: a 10-byte descriptor
    assert frame[14] == (xxh32(frame[4:14]) >> 8) & 0xFF


def test_repair_legacy_lz4_header() -> None:
    frame = compress(CompressionType.LZ4, b"old kafka" * 10)
    broken = bytearray(frame)
    broken[6] = (xxh32(frame[0:6]) >> 8) & 0xFF  # KAFKA-3160: checksum over the magic too
    assert broken[6] != frame[6]
    with pytest.raises(CorruptBatchError):
        decompress(CompressionType.LZ4, bytes(broken))
    assert repair_legacy_lz4_header(broken) == frame
    assert repair_legacy_lz4_header(frame) == frame
    assert repair_legacy_lz4_header(b"short") == b"short"
