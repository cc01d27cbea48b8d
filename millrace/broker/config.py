"""Broker configuration: Kafka's ``server.properties`` names and defaults (``KafkaConfig``).

Unknown keys and bad values stop the broker at start-up with an error naming the key.
Keys that Kafka accepts but that mean nothing to a single embedded broker (thread
counts, socket buffer sizes, KRaft/ZooKeeper settings used by later milestones) are
accepted and recorded so that an existing Kafka properties file works unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from millrace.common.config import (
    INT_MAX,
    LONG_MAX,
    ConfigDef,
    at_least,
    between,
    one_of,
    parse_properties,
)
from millrace.common.errors import ConfigError

DAY_MS = 24 * 3600 * 1000

BROKER_CONFIG = (
    ConfigDef()
    .define("node.id", "int", -1, doc="this broker's id")
    .define("broker.id", "int", -1, doc="synonym of node.id")
    .define("listeners", "list", ["PLAINTEXT://:9092"])
    .define("advertised.listeners", "list", None, nullable=True)
    .define("listener.security.protocol.map", "string",
            "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL")
    .define("inter.broker.listener.name", "string", None, nullable=True)
    .define("security.inter.broker.protocol", "string", "PLAINTEXT",
            one_of("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"))
    .define("control.plane.listener.name", "string", None, nullable=True)
    # SASL (reference security.md 3.3); each may be listener- or mechanism-prefixed
    .define("sasl.enabled.mechanisms", "list", ["GSSAPI"])
    .define("sasl.mechanism.inter.broker.protocol", "string", "GSSAPI")
    .define("sasl.jaas.config", "password", None, nullable=True)
    .define("sasl.server.callback.handler.class", "string", None, nullable=True)
    .define("sasl.login.class", "string", None, nullable=True)
    .define("sasl.login.callback.handler.class", "string", None, nullable=True)
    .define("sasl.kerberos.service.name", "string", None, nullable=True)
    .define("connections.max.reauth.ms", "long", 0, at_least(0))
    .define("connection.failed.authentication.delay.ms", "int", 100, at_least(0))
    .define("sasl.server.max.receive.size", "int", 524288, at_least(1))
    .define("principal.builder.class", "string", None, nullable=True)
    # TLS (reference security.md 2.1); each may be listener-prefixed
    .define("ssl.keystore.type", "string", None, nullable=True,
            doc="PEM or PKCS12 (JKS is refused with how to convert it); unset: PKCS12 for "
                "a .p12/.pfx file, else PEM")
    .define("ssl.keystore.location", "string", None, nullable=True)
    .define("ssl.keystore.password", "password", None, nullable=True)
    .define("ssl.key.password", "password", None, nullable=True)
    .define("ssl.keystore.key", "password", None, nullable=True)
    .define("ssl.keystore.certificate.chain", "string", None, nullable=True)
    .define("ssl.truststore.type", "string", None, nullable=True)
    .define("ssl.truststore.location", "string", None, nullable=True)
    .define("ssl.truststore.password", "password", None, nullable=True)
    .define("ssl.truststore.certificates", "string", None, nullable=True)
    .define("ssl.protocol", "string", "TLSv1.3")
    .define("ssl.enabled.protocols", "list", ["TLSv1.2", "TLSv1.3"])
    .define("ssl.cipher.suites", "list", [])
    .define("ssl.client.auth", "string", "none", one_of("none", "requested", "required"))
    .define("ssl.endpoint.identification.algorithm", "string", "https")
    .define("ssl.principal.mapping.rules", "string", "DEFAULT")
    .define("ssl.keymanager.algorithm", "string", None, nullable=True)
    .define("ssl.trustmanager.algorithm", "string", None, nullable=True)
    .define("ssl.secure.random.implementation", "string", None, nullable=True)
    .define("ssl.provider", "string", None, nullable=True)
    .define("ssl.engine.factory.class", "string", None, nullable=True)
    .define("ssl.allow.dn.changes", "boolean", False)
    .define("ssl.allow.san.changes", "boolean", False)
    .define("log.dirs", "list", None, nullable=True)
    .define("log.dir", "string", "/tmp/kafka-logs")
    .define("num.partitions", "int", 1, at_least(1))
    .define("default.replication.factor", "int", 1, at_least(1))
    .define("auto.create.topics.enable", "boolean", True)
    .define("delete.topic.enable", "boolean", True)
    .define("log.segment.bytes", "int", 1024 * 1024 * 1024, at_least(14))
    .define("log.roll.ms", "long", None, nullable=True)
    .define("log.roll.hours", "int", 168, at_least(1))
    .define("log.retention.ms", "long", None, nullable=True)
    .define("log.retention.minutes", "int", None, nullable=True)
    .define("log.retention.hours", "int", 168)
    .define("log.retention.bytes", "long", -1)
    .define("log.retention.check.interval.ms", "long", 300_000, at_least(1))
    .define("log.cleanup.policy", "list", ["delete"], one_of("delete", "compact"))
    .define("log.cleaner.enable", "boolean", True)
    .define("log.cleaner.backoff.ms", "long", 15_000, at_least(0))
    .define("log.index.interval.bytes", "int", 4096, at_least(0))
    .define("log.index.size.max.bytes", "int", 10 * 1024 * 1024, at_least(4))
    .define("log.flush.interval.messages", "long", LONG_MAX, at_least(1))
    .define("log.flush.interval.ms", "long", None, nullable=True)
    .define("log.flush.scheduler.interval.ms", "long", LONG_MAX)
    .define("log.message.timestamp.type", "string", "CreateTime",
            one_of("CreateTime", "LogAppendTime"))
    .define("log.message.timestamp.before.max.ms", "long", LONG_MAX, at_least(0))
    .define("log.message.timestamp.after.max.ms", "long", 3_600_000, at_least(0))
    .define("compression.type", "string", "producer",
            one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"))
    .define("message.max.bytes", "int", 1048588, at_least(0))
    .define("socket.request.max.bytes", "int", 100 * 1024 * 1024, at_least(1))
    # SO_SNDBUF of each accepted socket, SO_RCVBUF of the listening sockets (accepted
    # ones inherit it); -1: the operating system's default and its autotuning.  The
    # receive default is -1, not Kafka's 102400: a fixed 100 KiB window makes this broker
    # read in smaller pieces, +75% CPU per MB of 1 KiB ingest (bench/README.md, "Socket
    # buffers"); Kafka's 100 KiB send buffer is kept (fetch was faster with it).
    .define("socket.send.buffer.bytes", "int", 102400, at_least(-1))
    .define("socket.receive.buffer.bytes", "int", -1, at_least(-1))
    .define("connections.max.idle.ms", "long", 600_000)
    # connection limits (reference security.md 7); max.connections and
    # max.connection.creation.rate may be listener-prefixed
    .define("max.connections", "int", INT_MAX, at_least(0))
    .define("max.connections.per.ip", "int", INT_MAX, at_least(0))
    .define("max.connections.per.ip.overrides", "string", "")
    .define("max.connection.creation.rate", "int", INT_MAX, at_least(0))
    # client quotas (reference security.md 7): the rate is measured over this many
    # samples of this many seconds each
    .define("quota.window.num", "int", 11, at_least(1),
            doc="samples kept by each client quota's rate")
    .define("quota.window.size.seconds", "int", 1, at_least(1),
            doc="seconds covered by one sample of a client quota's rate")
    # the ACL authorizer (reference security.md 4): "" = no authorization, as Kafka
    .define("authorizer.class.name", "string", "",
            one_of("", "kafka.security.authorizer.AclAuthorizer",
                   "org.apache.kafka.metadata.authorizer.StandardAuthorizer"),
            doc="the ACL authorizer under either of Kafka's names (ZooKeeper-mode "
                "AclAuthorizer, KRaft StandardAuthorizer); empty: every request allowed")
    .define("super.users", "string", None, nullable=True,
            doc="principals allowed everything, separated by ';' (User:admin;User:broker)")
    .define("allow.everyone.if.no.acl.found", "boolean", False)
    # the HTTP listener (metrics, health, consumer lag): millrace's, not Kafka's (Kafka
    # has JMX; Redpanda serves the same on its admin port 9644)
    .define("http.listeners", "list", [],
            doc="HTTP listeners serving /metrics, /healthz, /readyz and /v1/consumer-groups: "
                "http://host:port or https://host:port (TLS as the broker's first SSL or "
                "SASL_SSL listener has it); empty: none")
    .define("http.authentication.method", "string", "NONE", one_of("NONE", "BASIC"),
            doc="BASIC: /metrics and /v1 need HTTP basic credentials of a SASL user of "
                "this broker (SCRAM or PLAIN), and Describe on the cluster when an "
                "authorizer is on; /healthz and /readyz stay open")
    # consumer lag of the groups this broker coordinates, with Burrow's evaluation rules
    # (reference observability.md 4.1; Burrow's own setting names after the prefix)
    .define("consumer.lag.offset.refresh.ms", "int", 5000, at_least(100),
            doc="how often the log ends of partitions led by other brokers are fetched")
    .define("consumer.lag.intervals", "int", 10, at_least(2),
            doc="commits kept per partition for Burrow's status (its window)")
    .define("consumer.lag.min.distance.ms", "int", 1000, at_least(0),
            doc="a commit this soon after the last one kept replaces it in the window")
    .define("consumer.lag.minimum.complete", "double", 0.0, between(0.0, 1.0),
            doc="share of the window that must be filled before a partition is judged")
    .define("consumer.lag.allowed.lag", "long", 0, at_least(0),
            doc="lag at or below this counts as none (the partition is OK)")
    .define("metrics.enabled", "boolean", True,
            doc="false: no per-request and per-topic metrics are recorded (to measure "
                "their cost); the gauges are still served")
    .define("num.network.threads", "int", 3, at_least(1))
    .define("num.io.threads", "int", 8, at_least(1))
    .define("num.recovery.threads.per.data.dir", "int", 2, at_least(1))
    .define("offsets.topic.num.partitions", "int", 50, at_least(1))
    .define("offsets.topic.replication.factor", "int", 3, at_least(1))
    .define("offsets.topic.segment.bytes", "int", 100 * 1024 * 1024, at_least(1))
    .define("offsets.retention.minutes", "int", 7 * 24 * 60, at_least(1))
    .define("offsets.commit.timeout.ms", "int", 5000, at_least(1))
    .define("group.initial.rebalance.delay.ms", "int", 3000, at_least(0))
    .define("group.min.session.timeout.ms", "int", 6000)
    .define("group.max.session.timeout.ms", "int", 1_800_000)
    .define("group.max.size", "int", INT_MAX, at_least(1))
    .define("transaction.state.log.num.partitions", "int", 50, at_least(1))
    .define("transaction.state.log.replication.factor", "int", 3, at_least(1))
    .define("transaction.state.log.min.isr", "int", 2, at_least(1))
    .define("transaction.max.timeout.ms", "int", 900_000, at_least(1))
    .define("transaction.state.log.segment.bytes", "int", 100 * 1024 * 1024, at_least(1))
    .define("transactional.id.expiration.ms", "int", 7 * DAY_MS, at_least(1))
    .define("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10_000,
            at_least(1))
    .define("transaction.remove.expired.transaction.cleanup.interval.ms", "int", 3_600_000,
            at_least(1))
    .define("transaction.partition.verification.enable", "boolean", True,
            doc="KIP-890 part 1: a leader asks the transaction coordinator before it "
                "writes the first transactional batch of a producer's transaction")
    .define("transaction.version", "int", 1, between(1, 2),
            doc="1: the classic transaction protocol; 2: KIP-890 part 2 (EndTxn v5 bumps "
                "the producer epoch every transaction, Produce v12 / TxnOffsetCommit v5 "
                "add partitions implicitly; advertised as the finalized feature "
                "transaction.version).  Kafka sets this as a cluster feature level with "
                "kafka-features.sh; here it is a broker config, the same on every broker")
    .define("min.insync.replicas", "int", 1, at_least(1))
    .define("unclean.leader.election.enable", "boolean", False)
    .define("replica.lag.time.max.ms", "long", 30_000, at_least(1))
    .define("replica.fetch.wait.max.ms", "int", 500, at_least(0))
    .define("replica.fetch.min.bytes", "int", 1, at_least(1))
    .define("replica.fetch.max.bytes", "int", 1024 * 1024, at_least(0))
    .define("replica.fetch.response.max.bytes", "int", 10 * 1024 * 1024, at_least(0))
    .define("replica.fetch.backoff.ms", "int", 1000, at_least(0))
    .define("replica.socket.timeout.ms", "int", 30_000)
    .define("replica.high.watermark.checkpoint.interval.ms", "long", 5000, at_least(1))
    .define("num.replica.fetchers", "int", 1, at_least(1))
    .define("broker.rack", "string", None, nullable=True)
    .define("auto.leader.rebalance.enable", "boolean", True)
    .define("leader.imbalance.per.broker.percentage", "int", 10, between(0, 100))
    .define("leader.imbalance.check.interval.seconds", "long", 300, at_least(1))
    .define("controlled.shutdown.enable", "boolean", True)
    .define("controlled.shutdown.max.retries", "int", 3, at_least(0))
    .define("controlled.shutdown.retry.backoff.ms", "long", 5000, at_least(0))
    .define("controller.socket.timeout.ms", "int", 30_000)
    .define("zookeeper.connect", "string", None, nullable=True)
    .define("zookeeper.connection.timeout.ms", "int", None, nullable=True)
    .define("zookeeper.session.timeout.ms", "int", 18_000)
    .define("process.roles", "list", [])
    .define("controller.quorum.voters", "list", [])
    .define("controller.listener.names", "string", None, nullable=True)
    .define("cluster.id", "string", None, nullable=True)
    .define("fetch.max.bytes", "int", 55 * 1024 * 1024, at_least(1024))
    .define("group.coordinator.rebalance.protocols", "list", ["classic"])
    .define("queued.max.requests", "int", 500, at_least(1))
    .define("producer.id.expiration.ms", "int", DAY_MS, at_least(1))
    .define("unstable.api.versions.enable", "boolean", False)
    .define("log.message.format.version", "string", "3.0-IV1")
    .define("message.timestamp.difference.max.ms", "long", LONG_MAX)
    .define("log.cleaner.threads", "int", 1, between(0, 64))
)


PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# Kafka's mechanism-scoped keys (listener.name.<l>.<mechanism>.<key>)
MECHANISM_SCOPED = ("sasl.jaas.config", "sasl.login.class", "sasl.login.callback.handler.class",
                    "sasl.server.callback.handler.class", "connections.max.reauth.ms")
LISTENER_PREFIX = "listener.name."


@dataclass(frozen=True)
class Listener:
    """One ``NAME://host:port`` of ``listeners`` / ``advertised.listeners`` with the
    security protocol the map gives its name."""

    name: str
    host: str
    port: int
    protocol: str = "PLAINTEXT"

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")


def parse_listener(spec: str, key: str,
                   protocol_map: dict[str, str] | None = None) -> Listener:
    """``PLAINTEXT://host:port`` -> Listener (empty host = all interfaces).  The name
    must be in ``protocol_map`` (``listener.security.protocol.map``) unless it is itself
    a protocol name."""
    if "://" not in spec:
        raise ConfigError(f"Invalid value {spec} for configuration {key}: "
                          "expected NAME://host:port")
    name, rest = spec.split("://", 1)
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"Invalid value {spec} for configuration {key}: bad port")
    name = name.upper()
    pmap = protocol_map if protocol_map is not None else {p: p for p in PROTOCOLS}
    protocol = pmap.get(name)
    if protocol is None:
        raise ConfigError(f"Invalid value {spec} for configuration {key}: no security "
                          f"protocol defined for listener {name} in "
                          "listener.security.protocol.map")
    return Listener(name, host.strip("[]"), int(port), protocol)


@dataclass(frozen=True, slots=True)
class HttpListener:
    scheme: str  # http or https
    host: str
    port: int

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


def parse_http_listener(spec: str) -> HttpListener:
    """``http://127.0.0.1:9644`` (``http.listeners``); port 0 binds any free port."""
    scheme, sep, rest = spec.partition("://")
    host, colon, port = rest.rpartition(":")
    if not sep or scheme.lower() not in ("http", "https") or not colon or \
            not port.isdigit() or not 0 <= int(port) <= 65535 or "/" in rest:
        raise ConfigError(f"Invalid value {spec} for configuration http.listeners: "
                          "expected http://host:port or https://host:port")
    return HttpListener(scheme.lower(), host.strip("[]"), int(port))


