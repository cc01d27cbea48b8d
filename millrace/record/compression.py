"""Record-batch compression codecs: gzip, snappy, lz4 and zstd, with a bound on output size.

Java counterparts: ``org.apache.kafka.common.record.CompressionType`` and
``org.apache.kafka.common.compress.{Gzip,Snappy,Lz4,Zstd}Compression`` (plus
``Lz4BlockOutputStream``/``Lz4BlockInputStream`` and xerial's ``SnappyOutputStream``/
``SnappyInputStream``).  All codecs run in cramjam's native code.

Wire formats (only the records area of a batch, after recordsCount, is compressed)::

    gzip    RFC 1952 gzip stream(s) (header + deflate + CRC32/ISIZE trailer)
    snappy  written as xerial framing, like Java:
              0x82 'S' 'N' 'A' 'P' 'P' 'Y' 0x00   magic (8 bytes)
              int32 version = 1, int32 compatible version = 1
              repeated: int32 BE block length, raw snappy block (of <= 32 KiB input)
            read: xerial framing or one raw snappy block (librdkafka writes raw)
    lz4     LZ4 frame (magic 0x184D2204), independent blocks, 64 KiB max block size
    zstd    zstd frame(s)

Decompression is capped (``max_size``) so a small batch cannot expand into gigabytes (a
"compression bomb"); the cap is enforced without ever holding more than ``max_size + 1``
bytes of output:

* gzip, lz4, zstd decompress into a fixed ``bytearray`` (``decompress_into``) that starts at a
  size guessed from the stream's own size claim (gzip ISIZE, lz4/zstd content size) or from
  the input length, and grows by 4x up to ``max_size + 1``; filling that last buffer means the
  cap is exceeded.  A size claim above the cap fails at once: a valid stream is at least as
  large as its (first/last) member's claim, and an invalid one is corrupt anyway.
* snappy: raw blocks start with their exact uncompressed length (a varint), checked before
  decoding; xerial frames are walked block by block, summing those lengths first.

Corrupt input raises ``CorruptBatchError`` naming the codec; exceeding the cap raises
``DecompressionLimitError`` (a ``CorruptBatchError``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from enum import IntEnum

import cramjam

from millrace.common.errors import CorruptBatchError, DecompressionLimitError

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED",
    "CompressionType",
    "compress",
    "decompress",
    "repair_legacy_lz4_header",
]

# 64 MiB: far above any real batch (Kafka's message.max.bytes defaults to ~1 MiB and a batch
# rarely compresses better than 20:1), small enough that a hostile batch cannot exhaust memory.
DEFAULT_MAX_DECOMPRESSED = 64 * 1024 * 1024

_Bytes = bytes | bytearray | memoryview


class CompressionType(IntEnum):
    """The codec id stored in bits 0-2 of the batch (or legacy message) attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_name(cls, name: str) -> CompressionType:
        """Codec for a ``compression.type`` value ("none", "gzip", "snappy", "lz4", "zstd")."""
        try:
            return cls[name.strip().upper()]
        except (KeyError, AttributeError):
            raise ValueError(
                f"unknown compression type {name!r}; expected one of "
                f"{', '.join(c.name.lower() for c in cls)}"
            ) from None

    @classmethod
    def from_id(cls, codec_id: int) -> CompressionType:
        """Codec for attribute bits 0-2; an unknown id raises ``CorruptBatchError``."""
        try:
            return cls(codec_id)
        except ValueError:
            raise CorruptBatchError(f"unknown compression codec id {codec_id}") from None


_INT32 = struct.Struct(">i")
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_HEADER_SIZE = len(_XERIAL_HEADER)
_XERIAL_BLOCK_SIZE = 32 * 1024
_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_DEFAULT_LEVEL = 3  # Kafka's default (compression.zstd.level)
_MIN_GUESS = 64 * 1024


def compress(codec: CompressionType, data: _Bytes, level: int | None = None) -> bytes:
    """Compress ``data`` with ``codec`` in the format Kafka's Java producer writes.

    ``level`` is the codec's compression level (None = codec default; ignored for snappy).
    """
    if codec == CompressionType.NONE:
        return bytes(data)
    if codec == CompressionType.GZIP:
        return bytes(cramjam.gzip.compress(data, level=level))
    if codec == CompressionType.SNAPPY:
        return _xerial_compress(data)
    if codec == CompressionType.LZ4:
        compressor = cramjam.lz4.Compressor(
            level=level, content_checksum=False, block_linked=False
        )
        if len(data):
            compressor.compress(data if isinstance(data, bytes) else bytes(data))
        return bytes(compressor.finish())
    if codec == CompressionType.ZSTD:
        return bytes(
            cramjam.zstd.compress(data, level=_ZSTD_DEFAULT_LEVEL if level is None else level)
        )
    raise ValueError(f"unknown compression codec {codec!r}")


