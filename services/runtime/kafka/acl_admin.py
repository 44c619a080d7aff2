"""Sending the ACL table (``acls``) and SCRAM users to the broker: one CreateAcls request (API 30, version 1, the oldest
Kafka 4 still serves) holding every binding. Creating an ACL that exists is a no-op for the broker, so
this is idempotent. aiokafka's admin client has no ACL call; its protocol classes are used directly."""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import time
from collections.abc import Mapping, Sequence
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import for_code
from aiokafka.protocol.admin import CreateAclsRequest_v1, DescribeAclsRequest_v1
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import CompactArray, CompactBytes, CompactString, Int8, Int16, Int32, Schema, TaggedFields

from services.runtime.kafka.acls import ALLOW, ANY_HOST, AclBinding, Operation, PatternType, ResourceType
from services.runtime.kafka.settings import KafkaSettings


class _CreateAcls(Request[CreateAclsRequest_v1]):  # type: ignore[misc]
    """CreateAcls with many creations (aiokafka's own request class carries one)."""

    API_KEY = 30

    def __init__(self, bindings: Sequence[AclBinding]) -> None:
        self._bindings = tuple(bindings)

    def build(self, request_struct_class: type[CreateAclsRequest_v1]) -> CreateAclsRequest_v1:
        return request_struct_class([
            (int(b.resource), b.name, int(b.pattern), b.kafka_principal, ANY_HOST, int(b.operation), ALLOW)
            for b in self._bindings
        ])


class _DescribeAllAcls(Request[DescribeAclsRequest_v1]):  # type: ignore[misc]
    """DescribeAcls matching every ACL (resource, pattern, operation and permission ANY)."""

    API_KEY = 29
    ANY = 1

    def build(self, request_struct_class: type[DescribeAclsRequest_v1]) -> DescribeAclsRequest_v1:
        return request_struct_class(self.ANY, None, self.ANY, None, None, self.ANY, self.ANY)


class AclError(RuntimeError):
    """The broker refused one or more ACLs."""


async def _ask(settings: KafkaSettings, request: Request) -> Any:
    """Send one request with a short-lived admin client: aiokafka has no public call for ACLs or SCRAM
    users, so the request goes through its generic ``_send_request``."""
    admin = AIOKafkaAdminClient(**settings.client_options())
    await admin.start()
    try:
        return await admin._send_request(request)
    finally:
        await admin.close()


async def create_acls(settings: KafkaSettings, bindings: Sequence[AclBinding]) -> int:
    """Create ``bindings`` (as a super user: ``settings`` must be the admin's). Returns how many were sent."""
    if not bindings:
        return 0
    response = await _ask(settings, _CreateAcls(bindings))
    failures = []
    for binding, (code, message) in zip(bindings, response.creation_responses, strict=True):
        if code != 0:
            failures.append(f"{binding.describe()}: {message or for_code(code).__name__}")
    if failures:
        raise AclError("the broker refused ACLs:\n" + "\n".join(failures))
    return len(bindings)


async def describe_acls(settings: KafkaSettings, *, node_id: int | None = None) -> set[AclBinding]:
    """Every ALLOW ACL one broker (``node_id``, else any) knows now."""
    admin = AIOKafkaAdminClient(**settings.client_options())
    await admin.start()
    try:
        if node_id is None:
            response = await admin._send_request(_DescribeAllAcls())  # aiokafka has no public ACL call
        else:
            response = await admin._send_request_to_node(node_id, _DescribeAllAcls())
    finally:
        await admin.close()
    if response.error_code != 0:
        raise AclError(f"describing ACLs: {response.error_message or for_code(response.error_code).__name__}")
    found: set[AclBinding] = set()
    for resource_type, name, pattern, entries in response.resources:
        for principal, _host, operation, permission in entries:
            if permission != ALLOW or not principal.startswith("User:"):
                continue
            try:
                found.add(AclBinding(principal.removeprefix("User:"), Operation(operation), ResourceType(resource_type),
                                     name, PatternType(pattern)))
            except ValueError:
                continue  # a kind this table never grants
    return found


async def wait_acls(settings: KafkaSettings, bindings: Sequence[AclBinding], *, timeout_s: float = 60.0) -> None:
    """Wait until every broker of the cluster enforces ``bindings`` (each applies the metadata on its own:
    a client that starts right after ``create_acls`` could otherwise be refused for a moment)."""
    wanted = set(bindings)
    admin = AIOKafkaAdminClient(**settings.client_options())
    await admin.start()
    try:
        nodes = [b["node_id"] for b in (await admin.describe_cluster())["brokers"]]
    finally:
        await admin.close()
    deadline = time.monotonic() + timeout_s
    for node in nodes:
        while True:
            missing = wanted - await describe_acls(settings, node_id=node)
            if not missing:
                break
            if time.monotonic() > deadline:
                raise AclError(f"broker {node} does not enforce {len(missing)} ACLs after {timeout_s:g}s, e.g. "
                               f"{min(missing).describe()}")
            await asyncio.sleep(0.2)


# ---------------------------------------------------------------- SCRAM users (AlterUserScramCredentials)

SCRAM_SHA_512 = 2  # Kafka's ScramMechanism code
SCRAM_ITERATIONS = 4096  # Kafka's minimum, and its default


class _AlterScramResponse(Response):  # type: ignore[misc]
    API_KEY = 51
    API_VERSION = 0
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("results", CompactArray(("user", CompactString("utf-8")), ("error_code", Int16),
                                 ("error_message", CompactString("utf-8")), ("tags", TaggedFields))),
        ("tags", TaggedFields),
    )


class _AlterScramStruct(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = 51
    API_VERSION = 0
    RESPONSE_TYPE = _AlterScramResponse
    SCHEMA = Schema(
        ("deletions", CompactArray(("name", CompactString("utf-8")), ("mechanism", Int8), ("tags", TaggedFields))),
        ("upsertions", CompactArray(("name", CompactString("utf-8")), ("mechanism", Int8), ("iterations", Int32),
                                    ("salt", CompactBytes), ("salted_password", CompactBytes), ("tags", TaggedFields))),
        ("tags", TaggedFields),
    )


class _AlterScram(Request[_AlterScramStruct]):  # type: ignore[misc]
    API_KEY = 51

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = dict(users)

    def build(self, request_struct_class: type[_AlterScramStruct]) -> _AlterScramStruct:
        upsertions: list[tuple[str, int, int, bytes, bytes, dict[int, bytes]]] = []
        for name, password in sorted(self._users.items()):
            salt = secrets.token_bytes(32)
            salted = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, SCRAM_ITERATIONS)
            upsertions.append((name, SCRAM_SHA_512, SCRAM_ITERATIONS, salt, salted, {}))
        return request_struct_class([], upsertions, {})


async def upsert_scram_users(settings: KafkaSettings, users: Mapping[str, str]) -> None:
    """Create (or set the password of) SCRAM-SHA-512 users on a running cluster, as a super user: the
    principals that were not known when the storage was formatted (a tenant added later)."""
    if not users:
        return
    response = await _ask(settings, _AlterScram(users))
    failures = [f"{user}: {message or for_code(code).__name__}" for user, code, message, _ in response.results if code]
    if failures:
        raise AclError("the broker refused SCRAM users:\n" + "\n".join(failures))
