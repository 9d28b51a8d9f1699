"""The policy a recorder runs: named by text (``trajstore record --policy module:function``) and the
one rule that tells a policy from a factory of policies.

A **policy** is a callable ``policy(observation, info) -> action``. ``observation`` is the step's
observation *as recorded* (:attr:`~trajstore.recording.episodes.RecordEpisodes.recorded_observation`):
the env's observation with the rendered frame added under ``render_key``, e.g.
``{"state": (N,) float array, "pixels": (H, W, 3) uint8}`` for a Box observation (a Dict
observation keeps its keys and gains the frame), so a vision policy sees what the buffer stores.
``info`` is the env's info of that observation. The action goes to ``env.step`` as it is.

A **factory** is a callable with exactly one parameter, and that parameter is named ``env``
(``def make_policy(env): ...``, or a class whose ``__init__(self, env)``): it is called once, with
the env (made with ``render_mode="rgb_array"``, before recording starts), and returns the policy.
Any other callable is the policy itself.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from pathlib import Path
from typing import Any, Callable

from trajstore.recording.loop import Policy

__all__ = ["PolicyLoadError", "Policy", "load_policy", "is_factory", "policy_for"]


class PolicyLoadError(ValueError):
    """A policy named by text could not be loaded, or a factory gave no policy (the cause is chained)."""


def load_policy(spec: str) -> Callable[..., Any]:
    """The callable named by ``spec``: ``"package.module:name"`` or ``"path/to/file.py:name"``
    (``name`` may be dotted: ``"module:Class.method"``). A module is imported as ``python -m``
    would find it (the current folder is put on ``sys.path`` first); a file is run as a module of
    its own (``sys.modules`` keeps it). The callable is not called here (see :func:`policy_for`).

    Raises:
        PolicyLoadError: (a ``ValueError``) ``spec`` is not ``target:name``; the module or file
            cannot be found or raised while imported; it has no attribute ``name``; the attribute
            is not callable. The message names the part that failed.
    """
    target, sep, name = str(spec).rpartition(":")
    if not sep or not target or not name:
        raise PolicyLoadError(f"policy {spec!r} must be 'module:function' or 'path/to/file.py:function'")
    module = _import_file(target) if target.endswith(".py") or os.sep in target or "/" in target \
        else _import_module(target)
    value: Any = module
    for part in name.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise PolicyLoadError(f"policy {spec!r}: {target} has no attribute {name!r}") from None
    if not callable(value):
        raise PolicyLoadError(f"policy {spec!r}: {name} is a {type(value).__name__}, not a callable "
                              "policy(observation, info) -> action or factory make_policy(env)")
    return value


def is_factory(policy: Callable[..., Any]) -> bool:
    """True when ``policy`` takes exactly one parameter and it is named ``env`` (see the module docstring)."""
    try:
        params = list(inspect.signature(policy).parameters.values())
    except (TypeError, ValueError):  # a builtin without a signature: a policy
        return False
    return len(params) == 1 and params[0].name == "env" and params[0].kind in (
        inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def policy_for(policy: Callable[..., Any], env: Any) -> Policy:
    """``policy(env)`` if ``policy`` is a factory (:func:`is_factory`), else ``policy`` itself.

    Raises:
        PolicyLoadError: the factory returned something that is not callable.
        Whatever the factory raises.
    """
    if not is_factory(policy):
        return policy
    made = policy(env)
    if not callable(made):
        raise PolicyLoadError(f"the policy factory {getattr(policy, '__qualname__', policy)!r}(env) returned a "
                              f"{type(made).__name__}, not a callable policy(observation, info) -> action")
    return made


def _import_module(target: str) -> Any:
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (target == exc.name or target.startswith(exc.name + ".")):
            raise PolicyLoadError(f"policy module {target!r} not found (no module named {exc.name!r} on "
                                  "sys.path or in the current folder)") from exc
        raise PolicyLoadError(f"importing the policy module {target!r} failed: {exc}") from exc
    except Exception as exc:
        raise PolicyLoadError(f"importing the policy module {target!r} failed: {type(exc).__name__}: {exc}") from exc


def _import_file(target: str) -> Any:
    path = Path(target).expanduser().resolve()
    if not path.is_file():
        raise PolicyLoadError(f"policy file {target!r} not found")
    name = f"_trajstore_policy_{abs(hash(str(path))):x}_{path.stem}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise PolicyLoadError(f"policy file {target!r} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:
        del sys.modules[name]
        if not isinstance(exc, Exception):
            raise
        raise PolicyLoadError(f"running the policy file {target!r} failed: {type(exc).__name__}: {exc}") from exc
    return module
