"""create_network_client: each client's connection settings reach its NetworkClient."""

from __future__ import annotations

from typing import Any

import pytest

from millrace.client import client_utils
from millrace.client.api_versions import ApiVersions
from millrace.client.metadata import Metadata
from millrace.client.producer.config import ProducerConfig
from millrace.common.time import MockTime


def test_every_connection_setting_reaches_the_network_client(
        monkeypatch: pytest.MonkeyPatch) -> None:
    built: dict[str, Any] = {}

    def record(metadata: Metadata, **kwargs: Any) -> str:
        built.update(kwargs, metadata=metadata)
        return "client"

    monkeypatch.setattr(client_utils, "NetworkClient", record)
    settings = {"reconnect.backoff.ms": 11, "reconnect.backoff.max.ms": 12,
                "request.timeout.ms": 13, "socket.connection.setup.timeout.ms": 14,
                "socket.connection.setup.timeout.max.ms": 15, "send.buffer.bytes": 16,
                "receive.buffer.bytes": 17}
    values = ProducerConfig({"bootstrap.servers": "h:1", **settings}).values
    metadata, time, selector, api_versions = Metadata(), MockTime(), object(), ApiVersions()
    client = client_utils.create_network_client(
        values, metadata, client_id="me", max_in_flight_requests_per_connection=3, time=time,
        selector=selector, api_versions=api_versions)  # type: ignore[arg-type]
    assert client == "client"
    assert built == {
        "metadata": metadata, "selector": selector, "client_id": "me",
        "max_in_flight_requests_per_connection": 3, "time": time,
        "reconnect_backoff_ms": 11, "reconnect_backoff_max_ms": 12, "request_timeout_ms": 13,
        "connection_setup_timeout_ms": 14, "connection_setup_timeout_max_ms": 15,
        "send_buffer_bytes": 16, "receive_buffer_bytes": 17, "api_versions": api_versions,
        "sasl": None}
