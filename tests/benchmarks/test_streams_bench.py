"""The stream benchmarks (benchmarks/streams_record.py, streams_windows.py) run end to end in a tiny
configuration and report what they say they report: every figure present, the checks passed.
No timing is asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trajstore.streams")

import trajstore  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SRC = Path(trajstore.__file__).resolve().parents[1]  # the source tree under test
TINY_CAMERA = ["--height", "24", "--width", "32"]


def run(script: str, tmp_path: Path, *args: str) -> tuple[str, dict]:
    out = tmp_path / "result.json"
    env = dict(os.environ, TRAJSTORE_PEERS_DIR=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--src", f"this={SRC}",
                           "--workdir", str(tmp_path / "work"), "--json", str(out), *args],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    results = json.loads(out.read_text())
    assert list(results) == ["trajstore this"]
    res = results["trajstore this"]
    assert "failed" not in res, res
    return proc.stdout, res


def test_streams_record_reports_both_sides_per_kind_and_pacing(tmp_path):
    stdout, res = run("streams_record.py", tmp_path, "--seconds", "0.4", "--episode-seconds", "0.2",
                      "--joints-hz", "100", "--ft-hz", "200", "--sample-every", "0.05", "--profile",
                      "--profile-top", "5", *TINY_CAMERA)
    assert set(res["modes"]) == {"paced", "fast"}
    # 0.2 s episodes: 6 frames per camera, 20 joints, 40 force-torque samples each
    appends = {"low_dim": 2 * (20 + 40), "camera": 2 * 2 * 6}
    for mode, m in res["modes"].items():
        assert m["problems"] == [], (mode, m["problems"])
        assert m["episodes"] == 2
        for side in ("stream", "replay"):
            for kind, n in appends.items():
                calls = m[side]["calls"][kind]
                assert calls["n"] == n
                assert 0 < calls["median_us"] <= calls["p99_us"] <= calls["max_us"]
            assert m[side]["calls"]["joints"]["n"] == 2 * 20
            assert m[side]["end_episode_ms"] > 0
        for side in ("stream", "replay"):
            backlog = m[side]["backlog"]["streams"]
            assert set(backlog) == {"wrist", "front", "joints", "ft"}
            for g in backlog.values():
                assert set(g) == {"first_half_max", "second_half_max", "slope_per_s", "final"}
                assert g["final"] >= 0
            assert m[side]["backlog"]["blocked_s"] >= 0
        assert "sample" in m["profile"] or "append" in m["profile"]
    for title in ("== paced", "== fast", "ratio med", "max 2nd half", "trajstore this low-dim", "trajstore this camera",
                  "check: ok"):
        assert title in stdout


def test_streams_windows_reports_the_batch_and_the_low_dim_pair_checked(tmp_path):
    stdout, res = run("streams_windows.py", tmp_path, "--episodes", "2", "--episode-seconds", "1.5", "--batch", "4",
                      "--repeats", "2", "--profile", "--profile-batches", "1", "--profile-top", "5", *TINY_CAMERA)
    assert res["problems"] == []
    assert res["anchors"] == 2 * 45  # the camera's frames: 1.5 s at 30 Hz per episode
    assert set(res["pairs"]) == {"batch", "low_dim"}
    for pair in ("batch", "low_dim"):
        p = res["pairs"][pair]
        for side in ("stream", "replay"):
            assert 0 < p[side]["min_ms"] <= p[side]["median_ms"] <= p[side]["max_ms"]
    for pair in ("batch", "low_dim"):
        assert "sample_windows" in res["profile"][pair] and "Ordered by: cumulative time" in res["profile"][pair]
        assert "Ordered by: internal time" in res["profile_replay"][pair]
    for title in ("stream med ms", "ratio med", "trajstore this batch", "check: ok", "-- profile of 1 aligned batches, low_dim"):
        assert title in stdout
