"""The pipeline against a broker whose only listener is SASL_SSL: the client settings given
as ``kafka.*`` source options reach the pipeline's admin check, the driver's offset
lookups and the consumers in Spark's Python workers, and the tables hold exactly the fold
of what was produced; a wrong password ends the run at once with the broker's message.

The broker (one process, no ZooKeeper) has a fresh CA and a certificate for 127.0.0.1;
``alice`` is a PLAIN user of its JAAS configuration, and ``carol`` a SCRAM-SHA-256 user
that alice creates through AlterUserScramCredentials.  The pipeline authenticates as
carol with Java's ``sasl.jaas.config``, the form Spark users copy from Kafka's docs.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from pipeline_events import VALUE_SCHEMA, assert_tables, create_topic, events, fold, produce

from millrace.client.admin import (
    KafkaAdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from millrace.common.errors import SaslAuthenticationError
from millrace.security.certs import CertificateAuthority, write_pem
from millrace.spark.pipeline import (
    AggregateSink,
    Pipeline,
    PipelineConfig,
    SourceConfig,
    StateSink,
)
from millrace.testing.broker_process import BrokerProcess

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [
    pytest.mark.integration, pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]

PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"
ALICE = ("alice", "alice-secret")
CAROL = ("carol", "carol-secret")


class SecuredBroker:
    def __init__(self, process: BrokerProcess, ca: Path) -> None:
        self.process = process
        self.ca = ca

    @property
    def bootstrap(self) -> str:
        return self.process.bootstrap

    def plain(self, user: tuple[str, str] = ALICE) -> dict[str, str]:
        """librdkafka-style settings (sasl.username/password) for a PLAIN user."""
        return {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                "sasl.username": user[0], "sasl.password": user[1],
                "ssl.ca.location": str(self.ca)}

    def scram_jaas(self, password: str = CAROL[1]) -> dict[str, str]:
        """Java-style settings (sasl.jaas.config) for carol, SCRAM-SHA-256."""
        return {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.jaas.config": f'{SCRAM_LOGIN} required username="{CAROL[0]}" '
                                    f'password="{password}";',
                "ssl.ca.location": str(self.ca)}


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    data: Path = tmp_path_factory.mktemp("sasl-ssl-broker")
    ca = CertificateAuthority.generate()
    leaf = ca.issue("localhost", hosts=["localhost", "127.0.0.1"])
    write_pem(data / "ca.pem", ca.cert_pem)
    write_pem(data / "broker.pem", leaf.key_pem + leaf.chain_pem, private=True)
    overrides = {
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "security.inter.broker.protocol": "SASL_SSL",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.jaas.config": f'{PLAIN_LOGIN} required username="{ALICE[0]}" '
                            f'password="{ALICE[1]}" user_{ALICE[0]}="{ALICE[1]}";',
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(data / "broker.pem"),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(data / "ca.pem"),
    }
    with BrokerProcess(data / "broker", overrides=overrides,
                       listener_protocol="SASL_SSL") as process:
        broker = SecuredBroker(process, data / "ca.pem")
        with KafkaAdminClient({"bootstrap.servers": broker.bootstrap,
                               **broker.plain()}) as admin:
            admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
                CAROL[0], ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192),
                CAROL[1].encode())]).all()
        yield broker
    assert process.proc is not None and process.proc.returncode == 0, process.logs()


def job(broker: SecuredBroker, topic: str, tmp_path: Path, client: dict[str, str]
        ) -> PipelineConfig:
    return PipelineConfig(
        name=topic,
        source=SourceConfig(bootstrap_servers=broker.bootstrap, subscribe=topic,
                            options={**{f"kafka.{k}": v for k, v in client.items()},
                                     "startingOffsets": "earliest",
                                     "maxOffsetsPerTrigger": "1000"}),
        value_format="json", value_schema=VALUE_SCHEMA,
        state_sinks=[StateSink(table="orders", key=["order_id"])],
        aggregate_sinks=[AggregateSink(
            table="revenue_per_minute", event_time="event_time", window="1 minute",
            watermark="10 minutes", group_by=["product"],
            aggregates={"revenue": "sum(quantity * price)", "orders": "count(*)"},
            where="status = 'paid'")],
        database=f"sqlite:///{tmp_path / 'orders.db'}",
        checkpoint_dir=str(tmp_path / "checkpoints"), trigger="available-now")


def test_the_pipeline_reads_a_sasl_ssl_topic_into_sqlite(
        spark: SparkSession, secured: SecuredBroker, tmp_path: Path) -> None:
    topic = "secured-orders"
    create_topic(secured.bootstrap, topic, 2, secured.plain())
    stream = events(2500)
    produce(secured.bootstrap, topic, stream, secured.plain())

    config = job(secured, topic, tmp_path, secured.scram_jaas())
    assert CAROL[1] not in repr(config)
    result = Pipeline(config, spark).run()
    assert not result.stopped
    assert result.input_rows == 2500  # one shared query feeds both tables
    assert_tables(config.database, fold(stream))
    # every connection of the run authenticated; nothing failed on the broker's side
    assert "authentication of" not in secured.process.logs()


def test_a_wrong_password_ends_the_run_before_spark_starts(
        secured: SecuredBroker, tmp_path: Path) -> None:
    config = job(secured, "never-read", tmp_path, secured.scram_jaas("not-the-password"))
    with pytest.raises(SaslAuthenticationError) as failed:
        Pipeline(config).run(timeout_s=60)
    assert "Authentication failed" in str(failed.value)
    assert "not-the-password" not in str(failed.value)
    assert not (tmp_path / "checkpoints").exists()  # Spark never started a query
