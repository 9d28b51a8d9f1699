"""Which episodes a LeRobot export takes, and their task texts. Pure bookkeeping over ``rb.episodes``."""

from __future__ import annotations

from typing import Any, Iterable

from trajstore.errors import InvalidValueError
from trajstore.replay_buffer.episodes import Episode


def select_episodes(rb: Any, ids: Iterable[int] | str | None) -> list[Episode]:
    """The episodes to export, in export order.

    ``ids``: ``None`` (every ended episode not overwritten by the ring, oldest first), ``Episode.id``
    values (in that order), or a selection text as ``trajstore copy --episodes`` takes
    (:mod:`~trajstore.replay_buffer.episode_query`): ids ``"0,3-5"`` (each must be exportable) or an
    expression (``"success == true"``: the exportable episodes it selects, oldest first).

    Raises:
        ValueError: an id not held, still being recorded, overwritten or listed twice; nothing to export.
        InvalidValueError (a ValueError): a malformed selection, or one that selects nothing.
    """
    held = rb.episodes
    closed = {e.id: e for e in held if e.done or e.interrupted}
    if isinstance(ids, str):
        from trajstore.replay_buffer.episode_query import parse_selection

        selection = parse_selection(ids)
        picked = selection.select(held)
        if selection.ranges is None:  # an expression: the exportable episodes it selects
            picked = [i for i in picked if i in closed and not closed[i].overwritten]
            if not picked:
                why = "; ".join(selection.missing_keys(list(held)))
                raise InvalidValueError(f"{selection.quoted} selects no ended episode of the {len(held)} held"
                                        f"{' (' + why + ')' if why else ''}; nothing was written")
        ids = picked
    if ids is None:
        chosen = [e for e in closed.values() if not e.overwritten]
    else:
        chosen = []
        ids = list(ids)
        for i in ids:
            e = closed.get(int(i))
            if e is None:
                open_ids = [o.id for o in held if o.id == int(i)]
                why = "is still being recorded" if open_ids else f"is not held (held ids: {sorted(closed)})"
                raise ValueError(f"episode id {i} {why}")
            if e.overwritten:
                raise ValueError(f"episode id {i} lost its first steps to the ring; it cannot be exported whole")
            chosen.append(e)
        if len({e.id for e in chosen}) != len(chosen):
            raise ValueError(f"episodes lists an id twice: {ids}")
    if not chosen:
        raise ValueError(f"{getattr(rb, 'cache_path', None) or 'the buffer'} has no ended episode to export")
    return chosen


def episode_tasks(chosen: list[Episode], default_task: str) -> tuple[list[str], list[int]]:
    """``(task texts in task_index order, task_index of each chosen episode)``; an episode without ``task``
    data gets ``default_task``.

    Raises:
        TypeError: ``default_task`` is not a str.
        InvalidValueError: an episode's ``task`` is not a string (names the episode).
    """
    if not isinstance(default_task, str):
        raise TypeError(f"default_task must be a str, got {default_task!r}")
    texts: dict[str, int] = {}
    of_episode = []
    for e in chosen:
        task = e.data.get("task", default_task)
        task = default_task if task is None else task
        if not isinstance(task, str):
            raise InvalidValueError(f"episode id {e.id}: data 'task' must be a string, got {task!r}")
        of_episode.append(texts.setdefault(task, len(texts)))
    return list(texts), of_episode
