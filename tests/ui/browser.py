"""Headless Chromium for the dashboard's tests, screenshots and benchmark: Debian's /usr/bin/chromium driven
by Playwright (never a downloaded browser), with an empty profile and no network beyond the gateway."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

CHROMIUM = os.environ.get("MUSTER_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}


def chromium_missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        return (f"Chromium is not installed at {CHROMIUM} "
                "(bash scripts/install installs it as root: apt-get install chromium chromium-driver)")
    try:
        import playwright  # noqa: F401
    except ImportError:
        return "the Python package playwright is missing (pip install -e '.[dev]')"
    return None


@dataclass
class Console:
    """Every console error, uncaught exception and failed request of a page."""

    problems: list[str] = field(default_factory=list)

    def watch(self, page: Any) -> None:
        page.on("console", lambda m: self.problems.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: self.problems.append(f"uncaught: {e}"))
        page.on("requestfailed", lambda r: self.problems.append(f"request failed: {r.url} {r.failure}")
                if "/v1/stream" not in r.url else None)  # a stream is aborted on sign-out and page close


@contextlib.asynccontextmanager
async def chromium(viewport: dict[str, int] | None = None) -> AsyncIterator[Any]:
    """A browser context of Debian's Chromium on an empty, temporary profile."""
    from playwright.async_api import async_playwright

    profile = tempfile.mkdtemp(prefix="muster-chromium-")
    try:
        async with async_playwright() as pw:
            context = await pw.chromium.launch_persistent_context(
                profile, executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
                viewport=viewport or DESKTOP, service_workers="block")
            try:
                yield context
            finally:
                await context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


async def sign_in(page: Any, url: str, token: str) -> None:
    """Open the dashboard and sign in with ``token`` using the keyboard only."""
    await page.goto(f"{url}/ui")
    await page.wait_for_selector("#token")
    await page.focus("#token")
    await page.keyboard.type(token)
    await page.keyboard.press("Enter")
    await page.wait_for_selector("[data-testid=live][data-connected=yes]")