def _xerial_compress(data: _Bytes) -> bytes:
    out = bytearray(_XERIAL_HEADER)
    view = memoryview(data)
    pack = _INT32.pack
    raw = cramjam.snappy.compress_raw
    for start in range(0, len(view), _XERIAL_BLOCK_SIZE):
        block = raw(view[start : start + _XERIAL_BLOCK_SIZE])
        out += pack(len(block))
        out += block
    return bytes(out)


def decompress(
    codec: CompressionType, data: _Bytes, max_size: int = DEFAULT_MAX_DECOMPRESSED
) -> bytes:
    """Decompress one batch's records area; raises if the output would exceed ``max_size``."""
    if max_size < 0:
        raise ValueError(f"max_size must be >= 0, got {max_size}")
    if codec == CompressionType.NONE:
        if len(data) > max_size:
            raise _limit(codec, max_size, f"{len(data)} bytes")
        return bytes(data)
    if codec == CompressionType.SNAPPY:
        return _snappy_decompress(data, max_size)
    if codec == CompressionType.GZIP:
        return _bounded(codec, cramjam.gzip.decompress_into, data, _gzip_size_hint(data), max_size)
    if codec == CompressionType.LZ4:
        return _bounded(codec, cramjam.lz4.decompress_into, data, _lz4_size_hint(data), max_size)
    if codec == CompressionType.ZSTD:
        return _bounded(codec, cramjam.zstd.decompress_into, data, _zstd_size_hint(data), max_size)
    raise CorruptBatchError(f"unknown compression codec {codec!r}")


def _limit(codec: CompressionType, max_size: int, what: str) -> DecompressionLimitError:
    return DecompressionLimitError(
        f"{codec.name.lower()}: decompressed size exceeds the limit of {max_size} bytes ({what})"
    )


def _corrupt(codec: CompressionType, exc: Exception | str) -> CorruptBatchError:
    return CorruptBatchError(f"{codec.name.lower()}: corrupt compressed data: {exc}")


def _is_overflow(exc: Exception) -> bool:
    # cramjam's wording when decompress_into runs out of output space (gzip, lz4, zstd).
    return "whole buffer" in str(exc)


def _bounded(
    codec: CompressionType,
    decompress_into: Callable[[_Bytes, bytearray], int],
    data: _Bytes,
    hint: int | None,
    max_size: int,
) -> bytes:
    limit = max_size + 1  # output filling this buffer completely is over the cap
    if hint is not None:
        if hint > max_size:
            raise _limit(codec, max_size, f"the stream declares {hint} bytes")
        size = max(hint, 16)
    else:
        size = max(_MIN_GUESS, 8 * len(data))
    while True:
        size = min(size, limit)
        out = bytearray(size)
        try:
            n = decompress_into(data, out)
        except cramjam.DecompressionError as exc:
            if not _is_overflow(exc):
                raise _corrupt(codec, exc) from None
            if size >= limit:
                raise _limit(codec, max_size, "output overflowed the cap") from None
            size *= 4
            continue
        except (ValueError, TypeError, OverflowError) as exc:
            raise _corrupt(codec, exc) from None
        if n > max_size:
            raise _limit(codec, max_size, "output overflowed the cap")
        if n == size:
            return bytes(out)
        return bytes(memoryview(out)[:n])


def _gzip_size_hint(data: _Bytes) -> int | None:
    # ISIZE (last 4 bytes, little-endian) = size of the last member modulo 2**32.
    if len(data) >= 18 and data[0] == 0x1F and data[1] == 0x8B:
        return int.from_bytes(data[-4:], "little")
    return None


def _lz4_size_hint(data: _Bytes) -> int | None:
    # FLG bit 3 = content size present: 8 bytes LE after FLG and BD.
    if len(data) >= 15 and bytes(data[:4]) == _LZ4_MAGIC and data[4] & 0x08:
        return int.from_bytes(data[6:14], "little")
    return None


