"""A transactional confluent-kafka producer in a process of its own, driven one command
per stdin line so that a test can stop it (SIGSTOP), resume it or kill it between steps:

    python txn_producer_process.py BOOTSTRAP TRANSACTIONAL_ID TIMEOUT_MS

Commands: ``init``, ``begin``, ``produce TOPIC PARTITION VALUE``, ``flush``, ``commit``,
``abort``.  Each is answered by one JSON line: ``{"ok": true}`` or ``{"ok": false,
"fatal": ..., "abortable": ..., "error": "..."}``.
"""

from __future__ import annotations

import json
import sys

from confluent_kafka import KafkaError, KafkaException, Producer


def main() -> int:
    bootstrap, tid, timeout_ms = sys.argv[1], sys.argv[2], int(sys.argv[3])
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid,
                         "transaction.timeout.ms": timeout_ms, "log_level": 0})
    for line in sys.stdin:
        words = line.split()
        try:
            if words[0] == "init":
                producer.init_transactions(60)
            elif words[0] == "begin":
                producer.begin_transaction()
            elif words[0] == "produce":
                producer.produce(words[1], words[3].encode(), partition=int(words[2]))
            elif words[0] == "flush":
                if producer.flush(30) != 0:
                    raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "flush"))
            elif words[0] == "commit":
                producer.commit_transaction(30)
            elif words[0] == "abort":
                producer.abort_transaction(30)
            answer: dict[str, object] = {"ok": True}
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            answer = {"ok": False, "fatal": err.fatal(), "abortable": err.txn_requires_abort(),
                      "error": str(err)}
        print(json.dumps(answer), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
