"""The fault tests share the cluster tests' helpers (``cluster_support``)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration" / "cluster"))
