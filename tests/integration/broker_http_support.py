"""What the tests of a broker's HTTP listener share: a urllib client that returns the
status of a refusal instead of raising, basic credentials, polling, and a broker with
``http.authentication.method=BASIC`` and the ACL authorizer (its SASL listener's PLAIN
users, ``admin`` the super user)."""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from millrace.testing.broker_process import BrokerProcess

T = TypeVar("T")
PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret"}
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-secret" '
        + " ".join(f'user_{u}="{p}"' for u, p in PASSWORDS.items()) + ";")


class Reply:
    def __init__(self, status: int, headers: Any, body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body

    @property
    def text(self) -> str:
        return self.body.decode()

    def json(self) -> Any:
        return json.loads(self.body)


def http(url: str, *, method: str = "GET", headers: dict[str, str] | None = None,
         data: bytes | None = None) -> Reply:
    request = urllib.request.Request(url, method=method, headers=headers or {}, data=data)
    try:
        with urllib.request.urlopen(request, timeout=15) as r:
            return Reply(r.status, r.headers, r.read())
    except urllib.error.HTTPError as e:
        return Reply(e.code, e.headers, e.read())


def post(url: str, body: object, headers: dict[str, str] | None = None) -> Reply:
    return http(url, method="POST", data=json.dumps(body).encode(),
                headers={"Content-Type": "application/json", **(headers or {})})


def basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def poll(check: Callable[[], T | None], what: str, timeout_s: float = 30.0) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@contextmanager
def secured_broker(data: Path, mechanisms: str = "PLAIN",
                   secrets: tuple[str, ...] = ()) -> Iterator[BrokerProcess]:
    """The broker, stopped cleanly at the end with no traceback and no password (nor any
    of ``secrets``) in its logs."""
    overrides = {
        "http.listeners": "http://127.0.0.1:0",
        "http.authentication.method": "BASIC",
        "security.inter.broker.protocol": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": mechanisms,
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
        "offsets.topic.replication.factor": "1",
    }
    with BrokerProcess(data, listener_protocol="SASL_PLAINTEXT", overrides=overrides) as b:
        yield b
    assert b.proc is not None and b.proc.returncode == 0, b.logs()[-5000:]
    logs = b.logs()
    assert "Traceback" not in logs
    for secret in (*PASSWORDS.values(), *secrets):
        assert secret not in logs


def admin_config(broker: BrokerProcess, user: str = "admin") -> dict[str, Any]:
    return {"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user,
            "sasl.password": PASSWORDS[user], "default.api.timeout.ms": 20_000}
