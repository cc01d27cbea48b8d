"""KIP-890 part 1 in the log: the VerificationGuard a leader takes before asking the
transaction coordinator, and the append that needs it (Kafka's ``VerificationGuardTest``
and the verification cases of ``UnifiedLogTest``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from millrace.common.errors import InvalidTxnStateError
from millrace.record.control import build_end_txn_marker
from millrace.storage import AppendOrigin
from tests.unit.storage.storagegen import T0, batch, open_log


def txn(pid: int, seq: int, epoch: int = 0) -> bytes:
    return batch(1, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                 is_transactional=True)


def test_first_batch_needs_the_current_guard(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    guard = log.maybe_start_transaction_verification(1)
    assert guard is not None
    assert log.maybe_start_transaction_verification(1) is guard   # one per producer
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(txn(1, 0), 0, require_verification=True)
    assert log.log_end_offset == 0
    info = log.append_as_leader(txn(1, 0), 0, verification_guard=guard,
                                require_verification=True)
    assert (info.first_offset, log.log_end_offset) == (0, 1)
    # the transaction is open here: no guard needed, none handed out
    assert log.producer_state_manager.verification_guard(1) is None
    assert log.maybe_start_transaction_verification(1) is None
    log.append_as_leader(txn(1, 1), 0, require_verification=True)
    assert log.log_end_offset == 2


def test_marker_between_verification_and_append_refuses_it(tmp_path: Path) -> None:
    """The ABA case: verified, then the transaction ends; the stale 'yes' must not open
    a transaction nobody will close."""
    log = open_log(tmp_path)
    log.append_as_leader(txn(1, 0), 0)
    log.append_as_leader(build_end_txn_marker(1, 0, False, 0, T0), 0,
                         origin=AppendOrigin.COORDINATOR)
    guard = log.maybe_start_transaction_verification(1)
    assert guard is not None
    log.append_as_leader(build_end_txn_marker(1, 1, False, 0, T0), 0,
                         origin=AppendOrigin.COORDINATOR)   # e.g. a timeout abort, epoch 1
    assert log.producer_state_manager.verification_guard(1) is None
    end = log.log_end_offset
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(txn(1, 1), 0, verification_guard=guard,
                             require_verification=True)
    assert log.log_end_offset == end
    log.update_high_watermark(end)
    assert (log.first_unstable_offset, log.last_stable_offset) == (None, end)


def test_without_verification_anything_transactional_is_taken(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(txn(1, 0), 0)
    assert log.first_unstable_offset == 0
