"""``AdminNetwork.call_keys``, the per-key retry loop under ``by_leader`` and
DescribeTransactions, driven with ``MockTime`` (no sockets): only the keys a round names
go round again, after a backoff; a key still pending at the deadline fails with
``KafkaTimeoutError`` and its last error while the others keep their answers."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from millrace.client.admin.results import AdminResult
from millrace.client.errors import KafkaTimeoutError
from millrace.common.errors import Errors, KafkaError, NotCoordinatorError, for_code
from tests.unit.client.admin.scripted_network import ScriptedNetwork

NOT_COORDINATOR = for_code(Errors.NOT_COORDINATOR)("moved")


def test_only_the_named_keys_are_retried_and_the_result_keeps_the_keys_order() -> None:
    net = ScriptedNetwork({})
    rounds: list[tuple[list[str], int]] = []

    def attempt(pending: list[str]) -> tuple[Mapping[str, int | BaseException], list[str]]:
        rounds.append((pending, net.now()))
        if len(rounds) == 1:
            return {"a": NOT_COORDINATOR, "b": 2, "c": NOT_COORDINATOR}, ["c", "a"]
        return {key: ord(key) for key in pending}, []

    started = net.now()
    result = net.call_keys(["a", "b", "c"], started + 10_000, attempt, lambda k: k)
    assert rounds == [(["a", "b", "c"], started), (["c", "a"], started + net.retry_backoff_ms)]
    assert list(result) == ["a", "b", "c"]
    assert result.all() == {"a": ord("a"), "b": 2, "c": ord("c")}


def test_a_key_still_pending_at_the_deadline_times_out_with_its_last_error() -> None:
    net = ScriptedNetwork({})
    calls = 0

    def attempt(pending: list[str]) -> tuple[Mapping[str, int | BaseException], list[str]]:
        nonlocal calls
        calls += 1
        return {"a": NOT_COORDINATOR, "b": 1}, ["a"]

    deadline = net.now() + 3 * net.retry_backoff_ms
    result = net.call_keys(["a", "b"], deadline, attempt, lambda k: f"describing '{k}'")
    assert calls == 3  # at 0, 100 and 200 ms; a backoff from 200 would reach the deadline
    with pytest.raises(KafkaTimeoutError, match=r"describing 'a': timed out; last error: "
                                                 r".*moved"):
        result["a"].result()
    assert not isinstance(result["a"].exception(), NotCoordinatorError)
    assert result["b"].result() == 1


def test_no_keys_is_no_round() -> None:
    def attempt(pending: list[str]) -> tuple[Mapping[str, int | BaseException], list[str]]:
        raise AssertionError("called without keys")

    assert ScriptedNetwork({}).call_keys([], 0, attempt, str) == {}


def test_set_outcomes_sets_a_value_or_an_error_per_key_in_the_keys_order() -> None:
    error = KafkaError("boom")
    result: AdminResult[str, int] = AdminResult()
    result.set_outcomes(["b", "a"], {"a": error, "b": 1, "c": 3})
    assert list(result) == ["b", "a"]
    assert result["b"].result() == 1
    assert result["a"].exception() is error
