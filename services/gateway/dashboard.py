"""The web dashboard on the gateway: the page at ``/ui``, its static files, its read API and live stream,
and the rule that read-only roles change nothing.

The page itself holds no data and needs no token: it signs in with a bearer token kept in the browser
tab's ``sessionStorage`` and reads everything through the same API, with the same tenancy, as the CLI.
Everything it loads is served from the package (no CDN, no fonts, no scripts from elsewhere), which the
Content-Security-Policy of the page enforces.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from fastapi import FastAPI, Request, Response
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles

from schemas.api import ErrorBody
from services.gateway.context import GatewayContext

UI_DIR = Path(__file__).with_name("ui")
UI_PATH = "/ui"

#: the page may load only what the gateway serves itself
CONTENT_SECURITY_POLICY = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                           "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
                           "form-action 'self'; frame-ancestors 'none'")
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def install_dashboard(app: FastAPI, ctx: GatewayContext) -> None:
    """Add the dashboard's routes, static files and the read-only rule to ``app``."""
    from services.gateway.routes_dashboard import router

    app.include_router(router)
    app.mount(f"{UI_PATH}/static", StaticFiles(directory=UI_DIR, check_dir=False), name="ui-static")

    @app.get(UI_PATH, include_in_schema=False)
    async def ui_page() -> Response:
        return FileResponse(UI_DIR / "index.html", media_type="text/html", headers={
            "Content-Security-Policy": CONTENT_SECURITY_POLICY, "Cache-Control": "no-cache",
            "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"})

    @app.middleware("http")
    async def read_only_roles(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        """A read-only role (viewer) may not change anything: 403 before the route runs."""
        if request.method not in _SAFE_METHODS and request.url.path.startswith("/v1/"):
            scheme, _, token = request.headers.get("authorization", "").partition(" ")
            who = ctx.tokens.authenticate(token.strip()) if scheme.lower() == "bearer" and token.strip() else None
            if who is not None and not who.may_act:
                body = ErrorBody(error="read_only", detail=f"role {who.role!r} may only read")
                return JSONResponse(body.model_dump(exclude_none=True), status_code=403)
        return await call_next(request)
