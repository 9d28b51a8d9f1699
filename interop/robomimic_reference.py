"""The trajstore half of ``make robomimic-check`` (runs in the project venv).

    python interop/robomimic_reference.py synthetic BUFFER              # a small recorded-like buffer
    python interop/robomimic_reference.py dump BUFFER NPZ [VAL_FRACTION]  # what an export of BUFFER must hold

``synthetic``: 4 episodes (9, 5, 12, 7 steps) at 10 Hz with a 32x32 camera whose frame ``i`` of episode
``e`` is a flat level ``20 + 9 i`` with a bright column at ``4 e`` (PNG in the buffer: exact), a float32
``agent_pos`` ``[e, i]``, a float32 action, a float32 reward ``i / 8`` and bool ``terminated`` /
``truncated``; episodes 0 and 2 end with a final observation (the step after the last: ``i = n``), 1 and
3 without one (the export then repeats the last observation).

``dump``: read through trajstore's own API only (independently of the export code), every ended episode
in order: ``obs/<key>`` and ``next_obs/<key>`` (the next step's observation, the last one the final
observation or a copy of the last), ``actions``, ``rewards``, ``dones`` (the ``done`` leaf, else 1 at each
episode's last step), concatenated, plus ``__lengths__`` and ``__mask__<name>`` (demo numbers in each
filter key: ``train`` / ``valid`` from ``rb.split_episodes(VAL_FRACTION, 0)`` when it is given, else the
episode data ``masks`` an import kept).
"""

from __future__ import annotations

import sys

import numpy as np

from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BinarySpace, BoxSpace, DictSpace
from trajstore.spaces.tree import flatten, leaf_paths
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

FPS = 10
LENGTHS = (9, 5, 12, 7)
WITH_FINAL = (True, False, True, False)


def _obs(e: int, i: int) -> dict:
    frame = np.full((32, 32, 3), 20 + 9 * i, np.uint8)
    frame[:, 4 * e:4 * e + 2] = (250, 40, 10)
    return {"pixels": frame, "agent_pos": np.array([e, i], np.float32)}


def synthetic(path: str) -> None:
    space = DictSpace({
        "observation": DictSpace({
            "pixels": BoxSpace(0, 255, (32, 32, 3), np.uint8, metadata={"kind": "image", "layout": "HWC", "fps": FPS}),
            "agent_pos": BoxSpace(-1e3, 1e3, (2,), np.float32),
        }),
        "action": BoxSpace(-1, 1, (2,), np.float32),
        "reward": BoxSpace(-10, 10, (), np.float32),
        "terminated": BinarySpace(),
        "truncated": BinarySpace(),
    })
    kwargs = dict_storage_kwargs_from_space(space, kind_kwargs={"image": {"format": "PNG"}})
    rng = np.random.default_rng(0)
    with ReplayBuffer.create(DictStorage, space, cache_path=path, **kwargs) as rb:
        for e, (n, final) in enumerate(zip(LENGTHS, WITH_FINAL)):
            for i in range(n):
                rb.append({"observation": _obs(e, i), "action": rng.uniform(-1, 1, 2).astype(np.float32),
                           "reward": np.float32(i / 8), "terminated": final and i == n - 1,
                           "truncated": not final and i == n - 1})
            rb.end_episode(_obs(e, n) if final else None, task=f"episode {e}")


def dump(path: str, npz: str, val_fraction: str | None = None) -> None:
    rb = ReplayBuffer.load_from(path)
    episodes = [(k, e) for k, e in enumerate(rb.episodes) if e.done or e.interrupted]
    obs_paths = [p for p in leaf_paths(rb.space) if p[0] == "observation"]
    parts: dict[str, list[np.ndarray]] = {}

    def add(key: str, value: np.ndarray) -> None:
        parts.setdefault(key, []).append(np.asarray(value))

    names = {p: "_".join(p[1:]) for p in obs_paths}
    for k, e in episodes:
        steps = rb.get_episode(k)
        final = rb.final_observation(k)
        for p in obs_paths:
            values = np.asarray(flatten(rb.space, steps)[leaf_paths(rb.space).index(p)])
            last = values[-1] if final is None else np.asarray(final[p[1]] if len(p) == 2 else final)
            add(f"obs/{names[p]}", values)
            add(f"next_obs/{names[p]}", np.concatenate([values[1:], last[None]]))
        add("actions", steps["action"])
        if "reward" in steps:
            add("rewards", steps["reward"])
        add("dones", np.asarray(steps["done"]).astype(np.int64) if "done" in steps
            else (np.arange(len(e)) == len(e) - 1).astype(np.int64))
    out = {key: np.concatenate(v) for key, v in parts.items()}
    out["__lengths__"] = np.array([len(e) for _, e in episodes])
    ids = [e.id for _, e in episodes]
    if val_fraction is not None:
        train, valid = rb.split_episodes(float(val_fraction), 0, episodes=ids)
        masks = {"train": train, "valid": valid}
    else:
        masks = {}
        for _, e in episodes:
            for name in e.data.get("masks", []):
                masks.setdefault(name, []).append(e.id)
    for name, held in masks.items():
        out[f"__mask__{name}"] = np.array([ids.index(i) for i in held], np.int64)
    np.savez(npz, **out)
    rb.close()
    print(f"{path}: {len(episodes)} episodes, {out['__lengths__'].sum()} steps, keys "
          f"{[k for k in out if not k.startswith('__')]}, masks {sorted(masks)}")


if __name__ == "__main__":
    {"synthetic": synthetic, "dump": dump}[sys.argv[1]](*sys.argv[2:])
