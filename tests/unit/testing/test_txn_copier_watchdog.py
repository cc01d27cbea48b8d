"""The copier's CallWatchdog: a call that overruns its timeout by the grace ends the
process with EXIT_STALLED after reporting it; a call that returns in time leaves the
process alone.  Each case runs in a child process (the watchdog calls ``os._exit``)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from millrace.testing.txn_copier import EXIT_STALLED

CHILD = textwrap.dedent("""
    import json, sys, time
    from millrace.testing.txn_copier import CallWatchdog

    def report(event, **extra):
        print(json.dumps({"event": event, **extra}), flush=True)

    watchdog = CallWatchdog(report, grace_s=0.2)
    with watchdog.watch("quick", 0.5):
        time.sleep(0.05)
    report("after quick")
    with watchdog.watch("send_offsets_to_transaction", 0.1):
        time.sleep(float(sys.argv[1]))
    report("after slow")
""")


def run(sleep_s: float) -> tuple[int, list[dict[str, object]]]:
    done = subprocess.run([sys.executable, "-c", CHILD, str(sleep_s)], capture_output=True,
                          text=True, timeout=60)
    return done.returncode, [json.loads(line) for line in done.stdout.splitlines()]


def test_an_overrunning_call_ends_the_process_with_exit_stalled() -> None:
    code, events = run(30.0)
    assert code == EXIT_STALLED == 3
    assert [e["event"] for e in events] == ["after quick", "stalled"]
    stall = events[-1]
    assert stall["call"] == "send_offsets_to_transaction"
    assert stall["timeout_s"] == 0.1
    assert isinstance(stall["after_s"], float) and stall["after_s"] >= 0.3
    assert isinstance(stall["started"], float)


def test_calls_within_their_timeout_leave_the_process_alone() -> None:
    code, events = run(0.0)
    assert code == 0
    assert [e["event"] for e in events] == ["after quick", "after slow"]
