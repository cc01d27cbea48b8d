# Types of the optional C accelerator (_speedups.c); see batch_core.py and producer_record.py.
from typing import Any

class FutureCore:
    _result: Any
    _callback: Any
    _index: int
    _timestamp: int
    _key_size: int
    _value_size: int
    def __init__(self, result: Any, index: int, timestamp: int, key_size: int,
                 value_size: int, callback: Any = ...) -> None: ...

class BatchCore:
    _buf: bytearray
    produce_future: Any
    _thunks: list[Any]
    _base_timestamp: int
    _max_timestamp: int
    _write_limit: int
    record_count: int
    last_record_size: int
    full: bool
    def __init__(self, buf: bytearray, write_limit: int, produce_future: Any) -> None: ...
    def try_append(self, timestamp: int, key: bytes | None, value: bytes | None,
                   headers: Any, callback: Any, now_ms: int) -> Any: ...

class RecordCore:
    topic: Any
    value: Any
    key: Any
    partition: Any
    timestamp: Any
    headers: Any
    def __init__(self, topic: Any, value: Any = ..., key: Any = ..., partition: Any = ...,
                 timestamp: Any = ..., headers: Any = ...) -> None: ...

def set_future_type(cls: type, /) -> None: ...
def install_record_vectorcall(cls: type, /) -> None: ...
def wall_clock_ms() -> int: ...
def murmur2(data: bytes, /) -> int: ...

class Lock:
    def acquire(self, blocking: bool = ..., timeout: float = ...) -> bool: ...
    def release(self) -> None: ...
    def locked(self) -> bool: ...
    def __enter__(self) -> bool: ...
    def __exit__(self, *args: object) -> None: ...

class SendPath:
    def __init__(self, record_type: type, metadata: Any, accumulator: Any, wakeup: Any,
                 clock: Any, max_record_size: int, overhead: int, key_is_bytes: bool,
                 value_is_bytes: bool, ignore_keys: bool, fallback: Any) -> None: ...
    def __call__(self, record: Any, callback: Any = ...) -> Any: ...
    def close(self) -> None: ...
