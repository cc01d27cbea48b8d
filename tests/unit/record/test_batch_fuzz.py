"""Fuzzing the readers: mutated, truncated or spliced input may only raise ProtocolDecodeError.

Never IndexError, struct.error, UnicodeDecodeError, MemoryError, a cramjam exception or a
hang: the decoders face bytes from the network and from disk.
"""

from __future__ import annotations

import contextlib
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from millrace.common.errors import ProtocolDecodeError
from millrace.record.batch import RecordBatch, iter_batches, validate_batch
from millrace.record.compression import CompressionType, compress
from millrace.record.control import build_end_txn_marker
from millrace.record.legacy import LegacyRecordBatch, iter_legacy_records
from millrace.record.memory_records import MemoryRecords
from tests.unit.record.recordgen import RecordSpec, build, fix_crc, legacy_message

MIB = 1 << 20
SPECS: list[RecordSpec] = [
    (1_700_000_000_000 + i, b"key-%d" % i if i % 3 else None, b"v" * (i * 7) if i % 4 else b"",
     [(f"h{j}", b"x" * j if j else None) for j in range(i % 3)])
    for i in range(12)
]


def _legacy_wrapper(codec: CompressionType, magic: int) -> bytes:
    inner = b"".join(legacy_message(i, b"k", b"inner-%d" % i, magic=magic) for i in range(3))
    return legacy_message(10, None, compress(codec, inner), magic=magic, attributes=int(codec))


POOL: list[bytes] = [build(SPECS, codec, base_offset=100) for codec in CompressionType]
POOL += [build_end_txn_marker(5, 1, True, 3, 1_700_000_000_000)]
POOL += [_legacy_wrapper(codec, magic) for codec in CompressionType if codec
         for magic in (0, 1)]
POOL += [legacy_message(7, b"k", b"v", magic=0) + legacy_message(8, None, None, magic=1)]
POOL += [POOL[0] + POOL[2] + POOL[-1]]


def exercise(data: bytes | bytearray) -> None:
    """Run every reader over ``data``; anything but ProtocolDecodeError fails the test."""
    for check in (
        lambda: RecordBatch(data).validate(),
        lambda: RecordBatch(data).record_list(max_decompressed=MIB),
        lambda: validate_batch(data, check_offsets=True),
        lambda: list(iter_batches(data)),
        lambda: LegacyRecordBatch(data).validate(),
        lambda: LegacyRecordBatch(data).record_list(max_decompressed=MIB),
        lambda: list(iter_legacy_records(data, 0, MIB)),
        lambda: list(MemoryRecords(data).records(MIB, include_control=True)),
        lambda: MemoryRecords(data).valid_bytes(),
    ):
        with contextlib.suppress(ProtocolDecodeError):
            check()


def test_pool_is_valid() -> None:
    for data in POOL:
        records = list(MemoryRecords(data).records(include_control=True))
        assert records
        assert MemoryRecords(data).valid_bytes() == len(data)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    source=st.sampled_from(range(len(POOL))),
    flips=st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), max_size=4),
    cut=st.none() | st.integers(0, 1 << 20),
    recrc=st.booleans(),
)
def test_mutated_input_only_raises_decode_errors(
    source: int, flips: list[tuple[int, int]], cut: int | None, recrc: bool
) -> None:
    data = bytearray(POOL[source])
    for index, value in flips:
        data[index % len(data)] = value
    if cut is not None:
        del data[cut % (len(data) + 1) :]
    if recrc and len(data) >= 61 and data[16] == 2:
        fix_crc(data)  # so the record decoder itself gets the hostile bytes
    exercise(data)


@pytest.mark.parametrize("seed", range(4))
def test_random_byte_mutations(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(500):
        data = bytearray(rng.choice(POOL))
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(data))
            # favour the bytes that lengths and varints live in
            data[i] = rng.choice((0x00, 0x01, 0x7F, 0x80, 0xFF, rng.randrange(256)))
        if data[16] == 2 and rng.random() < 0.7:
            fix_crc(data)
        exercise(data)


@pytest.mark.parametrize("index", range(len(POOL)))
def test_every_prefix_and_garbage_suffix(index: int) -> None:
    data = POOL[index]
    for cut in range(len(data) + 1):
        exercise(data[:cut])
    exercise(data + b"\xff" * 13)
    exercise(data + b"\x00" * 80)
