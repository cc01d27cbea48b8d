"""The demo as a library: broker, order events, the Spark pipeline, a verified summary.

``run_demo(DemoConfig(data_dir), listener)`` does, in order:

1. start an embedded ``millrace broker`` process with its logs in ``<data_dir>/broker``
   (unless ``bootstrap_servers`` names an existing cluster; ``brokers=3``: a local
   ZooKeeper cluster in ``<data_dir>/cluster``, see ``millrace.demo.cluster``);
2. create the topic (``orders``, 6 partitions; on a cluster replicated 3 times with
   ``min.insync.replicas=2``) with the admin client;
3. produce ``events`` order events (``millrace.demo.orders``) with the millrace
   ``KafkaProducer``, keyed by order id (on a cluster: idempotent, and half-way through
   the leader of one partition is killed with SIGKILL);
4. run the Spark pipeline (``millrace.spark.pipeline``) with ``trigger=available-now``:
   it reads the topic through the ``millrace`` connector and upserts the latest state per
   order into ``orders`` and paid revenue per product and minute into
   ``revenue_per_minute`` (SQLite in the data dir unless ``database`` says otherwise);
5. read both tables back and compare them with ``fold`` of every event produced.

Metrics.  The demo's own brokers (embedded or cluster) serve ``/metrics``, ``/healthz``
and ``/readyz`` on an HTTP listener each (a free loopback port); the listener is told
their URLs (a ``"metrics"`` phase) once they serve, while the run goes on, and
``DemoResult.metrics_urls`` keeps them.

Security.  ``client_config`` (``millrace demo --command-config client.properties``) is
given to every client the demo builds -- its admin calls, the producer, the pipeline's
source as ``kafka.*`` options -- so the demo runs against a secured cluster of one's own.
``security="sasl_ssl"`` (with ``brokers >= 3``) makes the demo's own cluster a secured one
(``millrace.launcher.dev_security.DevSecurity``: a CA, SCRAM-SHA-512 users, every listener
SASL_SSL, inter-broker traffic included) and connects every client as its ``client``
user; ``<data_dir>/cluster/security/client.properties`` then holds those settings.

Re-runs.  ``<data_dir>/demo.json`` records what earlier runs produced (seed, topic,
broker, database, event count).  A later run on the same data dir *continues* the same
seeded stream: it produces the next ``events`` events, the pipeline resumes from its
checkpoint and processes only those, and the verification folds the whole stream so
far -- which is what a restarted streaming job must get right.  ``fresh=True`` starts
over: it deletes the demo's own entries in the data dir (and, for an external cluster or
database, the demo's topic and tables).  A data dir whose topic does not hold exactly the
events recorded (an interrupted produce, someone else's records) is refused with a hint
to use ``--fresh``, since no verification could be meaningful.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from millrace.demo.fold import (
    ORDER_COLUMNS,
    REVENUE_COLUMNS,
    ExpectedTables,
    Verification,
    epoch_ms,
    fold,
    iso_ms,
    verify,
)
from millrace.demo.orders import OrderEvent, OrderEventGenerator

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from millrace.client.admin import KafkaAdminClient
    from millrace.launcher.broker_process import BrokerProcess
    from millrace.launcher.local_cluster import LocalCluster
    from millrace.spark.pipeline import BatchProgress, PipelineConfig

DEFAULT_EVENTS = 200_000
DEFAULT_PARTITIONS = 6
DEFAULT_TOPIC = "orders"
DEFAULT_SEED = 42
SECURITY_PROFILES = ("none", "sasl_ssl")
VALUE_FORMATS = ("json", "avro")
STATE_FILE = "demo.json"
ORDERS_TABLE = "orders"
REVENUE_TABLE = "revenue_per_minute"
VALUE_SCHEMA = ("order_id STRING, customer STRING, product STRING, quantity INT, "
                "price DOUBLE, status STRING, event_time TIMESTAMP")
# what a demo data dir may contain; --fresh deletes exactly these
SPARK_LOG = "spark.log"
OWNED_ENTRIES = ("broker", "cluster", "registry", "console", "checkpoints", "millrace.db", "millrace.db-journal",
                 "millrace.db-wal", "millrace.db-shm", "spark-log4j2.properties", SPARK_LOG,
                 STATE_FILE)
PRODUCER_CONFIG: dict[str, Any] = {"linger.ms": 20, "batch.size": 256 * 1024,
                                   "acks": "all", "client.id": "millrace-demo"}
PROGRESS_EVERY = 2_000
# Spark's JVM writes its log4j output, its start-up notices and the Python workers'
# stderr to <data_dir>/spark.log (demo_session), never between the demo's progress lines
# (the data dir keeps this file for the JVM to read)
SPARK_LOG_CONFIG = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = stderr
appender.console.type = Console
appender.console.name = stderr
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


class DemoError(Exception):
    """Something the user can fix (a data dir from another setup, a busy topic...)."""


@dataclass
class DemoConfig:
    data_dir: Path
    events: int = DEFAULT_EVENTS
    partitions: int = DEFAULT_PARTITIONS
    bootstrap_servers: str | None = None  # None: an embedded broker in the data dir
    database: str | None = None           # None: sqlite:///<data_dir>/millrace.db
    fresh: bool = False
    topic: str = DEFAULT_TOPIC
    seed: int = DEFAULT_SEED
    max_offsets_per_trigger: int = 200_000
    brokers: int = 1                      # > 1: a local ZooKeeper cluster, a leader killed
    security: str = "none"                # sasl_ssl: the local cluster secured (DevSecurity)
    spark_master: str = "local[2]"        # or spark://HOST:PORT: the queries on a cluster
    value_format: str = "json"            # avro: Confluent-framed Avro (demo/avro.py)
    schema_registry_url: str | None = None  # avro: None starts a registry of the demo's own
    # settings for every client (security.protocol, sasl.*, ssl.*, ...): may hold a password
    client_config: dict[str, str] = field(default_factory=dict, repr=False)
    # the web console while the demo runs: this port if free (else any), None for none
    console_port: int | None = None

    @property
    def database_url(self) -> str:
        return self.database or f"sqlite:///{self.data_dir.resolve() / 'millrace.db'}"


class DemoListener:
    """What the demo reports while it runs; the CLI subclasses it (no-ops here)."""

    def phase(self, name: str, detail: str = "") -> None:
        """A step starts: "broker", "topic", "produce", "pipeline", "verify"."""

    def produced(self, sent: int, total: int) -> None:
        """``sent`` of ``total`` events handed to the producer (every few thousand)."""

    def note(self, text: str, kind: str = "fault") -> None:
        """Something happened that the user should see now: a ``fault`` (the leader kill)
        or a ``schema`` change (the Avro run's evolution)."""

    def batch(self, progress: BatchProgress) -> None:
        """A micro-batch of the pipeline completed."""


@dataclass
class DemoState:
    """``demo.json``: what the runs on this data dir have produced so far."""

    seed: int
    topic: str
    bootstrap_servers: str | None
    database: str
    partitions: int
    events: int = 0
    runs: int = 0
    brokers: int = 1
    security: str = "none"
    value_format: str = "json"
    avro_evolved_at: int | None = None  # avro: the first event written with version 2

    @classmethod
    def load(cls, path: Path) -> DemoState | None:
        try:
            doc = json.loads(path.read_text())
            evolved = doc.get("avro_evolved_at")
            return cls(**{k: doc[k] for k in ("seed", "topic", "bootstrap_servers",
                                                "database", "partitions", "events", "runs")},
                       brokers=int(doc.get("brokers", 1)),
                       security=str(doc.get("security", "none")),
                       value_format=str(doc.get("value_format", "json")),
                       avro_evolved_at=None if evolved is None else int(evolved))
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError) as e:
            raise DemoError(f"{path} is not a demo state file ({e}); "
                            "run with --fresh to start over") from None

    def save(self, path: Path) -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        tmp.replace(path)


