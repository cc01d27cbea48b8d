"""The console's security page and denied operations, on a SASL_SSL cluster with the ACL
authorizer (``DevSecurity``: ``admin`` the super user, ``client`` with nothing until
granted).  A console as ``client`` shows what the authorizer refuses as denied, inside the
page; a console as ``admin`` lists the ACLs, SCRAM users and quotas, creates a SCRAM user
with which a real client then authenticates, and deletes it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cluster_support import ClusterFactory, admin, create_topic, wait_until
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)
from console_support import EXPECT_MS, Guarded, api
from playwright.sync_api import expect

from millrace.client.admin import (
    ClientQuotaAlteration,
    ClientQuotaEntity,
    ClientQuotaOp,
    KafkaAdminClient,
)
from millrace.launcher.console_process import ConsoleProcess
from millrace.launcher.dev_security import ADMIN_USER, CLIENT_USER
from millrace.launcher.local_cluster import LocalCluster

pytestmark = pytest.mark.integration

AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
              "super.users": f"User:{ADMIN_USER}"}
TOPIC = "guarded-ledger"


def _settings(cluster: LocalCluster, user: str) -> dict[str, str]:
    return {k: v for k, v in cluster.client_properties(user).items()
            if k != "bootstrap.servers"}


def test_denied_is_shown_as_denied_and_admin_manages_users_acls_and_quotas(
        fresh_cluster: ClusterFactory, guarded: Guarded, tmp_path: Path,
        shots: Path) -> None:
    cluster = fresh_cluster(secured=True, overrides=AUTHORIZER)
    boss = admin(cluster.bootstrap, cluster.client_properties(ADMIN_USER))
    create_topic(boss, TOPIC, 1, 3)
    grant = AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL,
                       f"User:{CLIENT_USER}", "*", AclOperation.DESCRIBE,
                       AclPermissionType.ALLOW)
    for future in boss.create_acls([grant]).values():
        future.result(30)
    quotas = KafkaAdminClient(cluster.client_properties(ADMIN_USER))
    try:
        quotas.alter_client_quotas([ClientQuotaAlteration(
            ClientQuotaEntity({"user": CLIENT_USER}),
            [ClientQuotaOp("producer_byte_rate", 1048576.0)])])[
            ClientQuotaEntity({"user": CLIENT_USER})].result()
    finally:
        quotas.close()
    page = guarded.page

    # as client: the topic it may describe, and the rest refused as denied
    with ConsoleProcess(cluster.bootstrap, tmp_path / "as-client", interval_s=0.5,
                        client_properties=_settings(cluster, CLIENT_USER)) as console:
        page.goto(console.url + "#/topics")
        expect(page.locator(f'[data-testid="topic-row"][data-topic="{TOPIC}"]')
               ).to_be_visible(timeout=EXPECT_MS)
        page.goto(console.url + "#/security")
        expect(page.get_by_test_id("view-security")).to_be_visible(timeout=EXPECT_MS)
        expect(page.get_by_test_id("denied").first).to_contain_text(
            "CLUSTER_AUTHORIZATION_FAILED", timeout=EXPECT_MS)
        status, body = api(console, "api/produce", {"topic": TOPIC, "value": "x"})
        assert status == 403 and body["denied"] is True, body
        # no Write on any topic: the idempotent producer's InitProducerId is refused first
        assert "AUTHORIZATION_FAILED" in body["error"], body
        status, body = api(console, "api/users", {"name": "mallory", "password": "pw"})
        assert status == 403 and body["denied"] is True, body
        page.screenshot(path=str(shots / "security-denied.png"), full_page=True)
        # a journey: the brokers refuse to trace for this user (no Describe or Alter on
        # the cluster), shown as denied, and the send itself is refused (no Write)
        journey = _journey(console)
        assert journey["state"] == "failed", journey
        denied = journey["denied"]
        assert any(d.startswith("/v1/traces/arm") for d in denied), denied
        assert any(d.startswith("the record was not sent") for d in denied), denied
        assert all("AUTHORIZATION_FAILED" in d for d in denied), denied
        page.goto(console.url + f"#/journey/{journey['trace_id']}")
        expect(page.get_by_test_id("journey").get_by_test_id("denied").first
               ).to_contain_text("AUTHORIZATION_FAILED", timeout=EXPECT_MS)

    # as admin: everything, and a SCRAM user made in the form works
    with ConsoleProcess(cluster.bootstrap, tmp_path / "as-admin", interval_s=0.5,
                        client_properties=_settings(cluster, ADMIN_USER)) as console:
        page.goto(console.url + "#/security")
        acl = page.locator(f'[data-testid="acl-row"][data-principal="User:{CLIENT_USER}"]')
        expect(acl.first).to_contain_text("DESCRIBE", timeout=EXPECT_MS)
        expect(page.locator(f'[data-testid="user-row"][data-user="{ADMIN_USER}"]')
               ).to_be_visible(timeout=EXPECT_MS)
        expect(page.get_by_test_id("quota-row").first).to_contain_text(CLIENT_USER,
                                                                       timeout=EXPECT_MS)
        form = page.get_by_test_id("create-user")
        form.locator('[name="name"]').fill("carol")
        form.locator('[name="password"]').fill("carol-secret-7")
        form.locator('select[name="mechanism"]').select_option("SCRAM-SHA-512")
        form.locator('button[type="submit"]').click()
        row = page.locator('[data-testid="user-row"][data-user="carol"]')
        expect(row).to_contain_text("SCRAM-SHA-512", timeout=EXPECT_MS)
        page.screenshot(path=str(shots / "security.png"), full_page=True)
        assert "carol-secret-7" not in console.logs()

        carol = {**cluster.client_properties(CLIENT_USER), "sasl.username": "carol",
                 "sasl.password": "carol-secret-7"}
        wait_until("carol authenticating", lambda: _authenticates(cluster, carol))

        # a journey over SASL_SSL, the brokers' HTTP views read with the admin's password
        journey = _journey(console)
        assert journey["state"] == "done" and not journey["denied"], journey
        stages = {s["stage"] for s in journey["stages"]}
        assert {"request.sent", "broker.append", "response.received",
                "consumer.poll"} <= stages, stages

        page.once("dialog", lambda dialog: dialog.accept())
        row.get_by_test_id("delete-user").click()
        expect(row).to_have_count(0, timeout=EXPECT_MS)
        status, body = api(console, "api/users/carol?mechanism=SCRAM-SHA-1", method="DELETE")
        assert status == 400 and "mechanism must be one of" in body["error"], body


def _journey(console: ConsoleProcess) -> dict[str, Any]:
    status, started = api(console, "api/journey", {"topic": TOPIC, "value": "traced"})
    assert status == 202, started

    def finished() -> dict[str, Any] | None:
        status, journey = api(console, f"api/journey/{started['trace_id']}")
        assert status == 200, journey
        return journey if journey["state"] in ("done", "failed") else None
    journey: dict[str, Any] = wait_until("the journey traced", finished)
    return journey


def _authenticates(cluster: LocalCluster, settings: dict[str, str]) -> bool:
    try:
        admin(cluster.bootstrap, {**settings}).list_topics(timeout=10)
    except KafkaException:
        return False
    return True
