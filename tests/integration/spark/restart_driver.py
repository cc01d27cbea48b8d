"""``millrace pipeline run`` with two test-only hooks, for the restart tests' drivers.

Run as ``python restart_driver.py <pipeline run arguments>``: the same CLI entry point as
``millrace pipeline run``, with the hooks the environment asks for installed first on the
``Database`` class (so every connection the runner opens has them):

- ``MILLRACE_TEST_KILL_AFTER_BATCH=<k>``: the moment batch ``k``'s database transaction
  has committed, SIGKILL this process's whole group (the driver's Python, its JVM, Spark's
  Python workers) -- a ``kill -9`` at the worst instant for exactly-once, after the
  database has the batch and before Spark's commit log does, so the restarted driver must
  run batch ``k`` again over the same offsets.
- ``MILLRACE_TEST_UNGUARDED=1``: the negative control, a sink without the batch-id guard:
  before each batch's transaction the batch's records in ``millrace_batches`` are
  deleted, so a replayed batch is applied again instead of skipped.

Nothing of this exists in the package: it is test code, loaded only by this script.
Thread ownership: the hooks run on whichever thread calls ``Database.commit`` (a Spark
callback thread or the shared query's commit thread); they keep no state of their own.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterable
from typing import Any

from millrace.spark.sinks import BATCHES_TABLE, Database, SinkBatch

KILL_AFTER_BATCH = "MILLRACE_TEST_KILL_AFTER_BATCH"
UNGUARDED = "MILLRACE_TEST_UNGUARDED"


def install_hooks(environ: dict[str, str] | os._Environ[str]) -> None:
    kill_after = environ.get(KILL_AFTER_BATCH)
    unguarded = environ.get(UNGUARDED) == "1"
    if kill_after is None and not unguarded:
        return
    commit = Database.commit

    def hooked(self: Database, pipeline: str, query_id: str, batch_id: int,
               parts: Iterable[SinkBatch]) -> Any:
        if unguarded:
            p = self.placeholder
            self.query(f"DELETE FROM {BATCHES_TABLE} WHERE pipeline = {p} AND batch_id = {p}",
                       (pipeline, batch_id))
        outcome = commit(self, pipeline, query_id, batch_id, parts)
        if kill_after is not None and batch_id == int(kill_after):
            print(f"restart_driver: batch {batch_id} committed, kill -9 of group "
                  f"{os.getpgrp()}", file=sys.stderr, flush=True)
            os.killpg(os.getpgrp(), signal.SIGKILL)
        return outcome

    Database.commit = hooked  # type: ignore[method-assign]


def main() -> int:
    install_hooks(os.environ)
    from millrace.cli.main import main as cli

    return cli(["pipeline", "run", *sys.argv[1:]]) or 0


if __name__ == "__main__":
    sys.exit(main())
