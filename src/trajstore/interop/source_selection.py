"""Which episodes of a source dataset an import takes: ``--episodes`` of every ``trajstore import FORMAT``.

A source episode is known by its position in the source (its ``index``: LeRobot's ``episode_index``, the N
of robomimic's ``demo_N`` or ALOHA's ``episode_N.hdf5``, the position of an RLDS episode in stored order)
and by the episode data the import will give it. A selection is what ``trajstore copy --episodes`` takes
(:mod:`~trajstore.replay_buffer.episode_query`): ids ``"0,3,5-9"`` (here: source indices) or an expression
over that data (``'success == true'``, ``'steps > 20'``), or a list of indices.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from trajstore.errors import InvalidValueError
from trajstore.replay_buffer.episodes import Episode

__all__ = ["SourceEpisode", "select_source_episodes"]


@dataclass(frozen=True)
class SourceEpisode:
    """One episode of a source dataset, as a selection sees it.

    Attributes:
        index: its number in the source (non-negative int).
        steps: its length in steps.
        data: the episode data the import gives it (JSON values).
    """

    index: int
    steps: int
    data: Mapping[str, Any] = field(default_factory=dict)


def select_source_episodes(candidates: Sequence[SourceEpisode], episodes: Iterable[int] | str | None, *,
                           source: str) -> list[int]:
    """The indices of the chosen source episodes, in import order.

    Args:
        candidates: every episode of the source, in source order.
        episodes: ``None`` (all, in source order); a selection text (ids or an expression, see the module
            docstring; the chosen ones in source order); or indices (in the order given).
        source: the source's name for messages (a path).

    Raises:
        InvalidValueError (a ValueError): a malformed selection, an index the source does not have (names
            the first few and the range held), an index given twice, a selection that chooses nothing.
    """
    from trajstore.replay_buffer.episode_query import parse_selection

    held = [Episode(id=c.index, start=0, stop=c.steps, overwritten=False, done=True, _data=dict(c.data))
            for c in candidates]
    if episodes is None:
        return [c.index for c in candidates]
    if isinstance(episodes, str):
        selection = parse_selection(episodes)
        known = sorted(c.index for c in candidates)
        missing, absent = selection.absent_ids(known)
        if absent:
            span = f"{known[0]}..{known[-1]}" if known else "none"
            more = f" and {absent - len(missing)} more" if absent > len(missing) else ""
            raise InvalidValueError(f"{source}: episodes {missing}{more} are not in the source (its episodes: {span})")
        chosen = set(selection.select(held))
        out = [c.index for c in candidates if c.index in chosen]
        what = selection.quoted
    else:
        out = [_index(i) for i in episodes]
        known = {c.index for c in candidates}
        missing = [i for i in out if i not in known]
        if missing:
            span = f"{min(known)}..{max(known)}" if known else "none"
            raise InvalidValueError(f"{source}: episodes {missing[:5]} are not in the source (its episodes: {span})")
        twice = sorted(i for i, n in Counter(out).items() if n > 1)
        if twice:
            raise InvalidValueError(f"{source}: episodes {twice[:5]} are listed more than once")
        what = "the episode list given"
    if not out:
        raise InvalidValueError(f"{what} selects none of the {len(candidates)} episodes of {source}; nothing "
                                "was written")
    return out


def _index(value: Any) -> int:
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise InvalidValueError(f"an episode index must be an int, got {value!r:.60}")
    return int(value)
