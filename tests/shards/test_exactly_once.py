"""Exactly-once episodes in a sharded dataset: writer processes killed with SIGKILL at random moments and
retried with the same keys (in their own shard or in a new one) leave every key present once, with its
own steps and data."""

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from trajstore.replay_buffer import ReplayBuffer
from trajstore.shards import ShardedDataset
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

ROOT = Path(__file__).resolve().parents[2]


def fleet_space():
    return DictSpace({
        "observation": DictSpace({
            "camera": BoxSpace(0, 255, (8, 8, 3), np.uint8, metadata={"kind": "image", "layout": "HWC"}),
            "state": BoxSpace(-1e6, 1e6, (2,), np.float32),
        }),
        "action": BoxSpace(-1e6, 1e6, (2,), np.float32),
    })


def episode_length(worker, episode):
    return 1 + (7 * worker + 3 * episode) % 6


def episode_steps(worker, episode):
    """Steps whose every value says which worker, episode and step they are."""
    n = episode_length(worker, episode)
    t = np.arange(n, dtype=np.float32)
    return {"observation": {"camera": np.full((n, 8, 8, 3), (worker * 50 + episode) % 256, np.uint8),
                            "state": np.stack([np.full(n, worker, np.float32), t], axis=1)},
            "action": np.stack([np.full(n, episode, np.float32), t], axis=1)}


# Records episodes 0..N-1 of one worker; a run after a kill records them all again (the retry) and relies
# on end_episode(episode_key=) to drop what was committed before. Steps go in two appends with a flush
# between, so a kill can land between a flush and the end of an episode.
WORKER = """
import sys
from trajstore.shards import ShardedDataset
from tests.shards.test_exactly_once import episode_steps

root, worker, shard, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
rb = ShardedDataset.open(root).writer(shard)
new = 0
for e in range(n):
    steps = episode_steps(worker, e)
    half = len(steps["action"]) // 2
    if half:
        rb.extend({"observation": {k: v[:half] for k, v in steps["observation"].items()}, "action": steps["action"][:half]})
        rb.flush()
    rb.extend({"observation": {k: v[half:] for k, v in steps["observation"].items()}, "action": steps["action"][half:]})
    new += not rb.end_episode(episode_key=f"w{worker}/{e}", worker=worker, episode=e).duplicate
rb.close()
print("DONE", new, flush=True)
"""


def run_until_done(root, worker, n, rng, kills):
    """Start the worker, kill it with SIGKILL after a random delay ``kills`` times, then let a run finish.
    Odd retries write a new shard (the key check must see the other shards), even ones the same shard.
    Returns how many runs the kills ended."""
    landed = 0
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src"),
                                                        os.environ.get("PYTHONPATH", "")])}
    for attempt in range(kills + 1):
        shard = f"w{worker}" if attempt % 2 == 0 else f"w{worker}-retry{attempt}"
        proc = subprocess.Popen([sys.executable, "-c", WORKER, str(root), str(worker), shard, str(n)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        if attempt < kills:
            time.sleep(rng.uniform(0.4, 2.0))
            proc.send_signal(signal.SIGKILL)
            out, err = proc.communicate(timeout=120)
            if proc.returncode == 0:  # it finished before the kill: nothing more to retry
                return landed
            assert proc.returncode == -signal.SIGKILL, err[-3000:]
            landed += 1
        else:
            out, err = proc.communicate(timeout=300)
            assert proc.returncode == 0 and out.startswith("DONE"), err[-3000:]
    return landed


@pytest.mark.slow
def test_killed_and_retried_writers_commit_every_key_exactly_once(tmp_path):
    workers, n = 4, 200
    space = fleet_space()
    root = tmp_path / "fleet"
    ShardedDataset.create(root, DictStorage, space, **dict_storage_kwargs_from_space(space))
    rng = np.random.default_rng(23)
    procs, errors, landed = [], [], []

    def drive(w):
        try:
            landed.append(run_until_done(root, w, n, np.random.default_rng(rng.integers(1 << 30)), kills=3))
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    for w in range(workers):
        procs.append(threading.Thread(target=drive, args=(w,)))
        procs[-1].start()
    for t in procs:
        t.join()
    assert not errors, errors
    assert sum(landed) >= workers, landed  # the kills did cut runs short
    check_each_key_once(root, workers, n, recovered=False)  # a killed shard's open fragment has no key
    for name in ShardedDataset.open(root).shards:  # recovery: a writer opens each shard once
        ShardedDataset.open(root).writer(name).close()
    check_each_key_once(root, workers, n, recovered=True)


def check_each_key_once(root, workers, n, recovered):
    seen = {}
    for name in ShardedDataset.open(root).shards:
        with ReplayBuffer.load_from(root / "shards" / name) as rb:
            for ep in rb.episodes:
                if not recovered and not ep.done and not ep.interrupted:
                    assert ep.data == {} and ep.id == rb.episodes.ids[-1]  # the open episode of a killed writer
                    continue
                assert ep.done and not ep.interrupted, (name, ep)
                key = ep.data["episode_key"]
                assert key not in seen, f"{key} in {seen[key]} and in {name}"
                seen[key] = name
                w, e = ep.data["worker"], ep.data["episode"]
                assert key == f"w{w}/{e}"
                want = episode_steps(w, e)
                got = rb.get_episode(rb.episodes.ids.tolist().index(ep.id))
                np.testing.assert_array_equal(got["action"], want["action"], err_msg=key)
                np.testing.assert_array_equal(got["observation"]["state"], want["observation"]["state"])
                np.testing.assert_array_equal(got["observation"]["camera"], want["observation"]["camera"])
            if recovered:
                assert len(rb) == sum(len(ep) for ep in rb.episodes)  # no step outside a keyed episode
    assert sorted(seen) == sorted(f"w{w}/{e}" for w in range(workers) for e in range(n))
    assert len(seen) == workers * n
