"""CoordinatorRuntime: the timer task and the writes that outlive their request."""

from __future__ import annotations

import asyncio

from millrace.broker.coordinator_runtime import CoordinatorRuntime


def test_the_timer_calls_run_once_every_tick_until_stopped() -> None:
    async def main() -> None:
        runtime = CoordinatorRuntime(tick_interval_ms=1)
        ticks: list[int] = []
        runtime.start(lambda: ticks.append(1))
        while len(ticks) < 3:
            await asyncio.sleep(0.001)
        await runtime.stop()
        seen = len(ticks)
        await asyncio.sleep(0.01)
        assert len(ticks) == seen
        await runtime.stop()                       # a second stop is harmless

    asyncio.run(main())


def test_a_shielded_write_outlives_its_cancelled_caller() -> None:
    async def main() -> None:
        runtime = CoordinatorRuntime(tick_interval_ms=3_600_000)
        gate = asyncio.Event()
        done: list[str] = []

        async def write() -> str:
            await gate.wait()
            done.append("replayed")
            return "answer"

        caller = asyncio.create_task(runtime.shielded(write()))
        await asyncio.sleep(0)
        caller.cancel()                            # the client's connection closed
        await asyncio.sleep(0)
        assert caller.cancelled()
        assert len(runtime._background) == 1      # held, not garbage
        gate.set()
        for _ in range(3):
            await asyncio.sleep(0)
        assert done == ["replayed"]
        assert not runtime._background             # forgotten once it ended
        assert await runtime.shielded(write()) == "answer"

    asyncio.run(main())


def test_cancel_background_cancels_the_writes_still_running() -> None:
    async def main() -> None:
        runtime = CoordinatorRuntime(tick_interval_ms=3_600_000)
        task = runtime.spawn(asyncio.Event().wait())
        await asyncio.sleep(0)
        runtime.cancel_background()
        for _ in range(2):                         # the cancel, then the done callback
            await asyncio.sleep(0)
        assert task.cancelled()
        assert not runtime._background

    asyncio.run(main())
