"""Client construction order: explicit URL, KUBECONFIG, in-cluster, ~/.kube/config."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from services.runtime.kube import KubeConfigError, build_api_client


def kubeconfig(path: Path, server: str, token: str) -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "main",
        "clusters": [{"name": "c", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "main", "context": {"cluster": "c", "user": "u"}},
                     {"name": "other", "context": {"cluster": "c", "user": "u", "namespace": "x"}}],
    }))
    return path


async def test_explicit_url_wins(tmp_path: Path) -> None:
    env = {"KUBECONFIG": str(kubeconfig(tmp_path / "kc", "https://10.0.0.1:6443", "t"))}
    api = await build_api_client("http://127.0.0.1:8123/", environ=env)
    async with api:
        assert api.configuration.host == "http://127.0.0.1:8123"


async def test_kubeconfig_from_environment(tmp_path: Path) -> None:
    env = {"KUBECONFIG": str(kubeconfig(tmp_path / "kc", "https://127.0.0.1:6443", "secret-token"))}
    api = await build_api_client(environ=env)
    async with api:
        assert api.configuration.host == "https://127.0.0.1:6443"
        settings = await api.configuration.auth_settings()
        assert settings["BearerToken"]["value"] == "Bearer secret-token"


async def test_in_cluster_needs_its_service_account(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(KubeConfigError, match="in-cluster"):
        await build_api_client(environ={"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"})


async def test_home_kubeconfig_is_the_last_resort(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(KubeConfigError, match="no Kubernetes API server"):
        await build_api_client(environ={})
    (tmp_path / ".kube").mkdir()
    kubeconfig(tmp_path / ".kube" / "config", "https://127.0.0.1:7443", "t")
    api = await build_api_client(environ={})
    async with api:
        assert api.configuration.host == "https://127.0.0.1:7443"


async def test_expiring_exec_tokens_are_fetched_again(tmp_path: Path) -> None:
    counter = tmp_path / "runs"
    plugin = tmp_path / "credential-plugin"
    plugin.write_text(
        "#!/bin/sh\n"
        f"echo x >> {counter}\n"
        "n=$(wc -l < " + str(counter) + " | tr -d ' ')\n"
        'printf \'{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",'
        '"status":{"token":"tok-%s","expirationTimestamp":"2000-01-01T00:00:00Z"}}\' "$n"\n'
    )
    plugin.chmod(0o755)
    config_file = tmp_path / "kc"
    config_file.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "main",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
        "users": [{"name": "u", "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1",
                                                  "command": str(plugin), "interactiveMode": "Never"}}}],
        "contexts": [{"name": "main", "context": {"cluster": "c", "user": "u"}}],
    }))
    api = await build_api_client(environ={"KUBECONFIG": str(config_file)})
    async with api:
        first = (await api.configuration.auth_settings())["BearerToken"]["value"]
        second = (await api.configuration.auth_settings())["BearerToken"]["value"]
    assert first != second and second.startswith("Bearer tok-")