@dataclass
class PipelineTable:
    """One table's sink in this run: the micro-batches its query committed (each in one
    transaction, with or without rows), the records those batches read from the topic,
    and the rows they inserted or changed."""

    micro_batches: int
    records_read: int
    rows_upserted: int


@dataclass
class DemoResult:
    data_dir: str
    bootstrap_servers: str
    embedded_broker: bool
    topic: str
    partitions: int
    database: str
    run: int                  # 1 for the first run on this data dir
    events_produced: int      # by this run
    events_total: int         # by every run on this data dir
    produce_s: float
    pipeline_queries: int     # Spark streaming queries (one feeds both tables)
    pipeline_input_rows: int  # records read from the topic by this run
    pipeline_s: float
    pipeline_tables: dict[str, PipelineTable]  # table -> what its sink did in this run
    orders_by_status: list[tuple[str, int]]
    revenue_by_product: list[tuple[str, float, int]]
    top_windows: list[tuple[str, str, float, int]]
    verification: Verification
    timings: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    brokers: int = 1
    spark_log: str | None = None  # the Spark JVM's stdout/stderr
    security_protocol: str = "PLAINTEXT"  # how the clients connected
    client_properties: str | None = None  # sasl_ssl: the secured cluster's client settings
    # broker id -> its /metrics URL while the run lasted (the demo's own brokers only)
    metrics_urls: dict[int, str] = field(default_factory=dict)
    value_format: str = "json"
    schema_registry_url: str | None = None  # avro: the registry the schemas are in
    schema_changes: list[str] = field(default_factory=list)  # restarts on a new version

    @property
    def produce_rate(self) -> float:
        return self.events_produced / self.produce_s if self.produce_s > 0 else 0.0

    @property
    def pipeline_rate(self) -> float:
        return self.pipeline_input_rows / self.pipeline_s if self.pipeline_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["produce_rate"] = round(self.produce_rate)
        doc["pipeline_rate"] = round(self.pipeline_rate)
        doc["verification"]["passed"] = self.verification.passed
        doc["verification"]["mismatches"] = [m.describe()
                                             for m in self.verification.mismatches]
        return doc


