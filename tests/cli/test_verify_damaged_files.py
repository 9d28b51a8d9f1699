"""verify names every damaged payload file with the held steps and episodes it held.

Three episodes of 6 steps, one-frame PNG chunks (``chunk_bytes=1``): the chunks of steps 2, 8 and 15
are deleted (or cut short). verify lists each of the three files with its own step and episode, not
the whole batch of steps 0..17; the per-storage listing stops at a cap (20) and says how many more.
"""

from __future__ import annotations

import os

from trajstore.ops import verify_buffer

from tests.replay_buffer.test_damaged_payload import build, file_of


def problems_about(report, target):
    return [p.what for p in report.problems if p.where == str(target)]


def test_every_damaged_file_is_named_with_its_steps_and_episode(tmp_path):
    path = tmp_path / "rb"
    build(path, "PNG")
    gone = {2: 0, 8: 1, 15: 2}  # step -> its episode
    targets = {step: file_of(path, "PNG", step) for step in gone}
    for step, target in targets.items():
        if step == 15:
            os.truncate(target, 3)
        else:
            target.unlink()
    report = verify_buffer(path)
    assert not report.ok
    for step, target in targets.items():
        problem = "truncated: 3 bytes, index needs" if step == 15 else "missing"
        (what,) = problems_about(report, target)
        assert what.startswith(f"is {problem}") and what.endswith(
            f": held step(s) {step} (episode(s) [{gone[step]}]) cannot be read"), what
    assert not any("steps 0..17" in p.what for p in report.problems), report.problems
    assert (report.damaged_episodes, report.damaged_steps) == ([0, 1, 2], 3)
    by_folder = {os.path.relpath(s.folder, path): s for s in report.storages}
    pixels = by_folder["storage/observation.pixels"]
    assert (pixels.steps_read, pixels.problems) == (18 - 3, 3)


def test_the_listing_stops_at_its_cap_and_counts_the_rest(tmp_path, monkeypatch):
    import trajstore.ops.verify as verify

    monkeypatch.setattr(verify, "MAX_DAMAGED_FILES_LISTED", 5)
    path = tmp_path / "rb"
    build(path, "PNG")
    for step in range(18):  # every step chunk
        file_of(path, "PNG", step).unlink()
    report = verify_buffer(path)
    named = [p for p in report.problems if p.where.endswith(".bin")]
    assert len(named) == 5
    folder = str(path / "storage" / "observation.pixels")
    assert [p.what for p in report.problems if p.where == folder] == ["and 13 more damaged payload file(s)"]
    assert report.damaged_steps == 18 and report.damaged_episodes == [0, 1, 2]


def test_a_failed_batch_names_the_steps_that_fail_not_the_batch(tmp_path):
    path = tmp_path / "rb"
    build(path, "PNG")
    target = file_of(path, "PNG", 8)
    target.write_bytes(bytes(target.stat().st_size))  # long enough: found only when decoded
    report = verify_buffer(path)
    (what,) = [p.what for p in report.problems if p.where == str(path / "storage" / "observation.pixels")]
    assert what.startswith("held step(s) 8 (episode(s) [1]): cannot be read: "), what
    assert (report.damaged_episodes, report.damaged_steps) == ([1], 1)
