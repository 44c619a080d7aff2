"""Synchronous requests to a local control plane as its administrator, for what sets a cluster up:
server-side apply (CRDs are too large for a client-side apply's annotation), dry-run creates, deletes.

Objects are plain ``dict``s; where an object's kind lives (its plural, whether it is namespaced) is
asked of the API's discovery once per group version, so kinds from CRDs installed a moment ago work too.
"""

from __future__ import annotations

import ssl
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Self
from urllib.parse import quote

import httpx

KubeObject = dict[str, Any]
FIELD_MANAGER = "muster"


class ApiError(RuntimeError):
    """The API server answered with an error status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


class AdminApi:
    """JSON requests to ``url`` with the admin bearer ``token``, trusting ``ca_file``."""

    def __init__(self, url: str, token: str, ca_file: Path, timeout: float = 30.0) -> None:
        context = ssl.create_default_context(cafile=str(ca_file))
        self.http = httpx.Client(base_url=url, verify=context, timeout=timeout,
                                 headers={"Authorization": f"Bearer {token}", "Accept": "application/json"})
        self._kinds: dict[str, dict[str, tuple[str, bool]]] = {}

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    # -- paths -------------------------------------------------------------------------------------

    def _discover(self, api_version: str) -> dict[str, tuple[str, bool]]:
        base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        answer = self._send("GET", base)
        return {r["kind"]: (r["name"], bool(r["namespaced"])) for r in answer.get("resources") or []
                if "/" not in r["name"]}

    def where(self, api_version: str, kind: str) -> tuple[str, bool]:
        """The plural of ``kind`` in ``api_version`` and whether it is namespaced (asked again on a miss)."""
        kinds = self._kinds.get(api_version)
        if kinds is None or kind not in kinds:
            kinds = self._kinds[api_version] = self._discover(api_version)
        if kind not in kinds:
            raise ApiError(404, f"the API server does not serve {kind} in {api_version}")
        return kinds[kind]

    def path(self, api_version: str, kind: str, name: str | None = None, namespace: str | None = None) -> str:
        plural, namespaced = self.where(api_version, kind)
        base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        if namespaced:
            base += f"/namespaces/{quote(namespace or 'default', safe='')}"
        base += f"/{plural}"
        return f"{base}/{quote(name, safe='')}" if name else base

    def _object_path(self, obj: KubeObject) -> str:
        meta = obj["metadata"]
        return self.path(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))

    # -- requests ----------------------------------------------------------------------------------

    def _send(self, method: str, path: str, *, params: dict[str, str] | None = None, json: Any = None,
              content_type: str = "application/json") -> KubeObject:
        answer = self.http.request(method, path, params=params, json=json, headers={"Content-Type": content_type})
        if answer.status_code >= 300:
            try:
                message = str(answer.json().get("message") or answer.text)
            except ValueError:
                message = answer.text
            raise ApiError(answer.status_code, message[:2000])
        decoded: KubeObject = answer.json() if answer.content else {}
        return decoded

    def apply(self, obj: KubeObject) -> KubeObject:
        """Server-side apply of ``obj``, taking over fields other managers set."""
        return self._send("PATCH", self._object_path(obj), json=obj, content_type="application/apply-patch+yaml",
                          params={"fieldManager": FIELD_MANAGER, "force": "true"})

    def create(self, obj: KubeObject, *, dry_run: bool = False) -> KubeObject:
        """POST ``obj``; with ``dry_run`` the server admits it (webhooks included) and stores nothing."""
        meta = obj["metadata"]
        path = self.path(obj["apiVersion"], obj["kind"], namespace=meta.get("namespace"))
        return self._send("POST", path, json=obj, params={"dryRun": "All"} if dry_run else None)

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> KubeObject | None:
        try:
            return self._send("GET", self.path(api_version, kind, name, namespace))
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> bool:
        """Delete the object; whether there was one."""
        try:
            self._send("DELETE", self.path(api_version, kind, name, namespace))
        except ApiError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def wait_established(self, names: list[str], timeout_s: float) -> str | None:
        """Wait until the API serves every named CustomResourceDefinition; the first one still not served after
        ``timeout_s`` (None: all are)."""
        deadline = time.monotonic() + timeout_s
        for name in names:
            while not established(self.get(CRD_API, "CustomResourceDefinition", name)):
                if time.monotonic() > deadline:
                    return name
                time.sleep(0.1)
        return None


CRD_API = "apiextensions.k8s.io/v1"


def established(crd: KubeObject | None) -> bool:
    """Whether a CustomResourceDefinition's API is served (its ``Established`` condition)."""
    conditions = ((crd or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)
