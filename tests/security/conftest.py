"""Fixtures of the security tests: the running system of the hostile-input tests."""

from __future__ import annotations

from tests.hostile.conftest import config, e2e_settings, system

__all__ = ["config", "e2e_settings", "system"]
