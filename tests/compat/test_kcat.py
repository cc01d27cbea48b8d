"""kcat (librdkafka's command-line client, Debian package) against our broker."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from millrace.testing.broker_process import BrokerProcess

pytestmark = [pytest.mark.compat, pytest.mark.integration]

KCAT = shutil.which("kcat") or shutil.which("kafkacat")


def _kcat(*args: str, input: bytes | None = None, timeout: float = 60) -> str:
    if KCAT is None:
        pytest.fail("kcat is not installed: scripts/test.sh installs Debian's kcat package")
    proc = subprocess.run([KCAT, *args], input=input, capture_output=True, timeout=timeout,
                          check=False)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return proc.stdout.decode()


def test_kcat_metadata_produce_consume(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    lines = "".join(f"key{i}:line {i}\n" for i in range(20)).encode()
    _kcat("-b", b, "-t", "kcat-topic", "-P", "-K:", "-z", "snappy", input=lines)
    listing = _kcat("-b", b, "-L", "-t", "kcat-topic")
    assert "topic \"kcat-topic\" with 1 partitions" in listing
    assert "leader 0" in listing
    out = _kcat("-b", b, "-t", "kcat-topic", "-C", "-e", "-o", "beginning",
                "-f", "%k=%s@%o\n")
    assert out.splitlines() == [f"key{i}=line {i}@{i}" for i in range(20)]


def test_kcat_balanced_consumer_group(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    _kcat("-b", b, "-t", "kcat-group", "-P", input=b"a\nb\nc\n")
    out = _kcat("-b", b, "-G", "kcat-g", "kcat-group", "-X", "auto.offset.reset=earliest",
                "-c", "3", "-f", "%s\n", "-e")
    assert sorted(out.split()) == ["a", "b", "c"]
