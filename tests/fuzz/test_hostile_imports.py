"""Fuzz: hostile and damaged files given to the LeRobot and zarr importers (tests/fuzz/importers.py).
Each case must import cleanly (and read back) or fail with a FormatError / InvalidValueError naming
the file, leaving nothing at the output path; never another exception, a MemoryError (the child's
address space is limited to what a clean import maps plus 1 GiB), a crash or a hang.

Set ``TRAJSTORE_FUZZ_CASES`` (structured edits per file; bit flips scale with it) and ``TRAJSTORE_FUZZ_SEED`` for a
longer local run.
"""

import os
import shutil
from collections import Counter

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("av")
pytest.importorskip("zarr")

from tests.fuzz.importers import (LEROBOT_FILES, import_failures, make_lerobot, make_zarr,  # noqa: E402
                                  plan_hostile, run_imports, zarr_files)

#: Structured edits and bit flips per file in the default run: (structured, flips), about 200 cases for
#: the 4 LeRobot files and 350 for the 15 zarr files, each test about a minute on a loaded 2-core machine.
LEROBOT_EDITS = (25, 8)
ZARR_EDITS = (12, 5)


def _run(fmt, src, pristine, files, seed_offset, edits):
    n = int(os.environ.get("TRAJSTORE_FUZZ_CASES", edits[0]))
    seed = int(os.environ.get("TRAJSTORE_FUZZ_SEED", 0)) + seed_offset
    mutations = plan_hostile(src, files, structured=n, flips=max(1, n * edits[1] // edits[0]), seed=seed)
    results = run_imports(fmt, src, pristine, mutations)
    outcomes = Counter(r.outcome for r in results)
    bad = import_failures(src, results)
    assert not bad, f"{len(bad)} of {len(results)} cases failed ({dict(outcomes)}):\n" + "\n".join(bad[:40])
    assert outcomes["ok"] > 0 and outcomes["error"] > len(results) // 5, dict(outcomes)
    print(f"{fmt}: {len(results)} cases: {dict(outcomes)}")
    return results


def test_hostile_lerobot_datasets(tmp_path):
    src = make_lerobot(tmp_path / "src")
    pristine = make_lerobot(tmp_path / "pristine")
    results = _run("lerobot", src, pristine, list(LEROBOT_FILES), 0, LEROBOT_EDITS)
    assert {r.mutation.path for r in results} == set(LEROBOT_FILES)


def test_hostile_zarr_groups(tmp_path):
    src = make_zarr(tmp_path / "src.zarr")
    pristine = tmp_path / "pristine.zarr"
    shutil.copytree(src, pristine)
    files = zarr_files(src)
    assert ".zattrs" in files and "meta/episode_ends/.zarray" in files and "data/action/.zattrs" in files
    _run("zarr", src, pristine, files, 100, ZARR_EDITS)
