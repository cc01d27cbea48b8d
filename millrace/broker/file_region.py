"""A byte range of a log segment file, sent to a socket without building a response in
memory.

Fetch responses hold ``FileRegion``s in place of record bytes; the network layer calls
``send``.  On a plain TCP transport that is ``os.sendfile`` (the bytes never pass through
Python), called at once and repeated for as long as the socket takes more: a fetch of a
few MB usually leaves in one to three calls, with no trip through the event loop.  Only
when the socket's send buffer is full (``EAGAIN``) does the rest go through
``loop.sendfile``, which waits for the socket to drain.  That is also the path whenever
the transport still holds unsent bytes, which must leave first.  asyncio's
``loop.sendfile`` alone paid a selector round trip per partial send, plus pausing and
resuming reading for every region, and that made a 4 MB fetch cost 11 ms where
librdkafka's mock broker took 7.5 (bench/README.md).  A TLS transport has to encrypt them, so they must be read;
asyncio's own fallback for that reads 16 KiB at a time through the thread pool (one
thread round trip and one socket send per 16 KiB: a TLS fetch ran at a third of a
plaintext one, bench/README.md).  Here a TLS region is read with ``os.pread`` in
``TLS_CHUNK`` pieces on the loop thread (recent log data is in the page cache) and
written to the transport, waiting on the connection's ``drain`` whenever the transport
asks the protocol to stop writing, so a slow reader never makes the broker buffer more
than a chunk over the transport's high-water mark.  ``pread`` takes its own offset, so
readers never move each other's file position.  The storage layer's
``FetchDataInfo.open_file`` hands out a private descriptor, so a segment deleted by
retention meanwhile still reads.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable

from millrace.storage.info import FetchDataInfo

log = logging.getLogger(__name__)

TLS_CHUNK = 256 * 1024


class FileRegion:
    __slots__ = ("info",)

    def __init__(self, info: FetchDataInfo) -> None:
        self.info = info

    def __len__(self) -> int:
        return self.info.length

    async def send(self, loop: asyncio.AbstractEventLoop, transport: asyncio.Transport,
                   drain: Callable[[], Awaitable[None]]) -> None:
        """Write the region to ``transport``; ``drain`` returns once the transport takes
        more (the protocol's pause/resume_writing)."""
        with self.info.open_file() as f:
            if transport.get_extra_info("sslcontext") is None:
                sent = self._sendfile_now(f.fileno(), transport)
                if sent < self.info.length and not transport.is_closing():
                    sent += await loop.sendfile(transport, f, self.info.position + sent,
                                                self.info.length - sent, fallback=True)
            else:
                sent = await self._copy(f.fileno(), transport, drain)
        if sent != self.info.length:
            # The segment shrank under us (truncation): a short frame would desynchronise
            # the client, so the connection has to go.
            if not transport.is_closing():
                log.warning("closing the connection to %s: sent %d of the %d bytes of a "
                            "fetched log region (the segment shrank meanwhile)",
                            transport.get_extra_info("peername"), sent, self.info.length)
            transport.close()

    def _sendfile_now(self, fd: int, transport: asyncio.Transport) -> int:
        """``os.sendfile`` straight to the socket while it takes bytes; how many it took.
        Nothing when the transport has bytes queued (they go first) or no socket."""
        sock = transport.get_extra_info("socket")
        if sock is None or transport.get_write_buffer_size() or transport.is_closing():
            return 0
        out = sock.fileno()
        position, end = self.info.position, self.info.position + self.info.length
        while position < end:
            try:
                n = os.sendfile(out, fd, position, end - position)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                break  # loop.sendfile tries again and reports the error its way
            if n == 0:
                break  # the file ends early: the caller sees the short count
            position += n
        return position - self.info.position

    async def _copy(self, fd: int, transport: asyncio.Transport,
                    drain: Callable[[], Awaitable[None]]) -> int:
        position, end = self.info.position, self.info.position + self.info.length
        while position < end and not transport.is_closing():
            chunk = os.pread(fd, min(TLS_CHUNK, end - position), position)
            if not chunk:
                break
            transport.write(chunk)
            position += len(chunk)
            await drain()
        return position - self.info.position
