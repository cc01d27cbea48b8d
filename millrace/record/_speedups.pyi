# Types of the optional C accelerator (_speedups.c); see default_record.py.
from typing import Any

def encode_record(
    out: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Any,
) -> int: ...
def decode_records_as(
    cls: type,
    fields: tuple[str | None, ...],
    constants: tuple[Any, ...],
    data: bytes,
    pos: int,
    end: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    append_time: int | None,
    max_records: int,
) -> tuple[list[Any], int]: ...
