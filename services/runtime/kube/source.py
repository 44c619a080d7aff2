"""Where an informer's lists and watches come from: the API server, through ``KubeRest``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from services.runtime.kube.resources import Resource
from services.runtime.kube.rest import KubeObject, KubeRest


class EventSource(Protocol):
    """A list of objects with its resourceVersion, and raw watch events from a resourceVersion on."""

    def describe(self) -> str: ...

    async def list(self) -> tuple[list[KubeObject], str]: ...

    def watch(self, resource_version: str) -> AsyncIterator[KubeObject]: ...


class ApiEventSource:
    """One resource type, optionally one namespace and label / field selectors."""

    def __init__(
        self,
        rest: KubeRest,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        watch_timeout_seconds: int = 300,
    ) -> None:
        if namespace and not resource.namespaced:
            raise ValueError(f"{resource.kind} is cluster-scoped")
        self.rest = rest
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.watch_timeout_seconds = watch_timeout_seconds

    def describe(self) -> str:
        where = f" in {self.namespace}" if self.namespace else ""
        sel = f" [{self.label_selector}]" if self.label_selector else ""
        return f"{self.resource.plural}{where}{sel}"

    async def list(self) -> tuple[list[KubeObject], str]:
        return await self.rest.list(self.resource, self.namespace, label_selector=self.label_selector,
                                    field_selector=self.field_selector)

    def watch(self, resource_version: str) -> AsyncIterator[KubeObject]:
        return self.rest.watch(self.resource, self.namespace, resource_version=resource_version,
                               label_selector=self.label_selector, field_selector=self.field_selector,
                               timeout_seconds=self.watch_timeout_seconds)
