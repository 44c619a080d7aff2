"""The layering the README's layout section and ``docs/architecture.md`` describe, enforced by import-linter
(the contracts live in ``pyproject.toml``)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_import_contracts_are_kept() -> None:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    assert exe, "import-linter is part of the dev extra"
    result = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_nothing_is_constructed_at_import_time() -> None:
    """Importing every module starts no thread, opens no socket and creates no event loop."""
    code = (
        "import threading, pkgutil, importlib, asyncio, schemas, services\n"
        "before = threading.active_count()\n"
        "for pkg in (schemas, services):\n"
        "    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
        "        if not m.name.endswith('__main__'):\n"
        "            importlib.import_module(m.name)\n"
        "assert threading.active_count() == before, threading.enumerate()\n"
        "try:\n"
        "    asyncio.get_running_loop()\n"
        "    raise SystemExit('a running loop exists')\n"
        "except RuntimeError:\n"
        "    pass\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
