"""The ``"policy"`` key preset of a LeRobot export: the feature names LeRobot's policies read.

LeRobot's policies (ACT, Diffusion, pi0, SmolVLA, ...) look for ``observation.state`` (the robot's
low-dimensional state vector), ``observation.images.<camera>`` (one per camera) and ``action``.
A trajstore buffer names its leaves as it likes (``observation/agent_pos``, ``observation/pixels``),
so ``export lerobot --policy-keys`` renames them:

- every camera leaf (``metadata["kind"] == "image"``) -> ``observation.images.<last part of its path>``
  (``observation/pixels`` -> ``observation.images.pixels``);
- the one low-dimensional observation vector (a numeric, non-camera leaf of shape ``(n,)`` under
  ``observation``, or ``observation`` itself) -> ``observation.state``;
- the leaf ``action`` -> ``action``;
- the top-level ``reward``, ``done`` and ``success`` leaves -> ``next.reward``, ``next.done``, ``next.success``
  (the names of LeRobot's own datasets, e.g. lerobot/pusht: the reward and flags that follow the action);
- every other leaf keeps its default name (its path joined by ``"."``).

When the preset cannot decide (two observation vectors, two cameras with the same last name), it
raises instead of guessing, and the message says which ``--key`` / ``--exclude`` settles it.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from trajstore.spaces import BoxSpace
from trajstore.spaces.base import Space
from trajstore.spaces.tree import Path, leaves, path_name

__all__ = ["policy_key_map", "STATE_KEY", "IMAGES_PREFIX", "ACTION_KEY", "NEXT_KEYS"]

#: LeRobot's name for the robot's state vector.
STATE_KEY = "observation.state"
#: LeRobot's prefix of camera features.
IMAGES_PREFIX = "observation.images."
#: LeRobot's name for the action.
ACTION_KEY = "action"
#: Top-level leaves LeRobot's datasets name ``next.<leaf>``.
NEXT_KEYS = {("reward",): "next.reward", ("done",): "next.done", ("success",): "next.success"}


def _is_camera(space: Space) -> bool:
    return space.metadata.get("kind") == "image"


def _is_state_candidate(path: Path, space: Space) -> bool:
    return (bool(path) and path[0] == "observation" and isinstance(space, BoxSpace) and not _is_camera(space)
            and len(space.shape) == 1)


def policy_key_map(space: Space, *, explicit: Mapping[str, str] | None = None,
                   exclude: Iterable[str] = ()) -> dict[str, str]:
    """``{leaf path "a/b": LeRobot feature key}`` for every leaf of ``space``, with LeRobot's policy names.

    Args:
        space: the step space of a buffer (a ``DictSpace``).
        explicit: ``{leaf path: feature key}`` the user gave (``--key``); those entries win, their leaves
            are not renamed by the preset, and when one of them is ``observation.state`` the preset
            picks no state leaf. Included in the result.
        exclude: leaf paths not exported (``--exclude``): left out of the result and of the preset's choice.

    Returns:
        a key for every exported leaf (see the module docstring for the rules).

    Raises:
        ValueError: two low-dimensional observation vectors could be ``observation.state`` (names them and
            says to pass ``--key LEAF=observation.state`` or ``--exclude`` the others), or two leaves end up
            with one feature key (names both leaves and the key).
    """
    explicit = dict(explicit or {})
    excluded = set(exclude)
    held = [(path, leaf) for path, leaf in leaves(space) if path_name(path) not in excluded]
    keys: dict[str, str] = {path_name(path): ".".join(path) for path, _ in held}
    free = [(path, leaf) for path, leaf in held if path_name(path) not in explicit]
    for path, leaf in free:
        if _is_camera(leaf) and path:
            keys[path_name(path)] = IMAGES_PREFIX + path[-1]
        elif path == ("action",):
            keys[path_name(path)] = ACTION_KEY
        elif path in NEXT_KEYS:
            keys[path_name(path)] = NEXT_KEYS[path]
    if STATE_KEY not in explicit.values():
        states = [path_name(path) for path, leaf in free if _is_state_candidate(path, leaf)]
        if len(states) > 1:
            listed = ", ".join(repr(s) for s in states)
            raise ValueError(
                f"the policy key preset needs one low-dimensional observation vector for {STATE_KEY!r}, and the "
                f"buffer has {len(states)}: {listed}; choose one with --key LEAF={STATE_KEY} (key_map="
                f"{{LEAF: {STATE_KEY!r}}}) or leave the others out with --exclude LEAF")
        if states:
            keys[states[0]] = STATE_KEY
    keys.update({name: key for name, key in explicit.items() if name not in excluded})
    owner: dict[str, str] = {}
    for name, key in keys.items():
        if key in owner:
            raise ValueError(f"leaves {owner[key]!r} and {name!r} both become LeRobot feature {key!r} with the "
                             f"policy key preset; rename one with --key LEAF=NAME (key_map) or --exclude it")
        owner[key] = name
    return keys
