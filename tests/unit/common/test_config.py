"""ConfigDef: what a configuration prints (secrets hidden)."""

from __future__ import annotations


def test_password_values_print_hidden() -> None:
    from millrace.client.admin.config import AdminClientConfig
    from millrace.common.config import HIDDEN, ConfigDef

    d = ConfigDef().define("user", "string", None, nullable=True).define(
        "secret", "password", None, nullable=True)
    assert d.redacted({"user": "alice", "secret": "s3cret"}) == {"user": "alice",
                                                                 "secret": HIDDEN}
    assert d.redacted({"secret": None}) == {"secret": None}
    shown = repr(AdminClientConfig({"bootstrap.servers": "h:1", "sasl.password": "s3cret",
                                    "sasl.jaas.config": 'x required password="s3cret";'}))
    assert "s3cret" not in shown and HIDDEN in shown
