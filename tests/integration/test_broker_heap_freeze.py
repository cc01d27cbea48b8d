"""A broker process freezes its start-up heap (gc.freeze) once it serves; an embedded
broker (a shared process: tests, the demo) does not."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent("""
    import asyncio, gc, sys
    from millrace.broker.config import KafkaConfig
    from millrace.broker.server import KafkaServer

    async def main(freeze):
        server = KafkaServer(KafkaConfig.from_text("", {
            "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": sys.argv[1]}))
        counts = []
        def started(s):
            counts.append(gc.get_freeze_count())
            s._stop.set()
        before = gc.get_freeze_count()
        code = await server.serve_forever(on_started=started, freeze_heap=freeze)
        print(before, counts[0], code)

    asyncio.run(main(sys.argv[2] == "freeze"))
""")


def run(tmp_path: Path, mode: str) -> list[int]:
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / mode), mode],
                         capture_output=True, text=True, timeout=120, check=True)
    return [int(x) for x in out.stdout.split()]


def test_a_broker_process_freezes_its_heap_once_started(tmp_path: Path) -> None:
    before, at_start, code = run(tmp_path, "freeze")
    assert before == 0 and at_start > 10_000 and code == 0


def test_without_freeze_heap_nothing_is_frozen(tmp_path: Path) -> None:  # the control
    assert run(tmp_path, "shared") == [0, 0, 0]
