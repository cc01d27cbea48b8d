"""A byte range of a log segment file, sent to a socket without passing through Python.

Fetch responses hold ``FileRegion``s in place of record bytes; the network layer calls
``send``, which uses ``loop.sendfile`` (``os.sendfile`` underneath) on plain TCP
transports and falls back to copying when the transport cannot.  The storage layer's
``FetchDataInfo.open_file`` hands out a private descriptor, so a segment deleted by
retention meanwhile still reads.
"""

from __future__ import annotations

import asyncio

from millrace.storage.info import FetchDataInfo


class FileRegion:
    __slots__ = ("info",)

    def __init__(self, info: FetchDataInfo) -> None:
        self.info = info

    def __len__(self) -> int:
        return self.info.length

    async def send(self, loop: asyncio.AbstractEventLoop, transport: asyncio.Transport) -> None:
        with self.info.open_file() as f:
            sent = await loop.sendfile(transport, f, self.info.position, self.info.length,
                                       fallback=True)
        if sent != self.info.length:
            # The segment shrank under us (truncation): a short frame would desynchronise
            # the client, so the connection has to go.
            transport.close()