def _zstd_size_hint(data: _Bytes) -> int | None:
    # Frame header: magic, FHD, [window descriptor], [dictionary id], [frame content size].
    if len(data) < 6 or bytes(data[:4]) != _ZSTD_MAGIC:
        return None
    fhd = data[4]
    fcs_flag = fhd >> 6
    single_segment = (fhd >> 5) & 1
    pos = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[fhd & 3]
    fcs_size = (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
    if fcs_size == 0 or pos + fcs_size > len(data):
        return None
    value = int.from_bytes(data[pos : pos + fcs_size], "little")
    return value + 256 if fcs_size == 2 else value


def _snappy_decompress(data: _Bytes, max_size: int) -> bytes:
    codec = CompressionType.SNAPPY
    view = memoryview(data)
    if len(view) >= _XERIAL_HEADER_SIZE and view[:8] == _XERIAL_MAGIC:
        return _xerial_decompress(view, max_size)
    try:
        size = cramjam.snappy.decompress_raw_len(view)
    except (cramjam.DecompressionError, ValueError) as exc:
        raise _corrupt(codec, exc) from None
    if size > max_size:
        raise _limit(codec, max_size, f"the block declares {size} bytes")
    try:
        return bytes(cramjam.snappy.decompress_raw(view))
    except (cramjam.DecompressionError, ValueError) as exc:
        raise _corrupt(codec, exc) from None


def _xerial_decompress(view: memoryview, max_size: int) -> bytes:
    codec = CompressionType.SNAPPY
    end = len(view)
    blocks: list[tuple[memoryview, int]] = []
    total = 0
    pos = _XERIAL_HEADER_SIZE
    while pos < end:
        if end - pos >= _XERIAL_HEADER_SIZE and view[pos : pos + 8] == _XERIAL_MAGIC:
            pos += _XERIAL_HEADER_SIZE  # a concatenated stream starts again
            continue
        if end - pos < 4:
            raise _corrupt(codec, f"truncated xerial block length at {pos}")
        (length,) = _INT32.unpack_from(view, pos)
        pos += 4
        if length < 0 or length > end - pos:
            raise _corrupt(codec, f"xerial block at {pos - 4} claims {length} bytes, "
                                  f"{end - pos} left")
        block = view[pos : pos + length]
        pos += length
        try:
            size = cramjam.snappy.decompress_raw_len(block)
        except (cramjam.DecompressionError, ValueError) as exc:
            raise _corrupt(codec, exc) from None
        total += size
        if total > max_size:
            raise _limit(codec, max_size, f"xerial blocks declare at least {total} bytes")
        blocks.append((block, size))
    out = bytearray(total)
    target = memoryview(out)
    offset = 0
    for block, size in blocks:
        try:
            n = cramjam.snappy.decompress_raw_into(block, target[offset : offset + size])
        except (cramjam.DecompressionError, ValueError) as exc:
            raise _corrupt(codec, exc) from None
        if n != size:
            raise _corrupt(codec, f"block decoded to {n} bytes, declared {size}")
        offset += size
    target.release()
    return bytes(out)


# ------------------------------------------------------------------ legacy (magic 0) lz4
_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32 (used by the LZ4 frame header checksum); pure Python, for short inputs."""
    n = len(data)
    i = 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while i + 16 <= n:
            for lane in range(4):
                word = int.from_bytes(data[i : i + 4], "little")
                v[lane] = (_rotl((v[lane] + word * _P2) & _M32, 13) * _P1) & _M32
                i += 4
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while i + 4 <= n:
        h = (h + int.from_bytes(data[i : i + 4], "little") * _P3) & _M32
        h = (_rotl(h, 17) * _P4) & _M32
        i += 4
    while i < n:
        h = (h + data[i] * _P5) & _M32
        h = (_rotl(h, 11) * _P1) & _M32
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


def repair_legacy_lz4_header(data: _Bytes) -> bytes:
    """Rewrite an LZ4 frame's header checksum byte with the correct value.

    Kafka 0.8/0.9 (magic v0 message sets) computed that byte over the magic number too
    (KAFKA-3160); standard decoders reject it.  Frames with a correct checksum are unchanged.
    """
    raw = bytes(data)
    if len(raw) < 7 or raw[:4] != _LZ4_MAGIC:
        return raw
    flg = raw[4]
    end = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    if end >= len(raw):
        return raw
    checksum = (xxh32(raw[4:end]) >> 8) & 0xFF
    return raw[:end] + bytes((checksum,)) + raw[end + 1 :]
