"""examples/train_policy.py runs end to end on a tiny demo buffer: it selects the successful episodes,
prints a finite loss and writes its checkpoint."""

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("gym_pusht")

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "examples" / "train_policy.py"


def test_train_policy_on_a_tiny_buffer(tmp_path):
    from trajstore.recording import record_pusht
    from trajstore.replay_buffer import ReplayBuffer

    # Seed 3 is solved in ~90 steps, seed 4 needs ~175: one success and one failure within 150 steps.
    record_pusht(tmp_path / "pusht", 2, seed=3, max_steps=150, progress=False)
    with ReplayBuffer.load_from(tmp_path / "pusht", read_only=True) as rb:
        good = [e for e in rb.episodes if e.data["success"]]
    assert len(good) == 1, "the tiny buffer should hold one success and one failure"
    out = tmp_path / "ckpt" / "bc.pt"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, str(SCRIPT), "--buffer", str(tmp_path / "pusht"), "--steps", "5",
                          "--batch-size", "8", "--out", str(out)], capture_output=True, text=True, env=env,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    assert f"training on 1 of 2 episodes (success == true): {len(good[0])} steps" in run.stdout, run.stdout
    first, last = map(float, re.search(r"loss: (\S+) at the first step, (\S+) at the last", run.stdout).groups())
    assert math.isfinite(first) and math.isfinite(last) and first > 0
    assert out.is_file() and out.stat().st_size > 10_000  # the CNN's weights

    import torch

    ckpt = torch.load(out, weights_only=True)
    assert ckpt["config"]["steps"] == 5 and ckpt["config"]["final_loss"] == pytest.approx(last, abs=1e-4)


def test_train_policy_refuses_a_selection_that_selects_nothing(tmp_path):
    from trajstore.recording import record_pusht

    record_pusht(tmp_path / "pusht", 1, max_steps=3, progress=False)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, str(SCRIPT), "--buffer", str(tmp_path / "pusht"), "--steps", "5",
                          "--out", str(tmp_path / "bc.pt")], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 1
    assert "no episode of" in run.stderr and "matches --episodes 'success == true' (of 1)" in run.stderr
    assert not (tmp_path / "bc.pt").exists()
