"""``BrokerHttp``: the client side of a millrace broker's HTTP listener.

A millrace broker serves JSON views on its ``http.listeners`` beside ``/metrics``: a
group coordinator's view of a group's lag, Burrow status and rebalance history at
``/v1/consumer-groups/<group>`` (``millrace.broker.metrics.lag_http``).  This finds a
broker's listeners with DescribeConfigs (``http.listeners``; a wildcard host is the
broker's Kafka host, an ephemeral port cannot be told) and GETs the view, with the
client's SASL user name and password as HTTP basic credentials when it has them and its
CA (``ssl.ca.location``) for an ``https://`` listener.  Any other Kafka broker has no
such listener: every way of having no view raises ``BrokerHttpUnavailable`` saying why,
and the caller goes on without it (``millrace groups describe``, the console).

Thread ownership: one instance per thread (the admin client it uses has its own lock).
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from millrace.client.admin.types import ConfigResource, ConfigResourceType
from millrace.common.errors import KafkaError, MillraceError

if TYPE_CHECKING:
    from millrace.client.admin.kafka_admin_client import KafkaAdminClient
    from millrace.client.admin.types import ConsumerGroupDescription

GROUPS_PATH = "/v1/consumer-groups/"
DEFAULT_TIMEOUT_S = 5.0


class BrokerHttpUnavailable(Exception):
    """Why a broker's HTTP view could not be read."""


class BrokerHttpDenied(BrokerHttpUnavailable):
    """The broker's HTTP listener refused the user (403): its authorizer said no."""


class BrokerHttp:
    """Each broker's listeners are asked for once (module docstring)."""

    def __init__(self, admin: KafkaAdminClient, configs: Mapping[str, Any],
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self._admin = admin
        self._configs = configs
        self._timeout_s = timeout_s
        self._urls: dict[int, list[str] | str] = {}   # broker id -> base URLs, or why none
        self._denied: set[int] = set()   # brokers whose configs the authorizer refused

    def group_view(self, group: ConsumerGroupDescription) -> dict[str, Any]:
        """The coordinator's ``/v1/consumer-groups/<group>`` view."""
        coordinator = group.coordinator
        if coordinator is None:
            raise BrokerHttpUnavailable("the group's coordinator is not known")
        return self.get(coordinator.id, coordinator.host,
                        GROUPS_PATH + quote(group.group_id, safe=""))

    def get(self, broker: int, kafka_host: str, path: str) -> dict[str, Any]:
        """``path`` from the broker's first listener that answers."""
        return self._call(broker, kafka_host, path, None)

    def post(self, broker: int, kafka_host: str, path: str,
             body: Mapping[str, Any]) -> dict[str, Any]:
        """POST ``body`` as JSON to ``path`` on the broker's first listener that answers."""
        return self._call(broker, kafka_host, path, json.dumps(body).encode())

    def _call(self, broker: int, kafka_host: str, path: str, data: bytes | None
              ) -> dict[str, Any]:
        urls = self.listener_urls(broker, kafka_host)
        if isinstance(urls, str):
            raise (BrokerHttpDenied if broker in self._denied else BrokerHttpUnavailable)(urls)
        failure: BrokerHttpUnavailable | None = None
        for base in urls:
            try:
                return self._request(base + path, data)
            except BrokerHttpDenied as e:   # another listener would say the same
                raise BrokerHttpDenied(f"broker {broker} ({base}): {e}") from None
            except BrokerHttpUnavailable as e:
                failure = BrokerHttpUnavailable(f"broker {broker} ({base}): {e}")
        assert failure is not None  # listener_urls gives at least one
        raise failure

    def listener_urls(self, broker: int, kafka_host: str) -> list[str] | str:
        """The broker's HTTP listeners as base URLs, http ones first; or why it has none."""
        known = self._urls.get(broker)
        if known is not None:
            return known
        resource = ConfigResource(ConfigResourceType.BROKER, str(broker))
        try:
            config = self._admin.describe_configs([resource])[resource].result()
        except MillraceError as e:
            found: list[str] | str = f"broker {broker}'s configs not read: {_one_line(e)}"
            if isinstance(e, KafkaError) and e.name.endswith("AUTHORIZATION_FAILED"):
                self._denied.add(broker)
        else:
            entry = config.get("http.listeners")
            if entry is None:
                found = f"broker {broker} has no http.listeners config (an older broker?)"
            else:
                found = base_urls(broker, entry.value or "", kafka_host)
        self._urls[broker] = found
        return found

    def _request(self, url: str, data: bytes | None) -> dict[str, Any]:
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(url, data=data, headers=headers)
        credentials = basic_credentials(self._configs)
        if credentials is not None:
            token = base64.b64encode(f"{credentials[0]}:{credentials[1]}".encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        context = None
        if url.startswith("https:"):
            context = ssl.create_default_context(cafile=self._configs.get("ssl.ca.location"))
        try:
            with urllib.request.urlopen(request, timeout=self._timeout_s,
                                        context=context) as response:
                view: dict[str, Any] = json.loads(response.read())
                return view
        except urllib.error.HTTPError as e:
            if e.code == 401:
                raise BrokerHttpUnavailable("the HTTP listener asks for credentials (give "
                                            "sasl.username and sasl.password)") from None
            body = e.read()
            try:
                detail = json.loads(body).get("error") or e.reason
            except (ValueError, AttributeError):
                detail = body.decode(errors="replace").strip()[:200] or e.reason
            if e.code == 403:
                raise BrokerHttpDenied(f"HTTP 403: {detail}") from None
            raise BrokerHttpUnavailable(f"HTTP {e.code}: {detail}") from None
        except (urllib.error.URLError, OSError, ValueError) as e:
            why = e.reason if isinstance(e, urllib.error.URLError) else e
            raise BrokerHttpUnavailable(f"not reachable: {why}") from None


def base_urls(broker: int, value: str, kafka_host: str) -> list[str] | str:
    specs = [s.strip() for s in value.split(",") if s.strip()]
    if not specs:
        return f"broker {broker} has no HTTP listener (http.listeners is empty)"
    urls = []
    for spec in specs:
        parts = urlsplit(spec)
        if parts.port == 0:
            continue        # an ephemeral port: its real number is not in the config
        host = parts.hostname or ""
        if host in ("", "0.0.0.0", "::"):
            host = kafka_host
        if ":" in host:
            host = f"[{host}]"
        urls.append(f"{parts.scheme}://{host}:{parts.port}")
    if not urls:
        return (f"broker {broker}'s HTTP listener is on an ephemeral port "
                f"(http.listeners={value}), which its configs do not tell")
    return sorted(urls, key=lambda u: not u.startswith("http:"))


def basic_credentials(configs: Mapping[str, Any]) -> tuple[str, str] | None:
    """The client's SASL user and password (``sasl.username``/``sasl.password``, or the
    ``sasl.jaas.config`` options), which the broker also accepts over HTTP basic."""
    username, password = configs.get("sasl.username"), configs.get("sasl.password")
    jaas = configs.get("sasl.jaas.config")
    if jaas and (username is None or password is None):
        from millrace.security.jaas import parse_jaas_config

        try:
            options = parse_jaas_config(jaas).options
        except MillraceError:
            options = {}
        username = username if username is not None else options.get("username")
        password = password if password is not None else options.get("password")
    if username is None or password is None:
        return None
    return str(username), str(password)


def _one_line(error: MillraceError) -> str:
    if isinstance(error, KafkaError):
        text = error.name if error.message == error.name else f"{error.name}: {error.message}"
    else:
        text = str(error) or type(error).__name__
    return " ".join(text.split())
