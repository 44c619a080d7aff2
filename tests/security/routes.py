"""The gateway's routes as the application really serves them (included routers walked), not as documented."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

#: routes that answer without a token: health, metrics and the API's own documentation pages
OPEN_PATHS = frozenset({"/healthz", "/metrics", "/openapi.json", "/docs", "/ui"})
#: mounted static files that answer without a token: the dashboard's and the API docs' scripts and styles
STATIC_MOUNTS = frozenset({"/ui/static", "/docs/assets"})


def served_routes(app: FastAPI) -> set[tuple[str, str]]:
    """Every (method, path) the app answers, HEAD left out."""
    found: set[tuple[str, str]] = set()
    _walk(app.routes, "", found)
    return found


def _walk(routes: Any, prefix: str, found: set[tuple[str, str]]) -> None:
    for route in routes:
        if hasattr(route, "path"):
            for method in getattr(route, "methods", None) or {"GET"}:
                if method != "HEAD":
                    found.add((method, prefix + route.path))
        elif hasattr(route, "original_router"):
            _walk(route.original_router.routes, prefix + route.include_context.prefix, found)


def documented_routes(app: FastAPI) -> set[tuple[str, str]]:
    """Every (method, path) of the app's OpenAPI document."""
    return {(method.upper(), path) for path, ops in app.openapi()["paths"].items() for method in ops}


def concrete(path: str) -> str:
    """A requestable path: every ``{parameter}`` filled with a plausible value."""
    return (path.replace("{collection}", "queues").replace("{job_id}", "train-0001")
            .replace("{name}", "team-b"))
