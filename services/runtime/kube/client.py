"""Building an ``ApiClient``: explicit server URL, then ``KUBECONFIG``, then in-cluster, then ~/.kube/config."""

from __future__ import annotations

import os
from collections.abc import Mapping

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
        return ApiClient(configuration=config)
    path = kubeconfig or env.get("KUBECONFIG")
    if path:
        loader = await load_kube_config(config_file=path, context=context, client_configuration=config,
                                        persist_config=False)
        _refresh_exec_tokens(loader, config)
        return ApiClient(configuration=config)
    if env.get(SERVICE_HOST_ENV_NAME):
        try:
            InClusterConfigLoader(SERVICE_TOKEN_FILENAME, SERVICE_CERT_FILENAME,
                                  environ=dict(env)).load_and_set(config)
        except ConfigException as exc:
            raise KubeConfigError(f"in-cluster configuration failed: {exc}") from exc
        return ApiClient(configuration=config)
    default = _existing_default_kubeconfig()
    if default:
        loader = await load_kube_config(config_file=default, context=context, client_configuration=config,
                                        persist_config=False)
        _refresh_exec_tokens(loader, config)
        return ApiClient(configuration=config)
    raise KubeConfigError(
        "no Kubernetes API server: give a server URL, set KUBECONFIG, run in a pod, or create ~/.kube/config"
    )


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
