"""Stopping the broker's background tasks without hanging on one.

``task.cancel()`` followed by ``await task`` can wait forever on Python 3.11: when a
cancellation lands just as an inner ``asyncio.wait_for`` completes, ``wait_for`` swallows
it (CPython gh-86296, fixed in 3.12) and a ``while True`` loop carries on.  Every
long-lived loop of the broker therefore also checks a stop flag, and shutdown waits for
it a bounded time.
"""

from __future__ import annotations

import asyncio
import logging

log = logging.getLogger(__name__)


async def stop_task(task: asyncio.Task[None] | None, timeout_s: float = 5.0) -> None:
    """Cancel ``task`` and wait up to ``timeout_s`` for it to end (repeating the cancel
    while it has not, in case one was swallowed)."""
    if task is None or task.done():
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not task.done() and loop.time() < deadline:
        task.cancel()
        await asyncio.wait({task}, timeout=0.1)
    if not task.done():
        log.warning("task %s did not stop within %.1f s", task.get_name(), timeout_s)