# ------------------------------------------------------------------ the steps


def reset_data_dir(data_dir: Path) -> None:
    """Delete the demo's own entries (``OWNED_ENTRIES``); nothing else is touched."""
    for name in OWNED_ENTRIES:
        path = data_dir / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()


@contextmanager
def embedded_broker(data_dir: Path) -> Iterator[BrokerProcess]:
    """A ``millrace broker`` child process with its logs in ``data_dir`` and its HTTP
    listener on (``broker.http_url``); yields the started broker and stops it (SIGTERM)
    on the way out."""
    from millrace.launcher.broker_process import BrokerProcess

    broker = BrokerProcess(data_dir, overrides={"num.partitions": "1"}, http=True)
    try:
        broker.start()
    except RuntimeError as e:
        raise DemoError(f"the embedded broker did not start; see {broker.log_path}: "
                        f"{str(e).splitlines()[0]}") from None
    try:
        yield broker
    except BaseException:
        broker.kill()
        raise
    broker.stop()


def admin_client(bootstrap: str, client: Mapping[str, Any] | None = None) -> KafkaAdminClient:
    """An admin client for ``bootstrap`` with the settings of ``client`` an admin client has
    (security, timeouts; a producer's settings in the same file are left out)."""
    from millrace.client.admin import KafkaAdminClient
    from millrace.spark.options import admin_config

    return KafkaAdminClient(admin_config({**(client or {}), "bootstrap.servers": bootstrap}))


def topic_end_offsets(bootstrap: str, topic: str, client: Mapping[str, Any] | None = None
                      ) -> dict[int, int] | None:
    """partition -> (end offset - start offset), or None when the topic does not exist."""
    from millrace.client.admin import OffsetSpec, TopicPartition
    from millrace.common.errors import UnknownTopicOrPartitionError

    with admin_client(bootstrap, client) as admin:
        try:
            description = admin.describe_topics([topic]).all()[topic]
        except UnknownTopicOrPartitionError:
            return None
        partitions = [TopicPartition(topic, p.partition) for p in description.partitions]
        latest = admin.list_offsets({tp: OffsetSpec.latest() for tp in partitions}).all()
        earliest = admin.list_offsets({tp: OffsetSpec.earliest() for tp in partitions}).all()
    return {tp.partition: latest[tp].offset - earliest[tp].offset for tp in partitions}


def create_topic(bootstrap: str, topic: str, partitions: int, replication_factor: int = -1,
                 configs: dict[str, str] | None = None,
                 client: Mapping[str, Any] | None = None) -> None:
    from millrace.client.admin import NewTopic

    with admin_client(bootstrap, client) as admin:
        admin.create_topics([NewTopic(topic, num_partitions=partitions,
                                      replication_factor=replication_factor,
                                      configs=configs or {})]).all()


def delete_topic(bootstrap: str, topic: str, client: Mapping[str, Any] | None = None) -> None:
    from millrace.common.errors import UnknownTopicOrPartitionError

    with admin_client(bootstrap, client) as admin:
        try:
            admin.delete_topics([topic]).all()
        except UnknownTopicOrPartitionError:
            return
    # deletion is asynchronous on a real cluster: wait until the name is free again
    deadline = time.monotonic() + 30
    while topic_end_offsets(bootstrap, topic, client) is not None:
        if time.monotonic() > deadline:
            raise DemoError(f"topic {topic!r} is still being deleted after 30 s")
        time.sleep(0.2)


