"""Building an ``ApiClient``: explicit server URL, then ``KUBECONFIG``, then in-cluster, then ~/.kube/config."""

from __future__ import annotations

import os
import urllib.request
from collections.abc import Mapping
from urllib.parse import urlsplit

import aiohttp
from kubernetes_asyncio.client import ApiClient, Configuration
from kubernetes_asyncio.config import load_kube_config
from kubernetes_asyncio.config.config_exception import ConfigException
from kubernetes_asyncio.config.incluster_config import (
    SERVICE_CERT_FILENAME,
    SERVICE_HOST_ENV_NAME,
    SERVICE_TOKEN_FILENAME,
    InClusterConfigLoader,
)
from kubernetes_asyncio.config.kube_config import KubeConfigLoader

DEFAULT_KUBECONFIG = "~/.kube/config"
#: the read buffer kubernetes-asyncio gives its session (watch events of large objects exceed aiohttp's default)
READ_BUFSIZE = 2**21


class KubeConfigError(RuntimeError):
    """No way to reach a Kubernetes API server was found."""


async def build_api_client(
    server_url: str | None = None,
    *,
    kubeconfig: str | None = None,
    context: str | None = None,
    environ: Mapping[str, str] | None = None,
    connection_pool_size: int = 16,
) -> ApiClient:
    """A new ``ApiClient`` (the caller closes it) for the first source that applies.

    1. ``server_url`` (e.g. a simulated cluster on ``http://127.0.0.1:PORT``): no credentials;
    2. ``kubeconfig`` or the ``KUBECONFIG`` variable (``:``-separated files are merged), ``context``
       picks a context other than the current one;
    3. the in-cluster service account, when ``KUBERNETES_SERVICE_HOST`` is set;
    4. ``~/.kube/config`` when it exists.
    """
    env = os.environ if environ is None else environ
    config = Configuration()
    config.connection_pool_maxsize = connection_pool_size
    if server_url:
        config.host = server_url.rstrip("/")
        return _api_client(config)
    path = kubeconfig or env.get("KUBECONFIG")
    if path:
        loader = await load_kube_config(config_file=path, context=context, client_configuration=config,
                                        persist_config=False)
        _refresh_exec_tokens(loader, config)
        return _api_client(config)
    if env.get(SERVICE_HOST_ENV_NAME):
        try:
            InClusterConfigLoader(SERVICE_TOKEN_FILENAME, SERVICE_CERT_FILENAME,
                                  environ=dict(env)).load_and_set(config)
        except ConfigException as exc:
            raise KubeConfigError(f"in-cluster configuration failed: {exc}") from exc
        return _api_client(config)
    default = _existing_default_kubeconfig()
    if default:
        loader = await load_kube_config(config_file=default, context=context, client_configuration=config,
                                        persist_config=False)
        _refresh_exec_tokens(loader, config)
        return _api_client(config)
    raise KubeConfigError(
        "no Kubernetes API server: give a server URL, set KUBECONFIG, run in a pod, or create ~/.kube/config"
    )


def _api_client(config: Configuration) -> ApiClient:
    """An ``ApiClient`` whose HTTP session does not look at the environment on every request.

    kubernetes-asyncio makes its aiohttp session with ``trust_env=True``, so every request first reads
    ``~/.netrc`` in a worker thread (for credentials the kubeconfig already gives) and looks the proxy
    variables up in another: two thread hops and about an eighth of a busy dispatcher's CPU (profiled under
    ``muster bench kueue --kube real``). Here the proxy the environment names for the API server (the
    standard ``HTTPS_PROXY``/``HTTP_PROXY``/``NO_PROXY`` rules) is looked up once, when the kubeconfig
    names none, and the session is made again without the per-request lookups, on the same connector."""
    if not config.proxy:
        config.proxy = environment_proxy(config.host)
    api = ApiClient(configuration=config)
    rest = api.rest_client
    connector = rest.pool_manager.connector
    rest.pool_manager.detach()  # its connector (pool size, TLS context) goes on serving the new session
    rest.pool_manager = aiohttp.ClientSession(connector=connector, trust_env=False, read_bufsize=READ_BUFSIZE)
    return api


def environment_proxy(url: str | None) -> str | None:
    """The proxy the environment names for ``url`` (``<scheme>_proxy``, unless ``no_proxy`` bypasses its
    host), as a session with ``trust_env`` would use it; None for none."""
    parts = urlsplit(url or "")
    if not parts.hostname:
        return None
    proxy = urllib.request.getproxies_environment().get(parts.scheme or "https")
    if not proxy or urllib.request.proxy_bypass(parts.hostname):  # as aiohttp asks it (no_proxy)
        return None
    return proxy


def _refresh_exec_tokens(loader: KubeConfigLoader, config: Configuration) -> None:
    """Short-lived exec-plugin tokens (EKS, GKE, OIDC helpers): run the plugin again once one expires.

    The hook runs before each request; the loader re-runs the plugin only after the expiry it reported.
    """
    user = getattr(loader, "_user", None)  # the same private field the library's own refresh_token reads
    if not user or "exec" not in user:
        return

    async def refresh(cfg: Configuration) -> None:
        await loader.load_from_exec_plugin()
        token = getattr(loader, "token", None)
        if token:
            cfg.api_key["BearerToken"] = token

    config.refresh_api_key_hook = refresh


def _existing_default_kubeconfig() -> str | None:
    path = os.path.expanduser(DEFAULT_KUBECONFIG)
    return path if os.path.exists(path) else None
