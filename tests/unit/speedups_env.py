"""What the C accelerators' tests ask of the environment: whether they are switched off,
whether they could have been built, and a child interpreter with them switched off."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig


def speedups_disabled() -> bool:
    """``MILLRACE_NO_SPEEDUPS`` set to anything but "" or "0" (as the extensions read it)."""
    return os.environ.get("MILLRACE_NO_SPEEDUPS", "") not in ("", "0")


def compiler_available() -> bool:
    """The C compiler the extensions are built with is installed."""
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    return shutil.which(cc) is not None


def run_without_speedups(code: str) -> str:
    """The standard output of ``python -c code`` with ``MILLRACE_NO_SPEEDUPS=1``."""
    env = {**os.environ, "MILLRACE_NO_SPEEDUPS": "1"}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, check=True).stdout
