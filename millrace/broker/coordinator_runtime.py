"""``CoordinatorRuntime``: the asyncio machinery the group and transaction coordinator
services share.

Java counterpart: ``org.apache.kafka.coordinator.common.runtime.CoordinatorRuntime`` (Kafka
3.6+), which both ``GroupCoordinatorService`` and ``TransactionCoordinatorService`` hand
their shards' operations and timers to.  Ours is the small part that is the same for both:

* **the timer**: a task that calls the service's ``run_once`` every ``tick_interval_ms``
  (session and rebalance deadlines, offset expiry; transaction timeouts, retried
  completions).  ``run_once`` stays public on the services so tests step them without
  the task.
* **writes that outlive their request**: a coordinator write runs in a task of its own,
  shielded from the handler that asked for it (``shielded``).  A handler is cancelled
  when its client's connection closes, and a write cut off between its append and its
  replay would leave the coordinator's state out of step with its log -- Kafka's append
  callback likewise runs whether or not anyone is left to answer.  Writes nobody waits
  for (timer results, marker completions) are ``spawn``-ed.  The runtime keeps a strong
  reference to each such task until it ends (the event loop holds only weak ones).

What each write does -- which log, when the cache sees it, how storage errors map -- stays
in the service: that is where the two coordinators differ.

Threading: owned by the broker's event-loop thread.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class CoordinatorRuntime:
    """The timer task and the background writes of one coordinator service."""

    def __init__(self, tick_interval_ms: int) -> None:
        self._tick_s = tick_interval_ms / 1000
        self._task: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[Any]] = set()   # writes outliving their request

    def start(self, run_once: Callable[[], None]) -> None:
        """Start the timer: ``run_once`` every tick, until ``stop``."""
        self._task = asyncio.get_running_loop().create_task(self._run(run_once))

    async def stop(self) -> None:
        """Stop the timer (background writes carry on; see ``cancel_background``)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self, run_once: Callable[[], None]) -> None:
        while True:
            await asyncio.sleep(self._tick_s)
            run_once()

    def spawn(self, coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """Run ``coro`` as a background task, held until it ends."""
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def shielded(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` in the background and wait for its result; cancelling the caller
        does not cancel it."""
        return await asyncio.shield(self.spawn(coro))

    def cancel_background(self) -> None:
        """Cancel the background writes still running (shutdown)."""
        for task in list(self._background):
            task.cancel()
