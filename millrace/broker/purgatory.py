"""Delayed operations (Kafka's ``DelayedOperationPurgatory``) on asyncio.

A request that cannot be answered yet — a Fetch below ``fetch.min.bytes``, later an
acks=all Produce waiting for followers — parks a waiter keyed by the partitions it
watches.  Whatever changes those partitions (an append, a high-watermark move) calls
``check_and_complete(key)``, which wakes every waiter on that key; the waiter re-checks
its own condition and either completes or parks again until its deadline.

Owned by the event-loop thread.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Hashable, Iterable, Sequence


class DelayedOperationPurgatory:
    def __init__(self, name: str) -> None:
        self.name = name
        self._watchers: defaultdict[Hashable, set[asyncio.Future[None]]] = defaultdict(set)

    def watch(self, keys: Iterable[Hashable]) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for key in keys:
            self._watchers[key].add(fut)
        return fut

    def unwatch(self, keys: Iterable[Hashable], fut: asyncio.Future[None]) -> None:
        for key in keys:
            waiters = self._watchers.get(key)
            if waiters is not None:
                waiters.discard(fut)
                if not waiters:
                    del self._watchers[key]

    def check_and_complete(self, key: Hashable) -> int:
        waiters = self._watchers.pop(key, None)
        if not waiters:
            return 0
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)
        return len(waiters)

    @property
    def watched(self) -> int:
        return sum(len(w) for w in self._watchers.values())

    async def wait(self, keys: Sequence[Hashable], timeout_s: float) -> bool:
        """Park until one of ``keys`` changes or ``timeout_s`` passes; True if woken."""
        if timeout_s <= 0:
            return False
        fut = self.watch(keys)
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout_s)
            return True
        except TimeoutError:
            return False
        finally:
            self.unwatch(keys, fut)
            if not fut.done():
                fut.cancel()
