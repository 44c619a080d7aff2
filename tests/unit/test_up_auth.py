"""``muster up``'s authentication choices: on from three brokers unless told, each service started with its
own principal, owner-only client files per principal a person needs."""

from __future__ import annotations

from pathlib import Path

from schemas.config import MusterConfig
from services.cli.up import DASHBOARDS, DEFAULT_CLUSTER, auth_default, broker_dir, tenants_of, write_client_env
from services.runtime.kafka.acls import SERVICE_PRINCIPALS
from services.runtime.kafka.principals import KafkaCredentials
from services.runtime.options import ClusterAccess
from services.runtime.supervise import service_children
from services.spec.cluster_file import load_cluster_file


def test_auth_is_on_from_three_brokers_unless_told() -> None:
    assert (auth_default(None, 1), auth_default(None, 2), auth_default(None, 3)) == (False, False, True)
    assert auth_default(False, 3) is False and auth_default(True, 1) is True
    assert broker_dir(Path("s"), 3, auth=True) == Path("s/kafka-3-brokers-auth")
    assert broker_dir(Path("s"), 1) == Path("s/kafka")


def test_each_service_gets_its_own_principal(tmp_path: Path) -> None:
    cfg: MusterConfig = load_cluster_file(DEFAULT_CLUSTER)
    tenants = tenants_of(cfg)
    creds = KafkaCredentials.for_tenants(tenants, DASHBOARDS)
    env = {s: creds.service(s, "h:1").environment() for s in SERVICE_PRINCIPALS}
    children = service_children(cfg, tmp_path, "h:1", {"east": ClusterAccess("http://k")}, tmp_path / "c.yaml",
                                8000, kafka_env=env)
    users = {c.name.split("/")[0]: c.env["MUSTER_KAFKA_SASL_USERNAME"] for c in children}
    assert users == SERVICE_PRINCIPALS
    assert all(c.env["MUSTER_KAFKA_SECURITY_PROTOCOL"] == "SASL_PLAINTEXT" for c in children)
    open_children = service_children(cfg, tmp_path, "h:1", {"east": ClusterAccess("http://k")}, tmp_path / "c.yaml",
                                     8000)
    assert all(c.env == {"MUSTER_KAFKA_BOOTSTRAP": "h:1"} for c in open_children)

    files = write_client_env(tmp_path, creds, "h:1", tenants, DASHBOARDS)
    assert set(files) == {"admin", *(f"tenant-{t}" for t in tenants), "dashboard-local"}
    for path in files.values():
        assert path.stat().st_mode & 0o077 == 0
    assert f"MUSTER_KAFKA_SASL_PASSWORD={creds.password('tenant-team-a')}" in files["tenant-team-a"].read_text()
    assert "MUSTER_KAFKA_SASL_USERNAME=dashboard-local" in files["dashboard-local"].read_text()
