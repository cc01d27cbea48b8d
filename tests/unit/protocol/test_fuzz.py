"""Mutation fuzzing: damaged frames may only ever raise ProtocolDecodeError.

Valid requests and responses of the busiest APIs (several versions each, flexible and
not) are encoded, then mutated at random -- bytes flipped, inserted, deleted, the frame
cut short, 4-byte or varint lengths overwritten with huge values -- and decoded three
ways: the bare body through the codec, the whole request frame through ServerConnection
and the whole response frame through ClientConnection.  Anything but a
``ProtocolDecodeError`` (or subclass) fails the test with the seed that reproduces it.
"""

from __future__ import annotations

import random
import struct
import time
from typing import Any

import pytest

from millrace.common.errors import ProtocolDecodeError
from millrace.protocol import API, NEED_DATA, ApiKey, ClientConnection, ServerConnection
from millrace.protocol.codec import MessageCodec
from millrace.protocol.headers import RequestHeader, write_request_header
from tests.unit.protocol.valuegen import random_message

TARGETS = [
    (ApiKey.PRODUCE, (3, 7, 9, 12)),
    (ApiKey.FETCH, (4, 11, 12, 17)),
    (ApiKey.METADATA, (1, 5, 9, 12)),
    (ApiKey.JOIN_GROUP, (0, 5, 6, 9)),
    (ApiKey.API_VERSIONS, (0, 2, 3, 4)),
    (ApiKey.OFFSET_COMMIT, (2, 7, 8, 9)),
]
MUTATIONS_PER_CASE = 150
TIME_BUDGET_S = 20.0
HUGE_INT32 = (b"\x7f\xff\xff\xff", b"\xff\xff\xff\xfe", b"\x80\x00\x00\x00", b"\x00\x10\x00\x00")
HUGE_VARINT = (b"\xff\xff\xff\xff\x0f", b"\x80\x80\x80\x80\x08", b"\xff\xff\xff\x7f",
               b"\xff\xff\xff\xff\xff\x01")


def mutate(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        kind = rng.randrange(7)
        at = rng.randrange(len(b) + 1)
        if kind == 0 and b:  # flip bits of one byte
            at = min(at, len(b) - 1)
            b[at] ^= rng.randint(1, 255)
        elif kind == 1:  # insert bytes
            b[at:at] = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 4)))
        elif kind == 2 and b:  # delete bytes
            del b[at:at + rng.randint(1, 4)]
        elif kind == 3:  # truncate
            del b[at:]
        elif kind == 4:  # an int32 length / count claims a huge value
            b[at:at + 4] = rng.choice(HUGE_INT32)
        elif kind == 5:  # a varint length claims a huge value
            b[at:at + rng.randint(1, 2)] = rng.choice(HUGE_VARINT)
        else:  # an int16 string length claims more than remains
            b[at:at + 2] = rng.choice((b"\x7f\xff", b"\x00\xff", b"\xff\xfe"))
    return bytes(b)


def check(what: str, seed: str, fn: Any, *args: Any) -> None:
    try:
        fn(*args)
    except ProtocolDecodeError:
        pass
    except Exception as e:  # the point of the test: nothing else may escape
        pytest.fail(f"{what} (seed {seed!r}) raised {type(e).__name__}: {e}")


def serve(frame: bytes) -> None:
    server = ServerConnection()
    server.receive_data(frame)
    while server.next_event() is not NEED_DATA:
        pass


def receive(key: int, version: int, frame: bytes) -> None:
    client = ClientConnection()
    client.send_request(API[key].request.cls(), version)
    client.receive_data(frame)
    client.next_event()


def _cases() -> list[Any]:
    return [pytest.param(key, v, id=f"{API[key].name}-v{v}") for key, vs in TARGETS for v in vs]


@pytest.mark.parametrize(("key", "version"), _cases())
def test_mutated_messages_only_raise_protocol_decode_error(key: int, version: int) -> None:
    deadline = time.monotonic() + TIME_BUDGET_S
    api = API[key]
    rng = random.Random(f"fuzz/{key}/{version}")
    codecs: tuple[MessageCodec, MessageCodec] = (api.request, api.response)
    for codec in codecs:
        originals = [codec.encode(random_message(codec, version, rng), version) for _ in range(4)]
        originals.append(codec.encode(codec.cls(), version))
        for i in range(MUTATIONS_PER_CASE):
            seed = f"{codec.message.name} v{version} #{i}"
            body = mutate(rng.choice(originals), rng)
            check(f"{codec.message.name} v{version} body", seed, codec.decode, body, version)
            if codec is api.request:
                header = bytearray()
                write_request_header(header, RequestHeader(key, version, i, "fuzz"),
                                     2 if api.is_flexible(version) else 1)
                payload = mutate(bytes(header) + rng.choice(originals), rng)
                check("request frame", seed, serve, struct.pack(">i", len(payload)) + payload)
                # ... and with the size prefix itself in the blast radius.
                check("request stream", seed, serve,
                      mutate(struct.pack(">i", len(payload)) + payload, rng))
            else:
                head = struct.pack(">i", 0)
                if api.is_flexible(version) and key != ApiKey.API_VERSIONS:
                    head += b"\x00"
                payload = mutate(head + rng.choice(originals), rng)
                check("response frame", seed, receive, key, version,
                      struct.pack(">i", len(payload)) + payload)
        assert time.monotonic() < deadline, "fuzzing exceeded its time budget"


def test_mutator_changes_its_input() -> None:
    rng = random.Random(0)
    data = bytes(range(40))
    changed = sum(mutate(data, rng) != data for _ in range(200))
    assert changed >= 190  # an insert of bytes equal to a deleted run is the rare no-op
