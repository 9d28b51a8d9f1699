"""benchmarks/rl_sampling.py runs end to end, trajstore side only, in a tiny configuration and prints
every case of its table. No timing is asserted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import trajstore

ROOT = Path(__file__).resolve().parents[2]
SRC = Path(trajstore.__file__).resolve().parents[1]


def test_the_benchmark_prints_every_case(tmp_path):
    pytest.importorskip("torch")
    env = dict(os.environ, PYTHONPATH=str(SRC))
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "rl_sampling.py"), "--sizes", "3000",
                           "--window-sizes", "4000,8000", "--episode-len", "500", "--repeats", "2", "--skip-peer",
                           "--root", str(tmp_path)], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    for case in ("sample (memory", "transitions n=1 (memory", "transitions n=3 (disk", "sample torch (disk",
                 "windows 256x16 (disk"):
        assert case in proc.stdout, case
    assert proc.stdout.count("| windows 256x16") == 2 and "trajstore 1.00x" in proc.stdout
    assert not any(tmp_path.iterdir())  # the data is removed
