"""The interactive API documentation at ``/docs``, served entirely from the package (no CDN).

Swagger UI's script and style come from the ``swagger-ui-bundle`` distribution and are served under
``/docs/assets``, so the page works on a machine with no route to the internet.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from swagger_ui_bundle import swagger_ui_path

ASSETS = "/docs/assets"


def mount_docs(app: FastAPI) -> None:
    """Serve Swagger UI for ``app.openapi_url`` at ``/docs`` from local assets."""
    app.mount(ASSETS, StaticFiles(directory=str(swagger_ui_path)), name="docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"
    title = f"{app.title} - API"

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=title,
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS}/favicon-32x32.png",
        )