def produce_events(bootstrap: str, topic: str, generator: OrderEventGenerator, skip: int,
                   count: int, progress: Callable[[int, int], None] | None = None, *,
                   extra_config: dict[str, Any] | None = None,
                   midway: Callable[[], None] | None = None,
                   client: Mapping[str, Any] | None = None,
                   value_of: Callable[[int, OrderEvent], bytes] | None = None) -> float:
    """Produce events ``skip`` .. ``skip + count - 1`` of the stream, keyed by order id;
    returns the seconds from the first send to the end of ``flush``.  ``midway`` is
    called once, after half of the events were handed to the producer.  ``client``: the
    settings of every client (security), under the demo's producer settings.
    ``value_of(index in the stream, event)``: the value bytes (default: the JSON)."""
    from millrace.client.producer import KafkaProducer, ProducerRecord

    failures: list[BaseException] = []

    def on_completion(_metadata: Any, error: BaseException | None) -> None:
        if error is not None:
            failures.append(error)

    producer: KafkaProducer[bytes, bytes] = KafkaProducer(
        {**PRODUCER_CONFIG, **(client or {}), "bootstrap.servers": bootstrap,
         **(extra_config or {})})
    with producer:
        producer.partitions_for(topic)  # metadata before the clock starts
        send = producer.send
        t0 = time.perf_counter()
        sent = 0
        for event in generator.take(count, skip):
            value = event.to_json() if value_of is None else value_of(skip + sent, event)
            send(ProducerRecord(topic, value, key=event.key), on_completion)
            sent += 1
            if midway is not None and sent == count // 2:
                midway()
            if progress is not None and sent % PROGRESS_EVERY == 0 and sent < count:
                progress(sent, count)  # the last call comes after flush
        producer.flush()
        elapsed = time.perf_counter() - t0
    if progress is not None:
        progress(sent, count)
    if failures:
        raise DemoError(f"{len(failures)} of {count} events were not delivered, e.g.: "
                        f"{failures[0]}")
    return elapsed


def pipeline_config(config: DemoConfig, bootstrap: str,
                    client: Mapping[str, Any] | None = None,
                    registry_url: str | None = None) -> PipelineConfig:
    """The demo's pipeline job; ``client`` (security settings) become ``kafka.*`` source
    options, which reach the driver's and every executor's consumers."""
    from millrace.spark.pipeline import AggregateSink, PipelineConfig, SourceConfig, StateSink

    kafka = {f"kafka.{k}": str(v) for k, v in (client or {}).items()
             if k != "bootstrap.servers"}
    return PipelineConfig(
        name="orders",
        source=SourceConfig(
            bootstrap_servers=bootstrap, subscribe=config.topic,
            options={**kafka, "startingOffsets": "earliest",
                     "maxOffsetsPerTrigger": str(config.max_offsets_per_trigger),
                     # a record traced in the console shows its micro-batch and the
                     # database write (issue 28; trace_reports.py)
                     "traceReports": "true"}),
        value_format=config.value_format,
        value_schema=VALUE_SCHEMA if config.value_format == "json" else None,
        schema_registry_url=registry_url if config.value_format != "json" else None,
        transform=None,
        state_sinks=[StateSink(table=ORDERS_TABLE, key=["order_id"])],
        aggregate_sinks=[AggregateSink(
            table=REVENUE_TABLE, event_time="event_time", window="1 minute",
            watermark="10 minutes", group_by=["product"],
            aggregates={"revenue": "sum(quantity * price)", "orders": "count(*)"},
            where="status = 'paid'")],
        database=config.database_url,
        checkpoint_dir=str((config.data_dir / "checkpoints").resolve()),
        trigger="available-now",
        spark_master=config.spark_master,
    )


def demo_session(data_dir: Path, app_name: str = "millrace-demo",
                 master: str = "local[2]") -> SparkSession:
    """The demo's session (``local_session``; ``master`` local[2] or a cluster's URL) with
    everything the JVM prints -- start-up notices, log4j at WARN, the Python workers' stderr
    -- in ``<data_dir>/spark.log`` instead of on the terminal the demo draws its progress on."""
    import warnings

    from millrace.spark.session import local_session

    log_config = data_dir / "spark-log4j2.properties"
    log_config.write_text(SPARK_LOG_CONFIG)
    with warnings.catch_warnings():
        # pyspark checks the pandas version at start-up and warns about pandas 3
        warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas",
                                category=FutureWarning)
        spark = local_session(app_name, master=master, conf={
            "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={log_config}"},
            jvm_log=data_dir / SPARK_LOG)
    return spark


