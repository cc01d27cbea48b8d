"""Size-prefixed framing, sans-I/O (the shape of h11's ``receive_data``/``next_event``).

Every Kafka request and response is ``int32 size`` + ``size`` bytes.  The size prefix is
checked against ``max_frame_size`` as soon as its 4 bytes are in, *before* any buffer for
the frame exists, so a hostile 2 GiB prefix costs nothing but an error.

Two readers share those rules:

* ``FrameDecoder`` buffers whatever bytes arrive (``receive_data``) and hands out each
  frame as ``bytes`` (one copy).  The clients use it.
* ``FrameReader`` is the broker's zero-copy reader, made for ``asyncio.BufferedProtocol``:
  the socket reads straight into a buffer it lends (``get_buffer``/``buffer_updated``)
  and each frame comes out as a ``memoryview`` of that buffer, never copied.  The view is
  writable, so the log assigns offsets in place and writes the very same bytes.

  ``FrameReader``'s buffers are reused, which saves both the copies and the page faults of
  a fresh allocation per large request (glibc hands big blocks back to the kernel, and
  every new one is faulted in again page by page).  A buffer is reused only once no view
  of it is alive anywhere.  Python knows that exactly: a ``bytearray`` with live exports
  refuses to resize, so the probe is to shrink it by a byte and grow it back.  A request
  may therefore keep its frame (a delayed produce waiting for acks=all does) for as long
  as it likes.  Meanwhile the reader moves on to another buffer, and the pinned one
  returns to the pool when the request lets go: the reader remembers up to ``KEEP_LENT``
  such buffers (as many as the broker lets a connection queue), so that while many
  acks=all requests wait, each released buffer serves a later frame instead of a new one
  being allocated.  Released buffers are kept only while about as many are still viewed,
  so memory per connection stays bounded by the frames it has in flight (the broker caps
  those) plus ``KEEP_FREE`` spare buffers, and ``trim`` gives all of it back when the
  connection is idle.
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


def size_error(size: int, max_frame_size: int) -> ProtocolDecodeError | None:
    """What is wrong with a frame's size prefix, if anything (checked before any buffer
    for the frame exists)."""
    if size < 0:
        return ProtocolDecodeError(f"frame size prefix is negative ({size})")
    if size > max_frame_size:
        return FrameTooLargeError(f"frame of {size} bytes exceeds the maximum of "
                                  f"{max_frame_size} (socket.request.max.bytes)")
    return None


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
            self._error = size_error(size, self.max_frame_size)
            if self._error is not None:
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


MIN_BUFFER = 64 * 1024  # the smallest buffer allocated
MIN_READ = 16 * 1024  # the least room offered to one read
GRAIN = 256 * 1024  # buffer sizes are multiples of this
KEEP_FREE = 2  # spare buffers a connection keeps for reuse
KEEP_LENT = 64  # buffers retired while viewed that a connection remembers, to reuse
KEEP_MAX = 16 * 1024 * 1024  # larger buffers are never kept for reuse


def _unpinned(buf: bytearray) -> bool:
    """Whether no memoryview of ``buf`` is alive (a bytearray with exports can't resize;
    shrinking by one byte and growing back never reallocates)."""
    last = buf[-1]
    try:
        del buf[-1]
    except BufferError:
        return False
    buf.append(last)
    return True


class FrameReader:
    """Frames read in place: ``get_buffer`` lends the space the next read fills,
    ``buffer_updated`` says how much it did, ``next_frame`` returns a whole frame as a
    writable ``memoryview`` (valid for as long as the caller keeps it) or ``NEED_DATA``.
    ``receive_data`` copies bytes in, for callers without a buffered transport.

    ``get_buffer`` never raises (asyncio would log a traceback): a bad size prefix is
    ``next_frame``'s error to report."""

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME) -> None:
        self.max_frame_size = max_frame_size
        self._buf = bytearray(0)
        self._start = 0  # the first byte not handed out yet (a size prefix, when any)
        self._end = 0  # bytes filled so far
        self._need: int | None = None  # size of the frame being collected
        self._free: list[bytearray] = []  # spare buffers, unviewed when kept
        self._lent: list[bytearray] = []  # retired while viewed, oldest first
        self._error: ProtocolDecodeError | None = None

    @property
    def buffered(self) -> int:
        return self._end - self._start

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        if self._error is not None:
            return memoryview(bytearray(MIN_READ))  # the connection is closing anyway
        whole = self._frame_span()
        if self._start + whole > len(self._buf) or len(self._buf) - self._end < MIN_READ:
            self._make_room(whole)
        return memoryview(self._buf)[self._end:]

    def _frame_span(self) -> int:
        """Bytes the frame at ``_start`` spans with its prefix, as far as known (4 while
        its size is unread; a size over the limit is left for ``next_frame`` to refuse)."""
        if self._need is not None:
            return 4 + self._need
        if self._end - self._start >= 4:
            size = INT32.unpack_from(self._buf, self._start)[0]
            if 0 <= size <= self.max_frame_size:
                return 4 + size
        return 4

    def buffer_updated(self, nbytes: int) -> None:
        self._end += nbytes

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        if self._error is not None:
            raise self._error
        with memoryview(data) as src:
            at = 0
            while at < len(src):
                with self.get_buffer() as room:
                    n = min(len(room), len(src) - at)
                    room[:n] = src[at:at + n]
                self.buffer_updated(n)
                at += n

    def next_frame(self) -> memoryview | _NeedData:
        if self._error is not None:
            raise self._error
        if self._need is None:
            if self._end - self._start < 4:
                return NEED_DATA
            size = INT32.unpack_from(self._buf, self._start)[0]
            self._error = size_error(size, self.max_frame_size)
            if self._error is not None:
                raise self._error
            self._need = size
        begin = self._start + 4
        if self._end - begin < self._need:
            return NEED_DATA
        stop = begin + self._need
        frame = memoryview(self._buf)[begin:stop]
        self._start = stop
        self._need = None
        return frame

    def _make_room(self, whole: int) -> None:
        """Move the unread bytes to the front of a buffer with room for the frame they
        begin (``whole`` bytes) and a good read after it.  The current buffer serves if
        it is large enough and no view of it is alive; otherwise a spare or a new one."""
        pending = self._end - self._start
        size = max(whole, pending) + MIN_READ
        old = self._buf
        if len(old) >= size and _unpinned(old):
            if self._start:
                old[:pending] = old[self._start:self._end]
            if self._lent:
                self._reclaim(None)
        else:
            new = self._spare(size)
            new[:pending] = old[self._start:self._end]
            self._buf = new
            self._retire(old)
        self._start, self._end = 0, pending

    def _spare(self, size: int) -> bytearray:
        for i, buf in enumerate(self._free):
            if len(buf) >= size and _unpinned(buf):
                return self._free.pop(i)
        if self._lent:
            found = self._reclaim(size)
            if found is not None:
                return found
        # Rounded up to a whole GRAIN, so that a run of similar frames settles on one size
        # and the spares fit the next ones, without doubling a large frame's memory.
        return bytearray(MIN_BUFFER if size <= MIN_BUFFER else -(-size // GRAIN) * GRAIN)

    def _reclaim(self, size: int | None) -> bytearray | None:
        """A lent buffer of ``size`` or more that nobody views any more, if any (None:
        none is wanted, only the dropping below).  Released buffers are kept for the next
        burst only while requests still hold as many (reading resumes with half of a full
        queue waiting); past that they are dropped, so a connection whose bursts ended
        gives their memory back."""
        states = [(buf, _unpinned(buf)) for buf in self._lent]  # oldest first
        allowed = KEEP_FREE + sum(1 for _, released in states if not released)
        found: bytearray | None = None
        kept: list[bytearray] = []
        for buf, released in states:
            if released:
                if found is None and size is not None and len(buf) >= size:
                    found = buf
                    continue
                if allowed <= 0:
                    continue  # dropped: its memory goes back now
                allowed -= 1
            kept.append(buf)
        self._lent = kept
        return found

    def _retire(self, buf: bytearray) -> None:
        if not 0 < len(buf) <= KEEP_MAX:
            return
        if _unpinned(buf):
            self._keep(buf)
            return
        # Still viewed: remembered, and reused once released (``_reclaim``).
        self._lent.append(buf)
        if len(self._lent) > KEEP_LENT:
            del self._lent[0]  # whoever views it keeps it alive until done with it

    def _keep(self, buf: bytearray) -> None:
        """Add an unviewed buffer to the spares; past ``KEEP_FREE``, the smallest goes
        (its memory goes back now)."""
        free = self._free
        free.append(buf)
        if len(free) > KEEP_FREE:  # by position: list.remove would compare contents
            del free[min(range(len(free)), key=lambda i: len(free[i]))]

    def trim(self) -> None:
        """Give the buffers back (the connection is idle): only unread bytes stay."""
        self._free.clear()
        self._lent.clear()
        pending = self._end - self._start
        old = self._buf
        self._buf = bytearray(pending)
        self._buf[:pending] = old[self._start:self._end]
        self._start, self._end = 0, pending


def frame(payload: bytes | bytearray) -> bytes:
    """Prefix ``payload`` with its int32 size."""
    return INT32.pack(len(payload)) + bytes(payload)
