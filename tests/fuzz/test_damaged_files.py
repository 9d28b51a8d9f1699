"""Fuzz: every file of a buffer folder, truncated and with bits flipped, must read back as the data
or fail at once with a trajstore error naming the damaged file (or the storage folder holding it);
never a hang, a crash of the interpreter, or an unrelated exception.

The same damage met by a *writer* (``read_only=False``, then an appended episode) must fail the
same way and leave what a reader gets unchanged, or succeed with the new steps readable.

The cases run in a child process (tests/fuzz/runner.py) with a timeout per case. The default
number of cases keeps each test under a minute on a 2-core machine; set ``TRAJSTORE_FUZZ_CASES``
(about how many cases in all, per test) for a longer local run.
"""

import os
from collections import Counter

import pytest

from tests.fuzz.damage import buffer_files, build_buffer, have_video, plan_mutations, read_everything
from tests.fuzz.runner import failures, run_cases

#: About how many cases the default run has (truncations of every file, then bit flips per file).
DEFAULT_CASES = 900
#: The same for writers: each case copies the folder and writes, about 0.1 s a case.
DEFAULT_WRITE_CASES = 400
TRUNCATIONS_PER_FILE = 6


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return build_buffer(tmp_path_factory.mktemp("fuzz") / "rb")


def test_the_buffer_holds_every_kind_of_file(folder):
    files = buffer_files(folder)
    for kind in ("trajstore.json", "stats.json", "writer.lock", "storage/storage.json", "storage/@rest/data.h5",
                 "storage/observation.joints/data.bin", "storage/observation.jpeg/index.log",
                 "final_observations/@rest/data.h5"):
        assert kind in files
    assert sum(f.startswith("storage/observation.png/chunks/") for f in files) > 1
    assert sum(f.startswith("storage/observation.depth/chunks/") for f in files) > 1
    if have_video():
        assert sum(f.startswith("storage/observation.video/segments/") for f in files) > 1
    assert read_everything(folder) == 24  # the ring has wrapped: 45 steps appended, 24 held


@pytest.mark.slow
def test_damaged_files_fail_fast_with_a_format_error(folder):
    target = int(os.environ.get("TRAJSTORE_FUZZ_CASES", DEFAULT_CASES))
    n_files = len(buffer_files(folder))
    flips = max(1, (target - TRUNCATIONS_PER_FILE * n_files) // n_files)
    mutations = plan_mutations(folder, flips_per_file=flips, seed=int(os.environ.get("TRAJSTORE_FUZZ_SEED", 0)))
    results = run_cases(folder, mutations, timeout=20.0)
    outcomes = Counter(r.outcome for r in results)
    bad = failures(folder, results)
    assert not bad, f"{len(bad)} of {len(results)} cases failed ({dict(outcomes)}):\n" + "\n".join(bad[:40])
    # The cases reached both ends: damage that reads back as data, and damage found.
    assert outcomes["ok"] > 0 and outcomes["error"] > len(results) // 3
    print(f"{len(results)} cases: {dict(outcomes)}")


@pytest.mark.slow
def test_damaged_files_met_by_a_writer_fail_fast_and_lose_nothing(folder):
    target = int(os.environ.get("TRAJSTORE_FUZZ_CASES", DEFAULT_WRITE_CASES))
    n_files = len(buffer_files(folder))
    flips = max(1, (target - TRUNCATIONS_PER_FILE * n_files) // n_files)
    seed = int(os.environ.get("TRAJSTORE_FUZZ_SEED", 0)) + 1  # other offsets than the readers' run
    results = run_cases(folder, plan_mutations(folder, flips_per_file=flips, seed=seed), timeout=20.0, mode="write")
    outcomes = Counter(r.outcome for r in results)
    bad = failures(folder, results)
    assert not bad, f"{len(bad)} of {len(results)} cases failed ({dict(outcomes)}):\n" + "\n".join(bad[:40])
    assert outcomes["ok"] > 0 and outcomes["error"] > len(results) // 4
    print(f"{len(results)} writer cases: {dict(outcomes)}")
