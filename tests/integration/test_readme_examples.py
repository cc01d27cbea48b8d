"""The README's examples, run as a reader would run them, against a broker this test starts
(issue 16 item 3: the library example used to poll once and print nothing).

Every fenced block of README.md is listed in ``BLOCKS`` by its first line: run here, or
not and why -- a new block fails the test until it is listed.  The text runs verbatim
except for the addresses: ``127.0.0.1:9092`` becomes the test broker's (and the Metrics
section's ``127.0.0.1:9644`` its HTTP listener), and the shell commands find it in
``$MILLRACE_BOOTSTRAP`` (as a user's would in the default ``localhost:9092``) -- and the
test's schema registry in ``$MILLRACE_SCHEMA_REGISTRY`` (``localhost:8081``).  ``.venv/bin/millrace`` is a two-line script in the working
directory that runs this checkout's ``millrace``.  An example passes when it exits 0 and
prints something; the library example is also checked against the one it replaced
(which prints nothing while the group forms: the negative control).

The broker runs with config/server.properties' ``group.initial.rebalance.delay.ms``
(3 s, Kafka's default), not the test harness's 0, so a group forms as slowly as it does
for a reader.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from millrace.testing.broker_process import BrokerProcess
from millrace.testing.schema_registry import SchemaRegistryProcess

pytestmark = [pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
README_ADDRESS = "127.0.0.1:9092"
README_HTTP_ADDRESS = "127.0.0.1:9644"  # http.listeners in the Metrics section

RUN = "run"
SECURED = "needs the README's secured broker: tests/integration/test_readme_security.py"
# first line of a block -> RUN, or why it is not run here
BLOCKS: dict[str, str] = {
    "bash scripts/demo.sh": "the two commands: scripts/test.sh runs this test, and "
                            "tests/integration/spark/test_demo.py runs the demo",
    ".venv/bin/millrace broker --config": RUN,  # its kcat line; the broker is the test's
    ".venv/bin/millrace topics create --topic orders --partitions 3": RUN,
    "import time": RUN,  # the library example
    "from millrace.client.producer import KafkaProducer, ProducerRecord": RUN,  # transactions
    "printf 'debit 7": RUN,  # the transactions tools
    ".venv/bin/millrace cluster up": "runs ZooKeeper and brokers in the foreground "
                                     "(tests/integration/test_cluster_up.py)",
    "# unique per broker": "a server.properties fragment, not a command",
    ".venv/bin/millrace console --bootstrap-server": "serves the web console in the "
                                                      "foreground (tests/integration/"
                                                      "cluster/test_console_*.py)",
    ".venv/bin/millrace cluster describe": "needs a three-broker cluster "
                                           "(tests/integration/cluster)",
    "sudo scripts/faults.sh": "the fault harness's long profile (tests/faults runs the "
                              "short one)",
    "from millrace.spark import local_session": RUN,  # with Spark: test_spark_example
    ".venv/bin/millrace pipeline run": "Spark and JSON order events: the demo runs this "
                                       "pipeline (tests/integration/spark/test_demo.py)",
    "curl -s http://127.0.0.1:9644/metrics": RUN,  # the test broker's HTTP listener
    # its first line runs the registry in the foreground: the test's is in the environment
    ".venv/bin/millrace schema-registry --bootstrap-server": RUN,
    ".venv/bin/millrace spark up --workers 2": "a Spark cluster in the foreground and the "
                                               "pipeline on it (tests/integration/"
                                               "test_spark_up.py, spark/test_cluster_*.py)",
    "SPARK_HOME=$(.venv/bin/python -c": "spark-submit on a standalone cluster "
                                        "(tests/integration/spark/test_cluster_submit.py)",
    # Security: a secured broker of its own, tests/integration/test_readme_security.py
    "# in one terminal": "cluster up in the foreground, the secured demo "
                         "(tests/integration/test_cluster_up.py, spark/test_demo_cluster.py)",
    "openssl req -x509": SECURED,
    "# applications on CLIENT": SECURED,
    ".venv/bin/millrace configs --zookeeper": SECURED,
    "security.protocol=SASL_SSL": SECURED,
    ".venv/bin/millrace topics create --topic payments": SECURED,
    "from millrace.client.consumer import KafkaConsumer": SECURED,
    "import asyncio": SECURED,
    "# the same options for spark.readStream": SECURED,
}
# in a block that runs, the lines that start a broker or a schema registry (this test
# started one of each; $MILLRACE_SCHEMA_REGISTRY names the registry)
NOT_RUN_LINES = re.compile(r"^\.venv/bin/millrace (broker|schema-registry) ")
COMMAND_TIMEOUT_S = 120

# the README's library example before issue 16: one poll, which returns nothing while
# the consumer joins its group
OLD_LIBRARY_EXAMPLE = """\
from millrace.client.producer import KafkaProducer, ProducerRecord
from millrace.client.consumer import KafkaConsumer

with KafkaProducer({"bootstrap.servers": "127.0.0.1:9092"}) as p:
    p.send(ProducerRecord("orders", b"value", key=b"k")).get(10)
c = KafkaConsumer("orders", bootstrap_servers="127.0.0.1:9092", group_id="billing-old",
                  auto_offset_reset="earliest")
for record in c.poll(1000):
    print(record.offset, record.value)
