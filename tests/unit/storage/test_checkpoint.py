from __future__ import annotations

import os
from pathlib import Path

import pytest

from millrace.storage import CorruptCheckpointError, OffsetCheckpointFile


def test_round_trip_and_kafka_text_format(tmp_path: Path) -> None:
    f = OffsetCheckpointFile(str(tmp_path / "recovery-point-offset-checkpoint"))
    f.write({("orders", 1): 98, ("orders", 0): 1234, ("__consumer_offsets", 7): 0})
    text = (tmp_path / "recovery-point-offset-checkpoint").read_text()
    assert text == "0\n3\n__consumer_offsets 7 0\norders 0 1234\norders 1 98\n"
    assert f.read() == {("orders", 1): 98, ("orders", 0): 1234, ("__consumer_offsets", 7): 0}
    assert os.listdir(tmp_path) == ["recovery-point-offset-checkpoint"]  # no .tmp left


def test_missing_file_reads_empty_and_empty_map_writes(tmp_path: Path) -> None:
    f = OffsetCheckpointFile(str(tmp_path / "x"))
    assert f.read() == {}
    f.write({})
    assert (tmp_path / "x").read_text() == "0\n0\n"
    assert f.read() == {}


def test_rewrite_replaces_content(tmp_path: Path) -> None:
    f = OffsetCheckpointFile(str(tmp_path / "x"))
    f.write({("a", 0): 1, ("b", 0): 2})
    f.write({("a", 0): 5})
    assert f.read() == {("a", 0): 5}


@pytest.mark.parametrize("text", [
    "", "0\n", "1\n0\n", "0\n2\na 0 1\n", "0\n1\na 0\n", "0\n1\na x 1\n", "zero\n0\n",
    "0\n1\na 0 1 2\n",
])
def test_malformed_files_raise(tmp_path: Path, text: str) -> None:
    (tmp_path / "x").write_text(text)
    with pytest.raises(CorruptCheckpointError):
        OffsetCheckpointFile(str(tmp_path / "x")).read()


def test_topic_names_that_cannot_be_written_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        OffsetCheckpointFile(str(tmp_path / "x")).write({("a b", 0): 1})
