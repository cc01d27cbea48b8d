"""``BrokerProcess`` and ``free_port`` for tests and benchmarks, under the import path they
have always used.  The launcher itself is library code: ``millrace.launcher.broker_process``.
"""

from millrace.launcher.broker_process import BrokerProcess, free_port

__all__ = ["BrokerProcess", "free_port"]
