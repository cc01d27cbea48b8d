"""The environment ``scripts/bootstrap.sh`` builds: Spark's Python workers import pyspark
from site-packages (compiled bytecode), not from the source-only pyspark.zip that Spark
puts first on their PYTHONPATH."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

SITE = Path(sysconfig.get_paths()["purelib"])
ZIP = SITE / "pyspark" / "python" / "lib" / "pyspark.zip"


def imported_from(python_path: str) -> str:
    env = {**os.environ, "PYTHONPATH": python_path}
    return subprocess.run([sys.executable, "-c", "import pyspark; print(pyspark.__file__)"],
                          env=env, check=True, capture_output=True, text=True).stdout.strip()


def test_this_environments_pyspark_zip_goes_behind_site_packages() -> None:
    assert ZIP.is_file(), "pyspark ships its zip inside the package"
    assert imported_from(str(ZIP)) == str(SITE / "pyspark" / "__init__.py")


def test_another_spark_installs_zip_keeps_its_place(tmp_path: Path) -> None:
    other = tmp_path / "pyspark" / "python" / "lib" / "pyspark.zip"  # e.g. a cluster install
    other.parent.mkdir(parents=True)
    other.write_bytes(ZIP.read_bytes())
    assert imported_from(str(other)) == str(other / "pyspark" / "__init__.py")
