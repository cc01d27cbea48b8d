"""Size-prefixed framing, sans-I/O (the shape of h11's ``receive_data``/``next_event``).

Every Kafka request and response is ``int32 size`` + ``size`` bytes.  ``FrameDecoder``
buffers whatever bytes arrive and hands out whole frames.  The size prefix is checked
against ``max_frame_size`` as soon as its 4 bytes are in, *before* any buffer for the
frame exists, so a hostile 2 GiB prefix costs nothing but an error.
"""

from __future__ import annotations

from typing import Final

from millrace.common.errors import FrameTooLargeError, ProtocolDecodeError
from millrace.protocol.primitives import INT32


class _NeedData:
    def __repr__(self) -> str:
        return "NEED_DATA"


NEED_DATA: Final = _NeedData()

DEFAULT_MAX_FRAME = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes default


class FrameDecoder:
    """Accumulates bytes; ``next_frame()`` returns one frame's payload or ``NEED_DATA``."""

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME) -> None:
        self.max_frame_size = max_frame_size
        self._buf = bytearray()
        self._start = 0  # consumed prefix of _buf, compacted lazily
        self._need: int | None = None  # size of the frame being collected
        self._error: ProtocolDecodeError | None = None

    @property
    def buffered(self) -> int:
        return len(self._buf) - self._start

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        if self._error is not None:
            raise self._error
        self._buf += data

    def next_frame(self) -> bytes | _NeedData:
        if self._error is not None:
            raise self._error
        avail = len(self._buf) - self._start
        if self._need is None:
            if avail < 4:
                self._compact()
                return NEED_DATA
            size = INT32.unpack_from(self._buf, self._start)[0]
            if size < 0:
                self._error = ProtocolDecodeError(f"frame size prefix is negative ({size})")
                raise self._error
            if size > self.max_frame_size:
                self._error = FrameTooLargeError(
                    f"frame of {size} bytes exceeds the maximum of {self.max_frame_size} "
                    "(socket.request.max.bytes)")
                raise self._error
            self._need = size
            self._start += 4
            avail -= 4
        if avail < self._need:
            self._compact()
            return NEED_DATA
        # One copy out of the buffer (slicing the bytearray first would make two).
        with memoryview(self._buf) as view:
            frame = view[self._start:self._start + self._need].tobytes()
        self._start += self._need
        self._need = None
        return frame

    def _compact(self) -> None:
        if self._start:
            del self._buf[:self._start]
            self._start = 0


def frame(payload: bytes | bytearray) -> bytes:
    """Prefix ``payload`` with its int32 size."""
    return INT32.pack(len(payload)) + bytes(payload)
