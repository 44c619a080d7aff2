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


async def test_the_session_looks_at_no_environment_per_request_and_still_serves(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """kubernetes-asyncio's own session reads ~/.netrc and the proxy variables in worker threads on every
    request; ours does not, and still talks to the server on the same connector."""
    from aiohttp import web

    seen: list[str | None] = []

    async def version(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization"))
        return web.json_response({"major": "1", "minor": "37"})

    app = web.Application()
    app.router.add_get("/version", version)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".netrc").write_text("machine 127.0.0.1 login someone password leaked\n")
    try:
        api = await build_api_client(f"http://127.0.0.1:{port}")
        async with api:
            assert api.rest_client.pool_manager.trust_env is False
            response = await api.rest_client.request("GET", f"http://127.0.0.1:{port}/version")
            assert response.status == 200 and seen == [None]  # the netrc's credentials were never read
    finally:
        await runner.cleanup()


def test_the_proxy_the_environment_names_is_looked_up_once_no_proxy_respected(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from services.runtime.kube.client import environment_proxy

    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,.internal")
    assert environment_proxy("https://10.0.0.1:6443") == "http://proxy.example:3128"
    assert environment_proxy("https://127.0.0.1:6443") is None
    assert environment_proxy("https://api.cluster.internal") is None
    assert environment_proxy("http://10.0.0.1:8080") is None  # no HTTP_PROXY
    assert environment_proxy(None) is None


async def test_a_kubeconfig_proxy_wins_over_the_environments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://env-proxy:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    api = await build_api_client(environ={"KUBECONFIG": str(kubeconfig(tmp_path / "kc", "https://10.0.0.1:6443", "t"))})
    async with api:
        assert api.configuration.proxy == "http://env-proxy:3128"
    config = yaml.safe_load((tmp_path / "kc").read_text())
    config["clusters"][0]["cluster"]["proxy-url"] = "http://own-proxy:8080"
    (tmp_path / "kc").write_text(yaml.safe_dump(config))
    api = await build_api_client(environ={"KUBECONFIG": str(tmp_path / "kc")})
    async with api:
        assert api.configuration.proxy == "http://own-proxy:8080"
