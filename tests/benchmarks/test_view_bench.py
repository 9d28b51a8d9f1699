"""benchmarks/view_server.py runs end to end on a tiny configuration and prints every row (server side;
the browser rows too when Chromium and Playwright are here). No timing is asserted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import trajstore
from tests.view.browser import chromium_path

ROOT = Path(__file__).resolve().parents[2]
SRC = Path(trajstore.__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_benchmark_prints_every_case(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(SRC))
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "view_server.py"), "--episodes", "30",
                           "--steps", "2", "--frame-steps", "12", "--markdown"],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert rows[0].startswith("| open | 30 episodes: serve + /api/buffer + /api/episodes | ")
    frames = [r for r in rows if r.startswith("| frames |") and "over HTTP" in r]
    assert len(frames) == 3 and all("frames/s" in r and "x 30 fps" in r for r in frames)
    try:
        import playwright  # noqa: F401
        browser = chromium_path() is not None
    except ImportError:
        browser = False
    if browser:
        playback = [r for r in rows if r.startswith("| playback |")]
        assert len(playback) == 6 and all("steps not drawn" in r for r in playback)
