"""``millrace produce --transactional-id``: when it begins, commits and aborts (a fake
producer records the calls)."""

from __future__ import annotations

from typing import Any

import pytest

from millrace.cli.common import CommandError
from millrace.cli.console import _Transactions
from millrace.common.errors import KafkaError, ProducerFencedError


class FakeProducer:
    def __init__(self, fail_on: dict[str, Exception] | None = None) -> None:
        self.calls: list[str] = []
        self.fail_on = fail_on or {}

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any) -> None:
            self.calls.append(name)
            if name in self.fail_on:
                raise self.fail_on.pop(name)
        return call


def run(producer: FakeProducer, records: int, size: int, txn_id: str | None = "tx") -> None:
    with _Transactions(producer, txn_id, size) as txn:
        for _ in range(records):
            txn.before_send()
            producer.send()
            txn.after_send()
        txn.commit()


def test_whole_input_in_one_transaction() -> None:
    producer = FakeProducer()
    run(producer, 3, 0)
    assert producer.calls == ["init_transactions", "begin_transaction", "send", "send", "send",
                              "commit_transaction"]


def test_commit_every_n_records() -> None:
    producer = FakeProducer()
    run(producer, 5, 2)
    assert producer.calls == ["init_transactions", "begin_transaction", "send", "send",
                              "commit_transaction", "begin_transaction", "send", "send",
                              "commit_transaction", "begin_transaction", "send",
                              "commit_transaction"]


def test_without_a_transactional_id_nothing_happens() -> None:
    producer = FakeProducer()
    run(producer, 2, 0, txn_id=None)
    assert producer.calls == ["send", "send"]


def test_a_failed_commit_aborts() -> None:
    producer = FakeProducer({"commit_transaction": KafkaError("boom")})
    with pytest.raises(CommandError, match=r"transaction failed: .*boom"):
        run(producer, 1, 0)
    assert producer.calls[-2:] == ["commit_transaction", "abort_transaction"]


def test_an_error_while_sending_aborts() -> None:
    producer = FakeProducer({"send": ValueError("bad line")})
    with pytest.raises(ValueError, match="bad line"):
        run(producer, 2, 0)
    assert producer.calls == ["init_transactions", "begin_transaction", "send",
                              "abort_transaction"]


def test_fenced_is_one_clear_line_and_no_abort() -> None:
    producer = FakeProducer({"commit_transaction": ProducerFencedError("fenced")})
    with pytest.raises(CommandError) as e:
        run(producer, 1, 0)
    assert str(e.value) == "producer fenced: another producer with transactional id 'tx' took over"
    assert "abort_transaction" not in producer.calls
