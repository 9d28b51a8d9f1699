"""What ``trajstore record`` parses beyond plain options: ``--env-kwargs`` and ``--policy``."""

from __future__ import annotations

import json
from typing import Any, Callable, Optional

import typer

ENV_KWARGS_HELP = ("Keyword arguments of gymnasium.make, comma-separated key=value (e.g. width=96,height=96); "
                   "a value is read as JSON when it parses (96, 1.5, true, null, \"[1,2]\", '\"text\"'), else as "
                   "text.")
POLICY_HELP = ("The policy to record, 'module:function' or 'path/to/file.py:function' (default: uniformly "
               "random). The function is called as policy(observation, info) -> action, with the observation "
               "as recorded (the frame included, under 'pixels'); a function with one parameter named env "
               "(make_policy(env)) is called once with the env and must return that policy. gymnasium:ID envs only.")


def split_items(text: str) -> list[str]:
    """``text`` cut at the commas that are outside brackets, braces and double quotes
    (``'a=1,b=[1,2]'`` -> ``['a=1', 'b=[1,2]']``)."""
    items, depth, quoted, escaped, current = [], 0, False, False, []
    for ch in text:
        if quoted:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                quoted = False
        elif ch == '"':
            quoted = True
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth = max(0, depth - 1)
        elif ch == "," and depth == 0:
            items.append("".join(current))
            current = []
            continue
        current.append(ch)
    items.append("".join(current))
    return items


def parse_env_kwargs(text: Optional[str]) -> dict[str, Any]:
    """``"width=96,height=96,goal=[1,2],name=arm"`` -> ``{"width": 96, "height": 96, "goal": [1, 2], "name": "arm"}``.

    Raises:
        typer.BadParameter: an item that is not ``key=value`` with a Python identifier as key, or a
            key given twice (the message names the item).
    """
    if text is None or not text.strip():
        return {}
    out: dict[str, Any] = {}
    for item in split_items(text):
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise typer.BadParameter(f"item {item.strip()!r} is not key=value with a keyword name as key "
                                     "(e.g. width=96,height=96)", param_hint="'--env-kwargs'")
        if key in out:
            raise typer.BadParameter(f"item {item.strip()!r}: {key} is given twice", param_hint="'--env-kwargs'")
        raw = raw.strip()
        try:
            out[key] = json.loads(raw)
        except ValueError:
            out[key] = raw
    return out


def load_policy_option(spec: str) -> Callable[..., Any]:
    """The callable ``--policy`` names (:func:`trajstore.recording.policy.load_policy`).

    Raises:
        typer.BadParameter: it does not load (module or file not found, no such attribute, not callable).
    """
    from trajstore.recording.policy import PolicyLoadError, load_policy

    try:
        return load_policy(spec)
    except PolicyLoadError as exc:
        raise typer.BadParameter(str(exc), param_hint="'--policy'") from exc


def pusht_policy(policy: Optional[Callable[..., Any]]) -> Optional[Callable[..., Any]]:
    """``--policy`` for ``--env pusht``: ``record_pusht`` calls ``policy(observation, info, rng)``; a
    ``--policy`` is ``policy(observation, info)`` (None: the planning expert).

    Raises:
        typer.BadParameter: ``policy`` is a factory ``make_policy(env)`` (that form is for gymnasium:ID envs).
    """
    from trajstore.recording.policy import is_factory

    if policy is None:
        return None
    if is_factory(policy):
        raise typer.BadParameter("a factory make_policy(env) works with gymnasium:ID envs; for --env pusht give "
                                 "policy(observation, info) -> action", param_hint="'--policy'")
    return lambda observation, info, rng: policy(observation, info)
