"""benchmarks/format_imports.py runs end to end in a tiny configuration, trajstore side only (the peer venvs
are looked for in an empty folder, so the tfrecord and robomimic rows say why they did not run), and prints
its table: every column, every trajstore row with its counts. No timing is asserted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import trajstore

ROOT = Path(__file__).resolve().parents[2]
SRC = Path(trajstore.__file__).resolve().parents[1]
HEADER = ("case", "contender", "items", "seconds", "items/s", "MB/s", "peak RSS MB", "x ref")


@pytest.mark.slow
def test_the_benchmark_prints_every_row_and_column(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(SRC), TRAJSTORE_PEERS_DIR=str(tmp_path / "peers"))
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "format_imports.py"), "--quick", "--no-install", "--markdown",
         "--rlds-episodes", "4", "--rlds-steps", "5", "--demos", "2", "--demo-steps", "20", "--batch", "4",
         "--batches", "2"], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    md = [line for line in proc.stdout.splitlines() if line.startswith("| ")]
    assert md[0] == "| " + " | ".join(HEADER) + " |"
    rows = {tuple(c.strip() for c in line.strip("|").split("|"))[:3]: line for line in md[1:]}
    # items: records (4 episodes), steps (4 x 5, 2 x 20), samples (4 windows x 2 batches)
    for case, contender, items in [("rlds parse", "trajstore (CRC)", "4"),
                                   ("rlds import", "import_rlds camera=png", "20"),
                                   ("rlds import", "import_rlds camera=jpeg", "20"),
                                   ("robomimic load", "import_robomimic camera=jpeg", "40"),
                                   ("robomimic load", "import_robomimic camera=png", "40"),
                                   ("robomimic read", "sample_windows camera=jpeg", "8"),
                                   ("robomimic read", "sample_windows camera=png", "8")]:
        assert (case, contender, items) in rows, (case, contender, proc.stdout)
    unavailable = [line for line in md if "unavailable: no venv" in line]
    assert len(unavailable) == 7  # 3 tfrecord rows, 4 robomimic rows
    assert not any((tmp_path / "peers" / "tmp").iterdir())  # the data is removed
