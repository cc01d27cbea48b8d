"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), v0 (KIP-554):
thin adapters over ``millrace.broker.security.scram_admin`` (the rules) and the broker's
``CredentialCache`` (``ctx.services.credentials``: its store and the cached credentials).

Describe is answered by any broker from the store.  Alter, in a ZooKeeper cluster, only
by the active controller (Kafka's ZooKeeper mode): any other broker answers
NOT_CONTROLLER for every user named, and the admin client asks the controller again.
A single node always answers.  After a write the broker updates its own cache at once;
in a cluster every broker also re-reads the user on the change notification.

Authorization (Kafka 3.9's ``KafkaApis``): Describe needs Describe on the Cluster, else
CLUSTER_AUTHORIZATION_FAILED top-level and on one result per user named (Kafka's error
response leaves those results' user empty; here they name the user).  Alter needs Alter
on the Cluster, asked after the controller check as Kafka does (so a non-controller still
answers NOT_CONTROLLER), else CLUSTER_AUTHORIZATION_FAILED for every user named.  Nothing
is read or written for a refused request.
"""

from __future__ import annotations

import logging

from millrace.broker.context import RequestContext
from millrace.broker.handlers import handles
from millrace.broker.security.scram_admin import (
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
    alter_user_scram_credentials,
    describe_user_scram_credentials,
)
from millrace.common.errors import Errors
from millrace.protocol import ApiKey
from millrace.protocol.types import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from millrace.security.acl import AclOperation

log = logging.getLogger(__name__)


@handles(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS)
async def handle_describe_user_scram_credentials(
        ctx: RequestContext, body: DescribeUserScramCredentialsRequest
) -> DescribeUserScramCredentialsResponse:
    cls = DescribeUserScramCredentialsResponse
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        denied = Errors.CLUSTER_AUTHORIZATION_FAILED
        return cls(throttle_time_ms=0, error_code=denied, error_message=None, results=[
            cls.DescribeUserScramCredentialsResult(user=u.name, error_code=denied,
                                                   error_message=None, credential_infos=[])
            for u in body.users or ()])
    cache = ctx.services.credentials
    store = cache.store
    users = None if body.users is None else [u.name for u in body.users]
    try:
        results = await cache.run_store(lambda: describe_user_scram_credentials(store, users))
    except Exception as e:  # the store is unreachable (ZooKeeper)
        log.warning("describing SCRAM credentials failed: %s", e)
        return cls(throttle_time_ms=0, error_code=Errors.UNKNOWN_SERVER_ERROR,
                   error_message=f"Error describing SCRAM credentials: {e}", results=[])
    info_cls = cls.DescribeUserScramCredentialsResult.CredentialInfo
    return cls(throttle_time_ms=0, error_code=Errors.NONE, error_message=None, results=[
        cls.DescribeUserScramCredentialsResult(
            user=r.user, error_code=r.error, error_message=r.message,
            credential_infos=[info_cls(mechanism=m, iterations=i) for m, i in r.credentials])
        for r in results])


@handles(ApiKey.ALTER_USER_SCRAM_CREDENTIALS)
async def handle_alter_user_scram_credentials(
        ctx: RequestContext, body: AlterUserScramCredentialsRequest
) -> AlterUserScramCredentialsResponse:
    cls = AlterUserScramCredentialsResponse
    result_cls = cls.AlterUserScramCredentialsResult
    deletions = [ScramCredentialDeletion(d.name, d.mechanism) for d in body.deletions]
    upsertions = [ScramCredentialUpsertion(u.name, u.mechanism, u.iterations, u.salt,
                                           u.salted_password) for u in body.upsertions]
    users = dict.fromkeys([d.user for d in deletions] + [u.user for u in upsertions])
    cluster = ctx.services.cluster
    if cluster is not None and (cluster.controller is None or not cluster.controller.is_active):
        return cls(throttle_time_ms=0, results=[
            result_cls(user=user, error_code=Errors.NOT_CONTROLLER, error_message=None)
            for user in users])
    if not ctx.authorize_cluster(AclOperation.ALTER):
        return cls(throttle_time_ms=0, results=[
            result_cls(user=user, error_code=Errors.CLUSTER_AUTHORIZATION_FAILED,
                       error_message=None) for user in users])
    cache = ctx.services.credentials
    store = cache.store
    async with cache.alter_lock:
        outcome = await cache.run_store(
            lambda: alter_user_scram_credentials(store, deletions, upsertions))
    for user, configs in outcome.written.items():
        cache.update_user(user, configs)
        log.info("altered the SCRAM credentials of user %r", user)
    return cls(throttle_time_ms=0, results=[
        result_cls(user=r.user, error_code=r.error, error_message=r.message)
        for r in outcome.results])
