"""Headless Chromium for the viewer's browser tests: Debian's ``chromium`` package driven by Playwright
(pointed at that executable; no browser build is downloaded). Without either, the tests skip saying
what to install, except under CI (``CI=true``), where a missing browser is a failure: ``.ci/run``
installs it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


def launch():
    """``(playwright, browser)``; skips (fails under CI) when Playwright or Chromium is missing."""
    ci = os.environ.get("CI", "").lower() in ("1", "true", "yes")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        if ci:
            pytest.fail("CI runs the viewer's browser tests: playwright is missing (the dev extra)")
        pytest.skip("could not import 'playwright' (needs the dev extra: pip install -e '.[dev]')")
    path = chromium_path()
    if path is None:
        if ci:
            pytest.fail("CI runs the viewer's browser tests: no chromium on PATH (.ci/run installs Debian's)")
        pytest.skip("no chromium on PATH: apt-get install chromium (Debian's package; nothing is downloaded)")
    pw = sync_playwright().start()
    return pw, pw.chromium.launch(executable_path=path, args=["--no-sandbox"])


def artifacts_dir(default: Path) -> Path:
    """Where screenshots are kept: ``$TRAJSTORE_TEST_ARTIFACTS`` (``make test`` sets test-artifacts/), else
    ``default``."""
    out = Path(os.environ.get("TRAJSTORE_TEST_ARTIFACTS") or default)
    out.mkdir(parents=True, exist_ok=True)
    return out