def parse_protocol_map(text: str) -> dict[str, str]:
    """``listener.security.protocol.map``: ``NAME:PROTOCOL`` pairs, each name once."""
    out: dict[str, str] = {}
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name or protocol not in PROTOCOLS:
            raise ConfigError(f"Invalid value {item} for configuration "
                              "listener.security.protocol.map: expected NAME:PROTOCOL with "
                              f"a protocol among {', '.join(PROTOCOLS)}")
        if name in out:
            raise ConfigError(f"Invalid value {text} for configuration "
                              f"listener.security.protocol.map: {name} appears twice")
        out[name] = protocol
    return out


class KafkaConfig:
    """Typed view of the broker's settings (``config["log.dirs"]`` or the properties).

    Listener-scoped settings (``listener.name.<listener>.<key>``, and for SASL settings
    ``listener.name.<listener>.<mechanism>.<key>``) override the plain key on that
    listener only: ``listener_value`` resolves them as Kafka does."""

    def __init__(self, props: dict[str, Any]) -> None:
        self.originals = dict(props)
        scoped = {k: v for k, v in props.items() if k.startswith(LISTENER_PREFIX)}
        self.values = BROKER_CONFIG.parse(props, ignore=scoped)
        v = self.values
        node = v["node.id"] if v["node.id"] >= 0 else v["broker.id"]
        self.node_id: int = node if node >= 0 else 0
        self.protocol_map = parse_protocol_map(v["listener.security.protocol.map"])
        self.listeners = [parse_listener(s, "listeners", self.protocol_map)
                          for s in v["listeners"]]
        if not self.listeners:
            raise ConfigError("Invalid value for configuration listeners: none given")
        names = [ls.name for ls in self.listeners]
        if len(set(names)) != len(names):
            raise ConfigError(f"Invalid value {','.join(v['listeners'])} for configuration "
                              "listeners: each listener name must appear once")
        self.http_listeners = [parse_http_listener(spec) for spec in v["http.listeners"]]
        adv = v["advertised.listeners"]
        self.advertised_listeners = (
            [parse_listener(s, "advertised.listeners", self.protocol_map) for s in adv]
            if adv else self.listeners)
        for a in self.advertised_listeners:
            if a.name not in names:
                raise ConfigError(f"Invalid value for configuration advertised.listeners: "
                                  f"{a.name} is not one of the listeners ({', '.join(names)})")
            if a.host in ("0.0.0.0", "::"):
                raise ConfigError("Invalid value for configuration advertised.listeners: "
                                  f"{a.name} advertises the wildcard address {a.host}")
        self.inter_broker_listener_name = self._inter_broker_listener()
        if v["control.plane.listener.name"] is not None:
            raise ConfigError("control.plane.listener.name is not supported: the controller "
                              "talks to the brokers on the inter-broker listener "
                              f"({self.inter_broker_listener_name}); remove the key")
        self.listener_overrides = self._listener_overrides(scoped, names)
        self._check_sasl()
        for principal in (v["super.users"] or "").split(";"):
            if principal.strip() and ":" not in principal.strip():
                raise ConfigError(f"Invalid value {v['super.users']} for configuration "
                                  f"super.users: {principal.strip()!r} is not a principal "
                                  "Type:name (User:admin)")
        self.log_dirs: list[str] = v["log.dirs"] or [v["log.dir"]]
        if v["group.min.session.timeout.ms"] > v["group.max.session.timeout.ms"]:
            raise ConfigError("group.min.session.timeout.ms must not exceed "
                              "group.max.session.timeout.ms")

    # ------------------------------------------------------------------ listeners
    def _inter_broker_listener(self) -> str:
        v = self.values
        name = v["inter.broker.listener.name"]
        if name is not None:
            if "security.inter.broker.protocol" in self.originals:
                raise ConfigError("Only one of inter.broker.listener.name and "
                                  "security.inter.broker.protocol should be set")
            name = name.strip().upper()
        else:
            name = v["security.inter.broker.protocol"]
        if name not in {a.name for a in self.advertised_listeners}:
            raise ConfigError(
                f"The inter-broker listener {name} (inter.broker.listener.name / "
                "security.inter.broker.protocol) must be one of the advertised listeners: "
                + ", ".join(a.name for a in self.advertised_listeners))
        return str(name)

    @staticmethod
    def _listener_overrides(scoped: dict[str, Any], names: list[str]) -> dict[str, Any]:
        """Validate ``listener.name.<l>.[<mech>.]<key>`` keys; values converted."""
        out: dict[str, Any] = {}
        lowered = {n.lower() for n in names}
        mechanisms = {m.lower() for m in (*SASL_MECHANISMS, "GSSAPI", "OAUTHBEARER")}
        for key, value in scoped.items():
            listener, _, rest = key[len(LISTENER_PREFIX):].partition(".")
            if listener.lower() not in lowered:
                raise ConfigError(f"Unknown configuration key: {key} (no listener named "
                                  f"{listener.upper()} in listeners)")
            mech, _, inner = rest.partition(".")
            if mech in mechanisms and inner in MECHANISM_SCOPED:
                target = inner
            else:
                target = rest
            if target not in BROKER_CONFIG.keys or target.startswith(LISTENER_PREFIX):
                raise ConfigError(f"Unknown configuration key: {key}")
            converted = BROKER_CONFIG.convert(target, value)
            out[f"{LISTENER_PREFIX}{listener.lower()}.{rest}"] = converted
        return out

    def listener(self, name: str) -> Listener:
        return next(ls for ls in self.listeners if ls.name == name)

    @property
    def inter_broker_listener(self) -> Listener:
        """The advertised endpoint other brokers reach this one on."""
        return next(a for a in self.advertised_listeners
                    if a.name == self.inter_broker_listener_name)

    def listener_value(self, listener: str, key: str, mechanism: str | None = None) -> Any:
        """``key`` as seen on ``listener`` (and ``mechanism``): the most specific of
        ``listener.name.<l>.<mech>.<key>``, ``listener.name.<l>.<key>``, ``<key>``."""
        base = f"{LISTENER_PREFIX}{listener.lower()}."
        if mechanism is not None:
            k = f"{base}{mechanism.lower()}.{key}"
            if k in self.listener_overrides:
                return self.listener_overrides[k]
        k = base + key
        if k in self.listener_overrides:
            return self.listener_overrides[k]
        return self.values[key]

    def listener_key(self, listener: str, key: str, mechanism: str | None = None) -> str:
        """The name under which ``listener_value`` found ``key`` (for error messages)."""
        base = f"{LISTENER_PREFIX}{listener.lower()}."
        if mechanism is not None and f"{base}{mechanism.lower()}.{key}" in \
                self.listener_overrides:
            return f"{base}{mechanism.lower()}.{key}"
        return base + key if base + key in self.listener_overrides else key

    def listener_has(self, listener: str, key: str) -> bool:
        """Whether ``key`` is set with the listener's prefix (Kafka honours
        ``ssl.client.auth`` on a SASL_SSL listener only in that form)."""
        return f"{LISTENER_PREFIX}{listener.lower()}.{key}" in self.listener_overrides

    def _check_sasl(self) -> None:
        for ls in self.listeners:
            if not ls.uses_sasl:
                continue
            enabled = self.listener_value(ls.name, "sasl.enabled.mechanisms")
            unsupported = [m for m in enabled if m.upper() not in SASL_MECHANISMS]
            if unsupported or not enabled:
                raise ConfigError(
                    f"Invalid value {','.join(enabled)} for configuration "
                    f"sasl.enabled.mechanisms (listener {ls.name}): millrace supports "
                    f"{', '.join(SASL_MECHANISMS)}; GSSAPI (Kafka's default) and "
                    "OAUTHBEARER are not supported")
        ib = self.listener(self.inter_broker_listener_name)
        if ib.uses_sasl:
            mech = self.values["sasl.mechanism.inter.broker.protocol"].upper()
            enabled = [m.upper() for m in
                       self.listener_value(ib.name, "sasl.enabled.mechanisms")]
            if mech not in enabled:
                raise ConfigError(
                    f"sasl.mechanism.inter.broker.protocol {mech} must be included in "
                    f"sasl.enabled.mechanisms of the inter-broker listener {ib.name} "
                    f"({', '.join(enabled)})")

    @classmethod
    def from_text(cls, text: str, overrides: dict[str, str] | None = None) -> KafkaConfig:
        props: dict[str, Any] = dict(parse_properties(text))
        props.update(overrides or {})
        return cls(props)

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    @property
    def log_retention_ms(self) -> int:
        v = self.values
        if v["log.retention.ms"] is not None:
            return int(v["log.retention.ms"])
        if v["log.retention.minutes"] is not None:
            return int(v["log.retention.minutes"]) * 60_000
        return int(v["log.retention.hours"]) * 3_600_000

    @property
    def log_roll_ms(self) -> int:
        v = self.values
        if v["log.roll.ms"] is not None:
            return int(v["log.roll.ms"])
        return int(v["log.roll.hours"]) * 3_600_000

    def default_topic_config(self) -> dict[str, str]:
        """Broker-level defaults expressed as topic-level config names (LogConfig)."""
        v = self.values
        flush_ms = v["log.flush.interval.ms"]
        return {
            "segment.bytes": str(v["log.segment.bytes"]),
            "segment.ms": str(self.log_roll_ms),
            "retention.ms": str(self.log_retention_ms),
            "retention.bytes": str(v["log.retention.bytes"]),
            "cleanup.policy": ",".join(v["log.cleanup.policy"]),
            "index.interval.bytes": str(v["log.index.interval.bytes"]),
            "flush.messages": str(v["log.flush.interval.messages"]),
            "flush.ms": str(flush_ms if flush_ms is not None else LONG_MAX),
            "max.message.bytes": str(v["message.max.bytes"]),
            "message.timestamp.type": v["log.message.timestamp.type"],
            "message.timestamp.before.max.ms": str(v["log.message.timestamp.before.max.ms"]),
            "message.timestamp.after.max.ms": str(v["log.message.timestamp.after.max.ms"]),
            "compression.type": v["compression.type"],
            "min.insync.replicas": str(v["min.insync.replicas"]),
            "unclean.leader.election.enable":
                "true" if v["unclean.leader.election.enable"] else "false",
        }
