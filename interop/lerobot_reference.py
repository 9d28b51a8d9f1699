"""The trajstore half of ``make interop-check`` (runs in the project venv).

    python interop/lerobot_reference.py synthetic BUFFER   # a small PushT-like buffer with tasks
    python interop/lerobot_reference.py dump BUFFER NPZ    # what an export of BUFFER must hold

``synthetic``: 3 episodes (11, 7, 14 steps) at 10 Hz with a 96x96 camera whose frame ``i`` of episode
``e`` is a flat grey of level ``40 + 10 i`` with a bright square at column ``16 e`` (so a frame taken
from the wrong time or episode is far off), a named float32 state, a float32 action, a float64 reward,
a bool flag and an int32 counter; episodes 0 and 2 have tasks, episode 1 none. Each episode also has
data of several JSON types (``seed`` int, ``score`` float, ``operator`` text or missing, ``notes`` a list or
an object) and a final observation (the frame and state after its last step), which the export keeps
where LeRobot ignores them.

``dump``: every leaf of the buffer's ended episodes (the export's default selection), concatenated in
episode order, under the LeRobot key (``observation/pixels`` -> ``observation.pixels``), plus
``__lengths__``, ``__tasks__`` (``""`` where the episode has none, the export's default), ``__fps__``,
``__episode_data__`` (the episodes' data as one JSON text), ``__final_episodes__`` (the export's episode
index of each episode with a final observation) and ``__final__.<key>`` (those final observations' leaves,
under the LeRobot key).
Read through trajstore's own API only, independently of the export code.
"""

from __future__ import annotations

import json
import sys

import numpy as np

from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BinarySpace, BoxSpace, DictSpace
from trajstore.spaces.tree import flatten, get, leaf_paths
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

FPS = 10
LENGTHS = (11, 7, 14)
TASKS = ("push the T into the target", None, "push the T back")


def synthetic(path: str) -> None:
    cam = {"kind": "image", "layout": "HWC", "fps": FPS}
    space = DictSpace({
        "observation": DictSpace({
            "image": BoxSpace(0, 255, (96, 96, 3), np.uint8, metadata=cam),
            "state": BoxSpace(-1e4, 1e4, (3,), np.float32, metadata={"names": ["x", "y", "code"]}),
        }),
        "action": BoxSpace(-1e4, 1e4, (2,), np.float32),
        "reward": BoxSpace(-10, 10, (), np.float64),
        "success": BinarySpace(),
        "count": BoxSpace(0, 10_000, (), np.int32),
    })
    # PNG frames in the buffer: the reference is exactly what was recorded.
    kwargs = dict_storage_kwargs_from_space(space, kind_kwargs={"image": {"format": "PNG"}})
    rb = ReplayBuffer.create(DictStorage, space, cache_path=path, **kwargs)
    rng = np.random.default_rng(0)
    for e, (n, task) in enumerate(zip(LENGTHS, TASKS)):
        for i in range(n):
            frame = np.full((96, 96, 3), 40 + 10 * i, np.uint8)
            frame[40:56, 16 * e:16 * e + 16] = (250, 30, 30)
            rb.append({"observation": {"image": frame,
                                       "state": np.array([e + 0.1, i / 3, 100 * e + i], np.float32)},
                       "action": rng.normal(size=2).astype(np.float32), "reward": float(rng.normal()) / 7,
                       "success": i == n - 1, "count": 1000 * e + i})
        final = {"image": np.full((96, 96, 3), 5 + 50 * e, np.uint8),
                 "state": np.array([e + 0.1, n / 3, 100 * e + n], np.float32)}
        data = {"seed": 7 * e, "score": e / 4 + 0.125, "notes": [e, "x"] if e != 1 else {"k": None}}
        if e != 2:
            data["operator"] = ["ana", "bo"][e]
        rb.end_episode(final, **data, **({"task": task} if task else {}))
    rb.close()


def dump(path: str, npz: str) -> None:
    rb = ReplayBuffer.load_from(path)
    episodes = [e for e in rb.episodes if (e.done or e.interrupted) and not e.overwritten]
    keys = [".".join(p) for p in leaf_paths(rb.space)]
    parts: dict[str, list[np.ndarray]] = {k: [] for k in keys}
    for e in episodes:
        for k, v in zip(keys, flatten(rb.space, rb.get_episode(rb.episodes.index(e)))):
            parts[k].append(np.asarray(v))
    fps = [leaf.metadata["fps"] for leaf in (rb.space["observation"].spaces.values()) if "fps" in leaf.metadata]
    out = {k: np.concatenate(v) for k, v in parts.items()}
    out["__lengths__"] = np.array([len(e) for e in episodes])
    out["__tasks__"] = np.array([e.data.get("task", "") for e in episodes])
    out["__fps__"] = np.array(fps[0])
    out["__episode_data__"] = np.array(json.dumps([e.data for e in episodes]))
    finals = [(n, rb.final_observation(rb.episodes.index(e))) for n, e in enumerate(episodes)]
    finals = [(n, f) for n, f in finals if f is not None]
    out["__final_episodes__"] = np.array([n for n, _ in finals], np.int64)
    for leaf in leaf_paths(rb.space["observation"]) if finals else []:
        out["__final__.observation." + ".".join(leaf)] = np.stack([np.asarray(get(f, leaf)) for _, f in finals])
    np.savez(npz, **out)
    rb.close()
    print(f"{path}: {len(episodes)} episodes, {out['__lengths__'].sum()} steps, leaves {keys}")


if __name__ == "__main__":
    {"synthetic": synthetic, "dump": dump}[sys.argv[1]](*sys.argv[2:])