c.close()
"""


@dataclass
class Block:
    language: str
    text: str
    line: int  # in README.md, of the opening fence

    @property
    def key(self) -> str:
        first = self.text.splitlines()[0]
        matches = [k for k in BLOCKS if first.startswith(k)]
        assert len(matches) == 1, (f"README.md:{self.line}: list this block in BLOCKS "
                                   f"(run it, or say why not): {first!r}")
        return matches[0]

    def commands(self) -> list[str]:
        """Shell commands, a line each (continuation lines joined)."""
        return [c for c in self.text.replace("\\\n", " ").splitlines() if c.strip()]


def readme_blocks() -> list[Block]:
    text = README.read_text()
    return [Block(m.group(1), m.group(2), text.count("\n", 0, m.start()) + 1)
            for m in re.finditer(r"^```(\w*)\n(.*?)^```$", text, re.S | re.M)]


def runs(block: Block) -> bool:
    return BLOCKS[block.key] == RUN


@dataclass
class Reader:
    """A working directory with ``.venv/bin/millrace`` and the environment to run in."""

    cwd: Path
    env: dict[str, str]
    address: str
    http_address: str

    def sh(self, command: str) -> subprocess.CompletedProcess[str]:
        return self._run(["bash", "-c", command.replace(README_ADDRESS, self.address)
                          .replace(README_HTTP_ADDRESS, self.http_address)])

    def python(self, code: str) -> subprocess.CompletedProcess[str]:
        code = (code.replace(README_ADDRESS, self.address)
                .replace('"/tmp/ck"', repr(str(self.cwd / "ck"))))
        return self._run([sys.executable, "-c", code])

    def _run(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        """An example that hangs is a failure like any other (exit -1), not the end of
        the test."""
        try:
            return subprocess.run(argv, cwd=self.cwd, env=self.env, capture_output=True,
                                  text=True, timeout=COMMAND_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(
                argv, -1, "", f"still running after {COMMAND_TIMEOUT_S} s (killed)")


def did_what_it_claims(what: str, proc: subprocess.CompletedProcess[str]) -> str | None:
    """None when the example exited 0 and printed something, else what went wrong."""
    if proc.returncode != 0:
        return f"{what}: exit {proc.returncode}\n{proc.stdout}{proc.stderr}"
    if not (proc.stdout.strip() or proc.stderr.strip()):
        return f"{what}: printed nothing"
    return None


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Reader]:
    home = tmp_path_factory.mktemp("reader")
    bin_dir = home / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    millrace = bin_dir / "millrace"
    millrace.write_text(f'#!/bin/sh\nexec {sys.executable} -m millrace.cli.main "$@"\n')
    millrace.chmod(0o755)
    with BrokerProcess(tmp_path_factory.mktemp("broker"), http=True,
                       overrides={"group.initial.rebalance.delay.ms": "3000"}) as broker, \
            SchemaRegistryProcess(broker.bootstrap, tmp_path_factory.mktemp("registry")
                                  ) as registry:
        env = {**os.environ, "MILLRACE_BOOTSTRAP": broker.bootstrap,
               "MILLRACE_SCHEMA_REGISTRY": registry.url,
               "PYTHONPATH": os.pathsep.join(
                   p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
        assert broker.http_url is not None
        yield Reader(home, env, broker.bootstrap, broker.http_url.removeprefix("http://"))


def test_every_block_is_listed() -> None:
    blocks = readme_blocks()
    assert len(blocks) >= len(BLOCKS)
    keys = [block.key for block in blocks]
    assert sorted(set(keys)) == sorted(BLOCKS), "BLOCKS names a block README.md lost"
    assert {b.language for b in blocks if runs(b)} == {"sh", "python"}


def test_the_shell_and_library_examples(reader: Reader) -> None:
    """In README order: the tools make the topic and the group the library example reads."""
    failures: list[str] = []
    ran = 0
    for block in readme_blocks():
        if not runs(block) or block.key.startswith("from millrace.spark"):
            continue
        if block.language == "python":
            proc = reader.python(block.text)
            problem = did_what_it_claims(f"README.md:{block.line} python", proc)
            if problem is None and block.key == "import time":
                # the records it printed: "partition offset key value"
                assert re.search(r"^\d+ \d+ ", proc.stdout, re.M), proc.stdout
            failures += [problem] if problem else []
            ran += 1
            continue
        for command in block.commands():
            if NOT_RUN_LINES.match(command):
                continue
            if command.startswith("kcat") and shutil.which("kcat") is None:
                continue
            problem = did_what_it_claims(f"README.md:{block.line} $ {command}",
                                         reader.sh(command))
            failures += [problem] if problem else []
            ran += 1
    assert ran >= 10
    assert not failures, "\n\n".join(failures)


def test_the_old_library_example_is_caught(reader: Reader) -> None:
    """The negative control: the example issue 16 replaced prints nothing, and the check
    above says so."""
    problem = did_what_it_claims("old example", reader.python(OLD_LIBRARY_EXAMPLE))
    assert problem == "old example: printed nothing"


@pytest.mark.slow
def test_the_spark_example(reader: Reader) -> None:
    pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("Spark needs Java")
    (block,) = [b for b in readme_blocks() if b.key.startswith("from millrace.spark")]
    # a topic of its own would change the text: give 'orders' records if it has none
    seed = reader.sh("seq 1 5 | .venv/bin/millrace produce --topic orders")
    assert seed.returncode == 0, seed.stderr
    proc = reader.python(block.text)
    assert did_what_it_claims(f"README.md:{block.line} python", proc) is None, proc.stderr
    copied = re.search(r"^(\d+) records copied to orders-upper$", proc.stdout, re.M)
    assert copied and int(copied.group(1)) >= 5, proc.stdout
    upper = reader.sh(".venv/bin/millrace consume --topic orders-upper --from-beginning "
                      "--max-messages 5")
    assert upper.returncode == 0, upper.stderr
    assert len(upper.stdout.splitlines()) == 5