def read_tables(database_url: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """(orders rows, revenue rows) in ``ORDER_COLUMNS`` / ``REVENUE_COLUMNS`` order."""
    from millrace.spark.sinks import open_database

    with open_database(database_url) as db:
        orders = db.query(f"SELECT {', '.join(ORDER_COLUMNS)} FROM {ORDERS_TABLE}")
        revenue = db.query(f"SELECT {', '.join(REVENUE_COLUMNS)} FROM {REVENUE_TABLE}")
    return [tuple(r) for r in orders], [tuple(r) for r in revenue]


def read_coupons(database_url: str) -> dict[str, str | None]:
    """order id -> the ``coupon`` cell of the orders table (avro runs)."""
    from millrace.spark.sinks import open_database

    with open_database(database_url) as db:
        return {str(r[0]): r[1] for r in db.query(f"SELECT order_id, coupon FROM "
                                                   f"{ORDERS_TABLE}")}


def drop_tables(database_url: str) -> None:
    from millrace.spark.sinks import open_database

    with open_database(database_url) as db:
        for table in (ORDERS_TABLE, REVENUE_TABLE):
            db.query(f"DROP TABLE IF EXISTS {table}")


def table_rows(database_url: str, table: str) -> int | None:
    """Rows in ``table``, or None when it does not exist (or cannot be read)."""
    from millrace.spark.sinks import open_database

    with open_database(database_url) as db:
        try:
            return int(db.query(f"SELECT COUNT(*) FROM {table}")[0][0])
        except Exception:  # no such table: the message and class depend on the driver
            return None


# ------------------------------------------------------------------ summaries


def summarize(orders_rows: list[tuple[Any, ...]], revenue_rows: list[tuple[Any, ...]],
              top: int = 10) -> tuple[list[tuple[str, int]], list[tuple[str, float, int]],
                                      list[tuple[str, str, float, int]]]:
    """(orders by status, paid revenue by product, the ``top`` product-minutes by revenue)
    of the tables as the pipeline wrote them."""
    by_status: dict[str, int] = {}
    for row in orders_rows:
        by_status[row[5]] = by_status.get(row[5], 0) + 1
    by_product: dict[str, tuple[float, int]] = {}
    for _start, _end, product, revenue, orders in revenue_rows:
        total, count = by_product.get(product, (0.0, 0))
        by_product[product] = (total + float(revenue), count + int(orders))
    windows = sorted(revenue_rows, key=lambda r: (-float(r[3]), str(r[2])))[:top]
    return (sorted(by_status.items(), key=lambda kv: -kv[1]),
            sorted(((p, round(t, 2), n) for p, (t, n) in by_product.items()),
                   key=lambda r: -r[1]),
            [(iso_ms(epoch_ms(r[0])), str(r[2]), round(float(r[3]), 2), int(r[4]))
             for r in windows])


# ------------------------------------------------------------------ the run


def _check_state(state: DemoState, config: DemoConfig, state_path: Path) -> None:
    wanted = {"seed": config.seed, "topic": config.topic,
              "bootstrap_servers": config.bootstrap_servers,
              "database": config.database_url, "brokers": config.brokers,
              "security": config.security, "value_format": config.value_format}
    for key, value in wanted.items():
        if getattr(state, key) != value:
            raise DemoError(f"{state_path} holds a demo run with {key}={getattr(state, key)!r}, "
                            f"not {value!r}; run with --fresh to start over, or use another "
                            "--data-dir")


def run_demo(config: DemoConfig, listener: DemoListener | None = None) -> DemoResult:
    listener = listener or DemoListener()
    if config.events < 0:
        raise DemoError(f"--events must be >= 0, got {config.events}")
    if config.partitions < 1:
        raise DemoError(f"--partitions must be >= 1, got {config.partitions}")
    if config.brokers != 1 and (config.brokers < 3 or config.bootstrap_servers is not None):
        raise DemoError(f"--brokers {config.brokers}: the cluster demo needs at least 3 "
                        "brokers (replication factor 3) and starts them itself (no "
                        "--bootstrap-server)")
    if config.security not in SECURITY_PROFILES:
        raise DemoError(f"--security {config.security}: one of {', '.join(SECURITY_PROFILES)}")
    if config.value_format not in VALUE_FORMATS:
        raise DemoError(f"--value-format {config.value_format}: one of "
                        f"{', '.join(VALUE_FORMATS)}")
    if config.schema_registry_url and config.value_format == "json":
        raise DemoError("--schema-registry-url goes with --value-format avro")
    secured = config.security != "none" or str(config.client_config.get(
        "security.protocol", "PLAINTEXT")).upper() != "PLAINTEXT"
    if config.value_format == "avro" and not config.schema_registry_url and secured:
        raise DemoError("--value-format avro on a secured cluster: give --schema-registry-url "
                        "(the demo starts its own registry on a PLAINTEXT cluster only; "
                        "millrace cluster up starts one next to a secured cluster)")
    if config.security != "none" and config.brokers < 3:
        raise DemoError(f"--security {config.security} secures the demo's own cluster: use it "
                        "with --brokers 3 (for a secured cluster of your own, give "
                        "--bootstrap-server and --command-config)")
    started = time.perf_counter()
    timings: dict[str, float] = {}
    notes: list[str] = []
    data_dir = config.data_dir.resolve()
    if config.fresh:
        reset_data_dir(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    state_path = data_dir / STATE_FILE
    state = DemoState.load(state_path)
    if state is not None:
        _check_state(state, config, state_path)

    embedded = config.bootstrap_servers is None
    with _broker(config, data_dir, listener) as (bootstrap, cluster, metrics_urls), \
            _registry(config, data_dir, bootstrap, listener) as registry_url, \
            ExitStack() as stack:
        timings["broker_start_s"] = time.perf_counter() - started
        client = _client_settings(config, cluster)
        stack.enter_context(_console(config, data_dir, bootstrap, client, listener))

        t = time.perf_counter()
        listener.phase("topic", config.topic)
        if config.fresh and not embedded:
            delete_topic(bootstrap, config.topic, client)
        if config.fresh and config.database is not None:
            drop_tables(config.database_url)
        if config.fresh and registry_url is not None and config.schema_registry_url:
            _delete_subject(registry_url, f"{config.topic}-value")
        stored = topic_end_offsets(bootstrap, config.topic, client)
        if state is None:
            if stored is not None:
                raise DemoError(f"topic {config.topic!r} already exists on {bootstrap} and this "
                                "data dir has no record of it; run with --fresh to delete it, "
                                "or choose another --topic")
            if config.database is not None:
                for table in (ORDERS_TABLE, REVENUE_TABLE):
                    if table_rows(config.database_url, table):
                        raise DemoError(f"table {table!r} in {config.database} already holds "
                                        "rows; run with --fresh to drop it")
            if cluster is None:
                create_topic(bootstrap, config.topic, config.partitions, client=client)
            else:
                from millrace.demo import cluster as demo_cluster

                create_topic(bootstrap, config.topic, config.partitions,
                             demo_cluster.REPLICATION_FACTOR,
                             {"min.insync.replicas": str(demo_cluster.MIN_INSYNC_REPLICAS)},
                             client=client)
            state = DemoState(config.seed, config.topic, config.bootstrap_servers,
                              config.database_url, config.partitions, brokers=config.brokers,
                              security=config.security, value_format=config.value_format)
            state.save(state_path)
        else:
            total = None if stored is None else sum(stored.values())
            if total != state.events:
                found = "no such topic" if total is None else f"{total} records"
                raise DemoError(f"topic {config.topic!r} should hold the {state.events} events "
                                f"of earlier runs but has {found} (an interrupted run?); "
                                "run with --fresh to start over")
            if stored is not None and len(stored) != config.partitions:
                notes.append(f"topic {config.topic!r} exists with {len(stored)} partitions; "
                             f"--partitions {config.partitions} applies to a new topic only")
        state.runs += 1
        timings["topic_s"] = time.perf_counter() - t

        listener.phase("produce", f"{config.events:,} events")
        skip = state.events
        generator = OrderEventGenerator(config.seed)
        extra: dict[str, Any] = {}
        midway: Callable[[], None] | None = None
        if cluster is not None:
            extra, midway = _leader_kill(cluster, config.topic, listener, notes, client)
        value_of = None
        if registry_url is not None:
            value_of = _avro_values(state, config, registry_url, skip, listener, notes)
            state.save(state_path)
        produce_s = produce_events(bootstrap, config.topic, generator, skip, config.events,
                                   listener.produced, extra_config=extra,
                                   midway=midway, client=client,
                                   value_of=value_of) if config.events else 0.0
        state.events += config.events
        state.save(state_path)
        timings["produce_s"] = produce_s

        spark_log = data_dir / SPARK_LOG
        listener.phase("pipeline", f"{config.database_url}; Spark's log: {spark_log}")
        from millrace.spark.pipeline import Pipeline, PipelineError

        t = time.perf_counter()
        spark = demo_session(data_dir, master=config.spark_master)
        timings["spark_start_s"] = time.perf_counter() - t
        pipeline = pipeline_config(config, bootstrap, client, registry_url)
        pipeline_name = pipeline.name
        try:
            result = Pipeline(pipeline, spark).run(progress=listener.batch)
        except PipelineError as e:
            raise DemoError(f"{_first_words(str(e))} (Spark's log: {spark_log}) -- the "
                            "checkpoint keeps what was committed: run the demo again on the "
                            "same --data-dir to resume") from None
        finally:
            spark.stop()
        timings["pipeline_s"] = time.perf_counter() - t
        if result.stopped:
            raise DemoError("the pipeline was stopped before it caught up; run the demo "
                            "again on the same --data-dir to continue")

    listener.phase("verify", f"{state.events:,} events")
    t = time.perf_counter()
    orders_rows, revenue_rows = read_tables(config.database_url)
    expected: ExpectedTables = fold(generator.take(state.events))
    verification = verify(expected, orders_rows, revenue_rows)
    if config.value_format == "avro" and state.avro_evolved_at is not None:
        from millrace.demo.avro import check_coupons

        check_coupons(verification, generator.take(state.events), state.avro_evolved_at,
                      read_coupons(config.database_url))
    by_status, by_product, top_windows = summarize(orders_rows, revenue_rows)
    timings["verify_s"] = time.perf_counter() - t
    timings["total_s"] = time.perf_counter() - started

    return DemoResult(
        data_dir=str(data_dir), bootstrap_servers=bootstrap, embedded_broker=embedded,
        topic=config.topic, partitions=state.partitions, database=config.database_url,
        run=state.runs, events_produced=config.events, events_total=state.events,
        produce_s=produce_s, pipeline_queries=result.queries,
        pipeline_input_rows=result.input_rows, pipeline_s=result.elapsed_s,
        pipeline_tables={table: PipelineTable(
            micro_batches=batches,
            records_read=result.input_rows_by_query.get(f"{pipeline_name}.{table}", 0),
            rows_upserted=result.rows_upserted.get(table, 0))
            for table, batches in result.batches_by_table.items()},
        orders_by_status=by_status, revenue_by_product=by_product, top_windows=top_windows,
        verification=verification, timings=timings, notes=notes, brokers=config.brokers,
        spark_log=str(spark_log),
        security_protocol=str(client.get("security.protocol", "PLAINTEXT")).upper(),
        client_properties=_client_properties_file(cluster), metrics_urls=metrics_urls,
        value_format=config.value_format, schema_registry_url=registry_url,
        schema_changes=list(result.schema_changes))


def _client_settings(config: DemoConfig, cluster: LocalCluster | None) -> dict[str, str]:
    """What every client of this run is given: the secured cluster's client settings (its
    ``client`` user), then ``config.client_config`` on top."""
    settings: dict[str, str] = {}
    if cluster is not None and cluster.security is not None:
        settings.update(cluster.security.client_properties())
    settings.update(config.client_config)
    settings.pop("bootstrap.servers", None)  # the demo's own address wins
    return settings


def _client_properties_file(cluster: LocalCluster | None) -> str | None:
    if cluster is None or cluster.security is None:
        return None
    return str(cluster.security.client_properties_path)


def _first_words(text: str, limit: int = 300) -> str:
    """At most ``limit`` characters of a one-line message (a Java error carries its
    whole stack)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + " ..."


def _serving(listener: DemoListener, http_urls: dict[int, str]) -> dict[int, str]:
    """Tell the listener where the brokers' metrics are; broker id -> /metrics URL."""
    metrics = {broker_id: f"{url}/metrics" for broker_id, url in http_urls.items()}
    if len(metrics) == 1:
        listener.phase("metrics", next(iter(metrics.values())))
    elif metrics:
        listener.phase("metrics", ", ".join(f"broker {broker_id} {url}"
                                            for broker_id, url in metrics.items()))
    return metrics


@contextmanager
def _broker(config: DemoConfig, data_dir: Path, listener: DemoListener
            ) -> Iterator[tuple[str, LocalCluster | None, dict[int, str]]]:
    """(bootstrap servers, the demo's cluster or None, broker id -> /metrics URL)."""
    if config.bootstrap_servers is not None:
        listener.phase("broker", config.bootstrap_servers)
        yield config.bootstrap_servers, None, {}
        return
    if config.brokers > 1:
        from millrace.demo.cluster import CLUSTER_DIR, ClusterDemoError, demo_cluster

        how = (" (SASL_SSL, SCRAM-SHA-512)" if config.security == "sasl_ssl" else "")
        listener.phase("cluster", f"ZooKeeper and {config.brokers} brokers{how}, logs in "
                                  f"{data_dir / CLUSTER_DIR}")
        secured = config.security == "sasl_ssl"
        try:
            with demo_cluster(data_dir / CLUSTER_DIR, config.brokers,
                              secured=secured) as cluster:
                yield cluster.bootstrap, cluster, _serving(listener, cluster.http_urls())
        except ClusterDemoError as e:
            raise DemoError(str(e)) from None
        return
    listener.phase("broker", f"embedded, logs in {data_dir / 'broker'}")
    with embedded_broker(data_dir / "broker") as broker:
        # the embedded broker is node 0 (node.id's default)
        urls = {0: broker.http_url} if broker.http_url is not None else {}
        yield broker.bootstrap, None, _serving(listener, urls)


@contextmanager
def _console(config: DemoConfig, data_dir: Path, bootstrap: str, client: Mapping[str, str],
             listener: DemoListener) -> Iterator[None]:
    """``millrace console`` on the demo's cluster while the demo runs (its log in
    ``<data_dir>/console``), on ``config.console_port`` or, when that is taken, any free
    port; the demo goes on without it if it cannot start."""
    if config.console_port is None:
        yield
        return
    from millrace.launcher.broker_process import free_port, port_in_use
    from millrace.launcher.console_process import ConsoleProcess

    port = config.console_port if not port_in_use(config.console_port) else free_port()
    console = ConsoleProcess(bootstrap, data_dir / "console", port,
                             client_properties={k: v for k, v in client.items()
                                                if k != "bootstrap.servers"})
    try:
        console.start()
    except RuntimeError as e:
        listener.note(f"the console did not start: {_first_words(str(e))}", kind="console")
        yield
        return
    listener.phase("console", f"{console.url} (while the demo runs; 'millrace cluster up' "
                              "keeps one)")
    try:
        yield
    finally:
        console.stop()


@contextmanager
def _registry(config: DemoConfig, data_dir: Path, bootstrap: str, listener: DemoListener
              ) -> Iterator[str | None]:
    """The schema registry's URL for an Avro run (``config.schema_registry_url``, or a
    ``millrace schema-registry`` of the demo's own on the broker, its files in
    ``<data_dir>/registry``); None for JSON."""
    if config.value_format == "json":
        yield None
        return
    if config.schema_registry_url:
        listener.phase("registry", config.schema_registry_url)
        yield config.schema_registry_url
        return
    from millrace.launcher.schema_registry_process import SchemaRegistryProcess

    registry_dir = data_dir / "registry"
    registry_dir.mkdir(parents=True, exist_ok=True)
    with SchemaRegistryProcess(bootstrap, registry_dir) as registry:
        listener.phase("registry", f"embedded {registry.url}, logs in {registry_dir}")
        yield registry.url


def _delete_subject(url: str, subject: str) -> None:
    """--fresh on a registry of one's own: the demo's subject, soft then hard."""
    from millrace.client.schema_registry.client import SchemaRegistryClient, SchemaRegistryError

    client = SchemaRegistryClient({"url": url})
    for permanent in (False, True):
        try:
            client.delete_subject(subject, permanent=permanent)
        except SchemaRegistryError as e:
            if e.error_code not in (40401, 40404, 40405):
                raise DemoError(f"--fresh: deleting subject {subject} at {url}: {e}") from None


def _avro_values(state: DemoState, config: DemoConfig, url: str, skip: int,
                 listener: DemoListener, notes: list[str]
                 ) -> Callable[[int, OrderEvent], bytes]:
    """The value bytes of an Avro run: version 1 of the order schema until the evolution
    point (half-way through the first Avro run), version 2 (``coupon``) from there."""
    from millrace.demo.avro import OrderEncoder

    subject = f"{config.topic}-value"
    encoder = OrderEncoder(url, config.topic)
    if state.avro_evolved_at is None:
        state.avro_evolved_at = skip + config.events // 2
    evolved_at = state.avro_evolved_at
    if skip < evolved_at:
        schema_id = encoder.register(1)
        listener.phase("schema", f"{subject} version 1 (id {schema_id}): the order")
    registered: list[int] = []

    def value_of(index: int, event: OrderEvent) -> bytes:
        if index < evolved_at:
            return encoder.encode(event, 1)
        if not registered:
            registered.append(encoder.register(2))
            if index == evolved_at:  # this run evolves the schema (not an earlier one)
                text = (f"{subject} evolved at event {index:,}: version 2 (id "
                        f"{registered[0]}) adds an optional coupon (string or null, "
                        "default null)")
                notes.append(text)
                listener.note(text, "schema")
        return encoder.encode(event, 2)

    return value_of


def _leader_kill(cluster: LocalCluster, topic: str, listener: DemoListener, notes: list[str],
                 client: Mapping[str, Any] | None = None
                 ) -> tuple[dict[str, Any], Callable[[], None]]:
    """The cluster run's producer settings and the half-way step that kills a leader."""
    from millrace.demo.cluster import CLUSTER_PRODUCER_CONFIG, LeaderKill

    kill = LeaderKill(cluster, topic, client)

    def midway() -> None:
        text = kill().describe()
        notes.append(text)
        listener.note(f"{text}; producing on (the controller elects a new leader from "
                      "the ISR)")

    return dict(CLUSTER_PRODUCER_CONFIG), midway
