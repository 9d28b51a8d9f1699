"""Which episodes a draw may use: ``episodes=`` checked against a view, damaged episodes refused or left out.

Used by :class:`~trajstore.replay_buffer.training_api.TrainingAPI` once per request, before reading.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

from trajstore.damage import Damage, DamagedDataError, check_on_damaged
from trajstore.replay_buffer import samplers
from trajstore.replay_buffer.view import View


def draw_domain(view: View, damage: Damage, episodes: Iterable[int] | None, on_damaged: str = "raise"
                ) -> np.ndarray | None:
    """The sorted int64 episode ids a draw may use (``None``: every held one) under ``view``.

    Raises:
        TypeError, ValueError: as :func:`~trajstore.replay_buffer.samplers.selected_ids`; a bad ``on_damaged``.
        DamagedDataError: ``on_damaged="raise"`` and a damaged episode in the domain; ``"skip"`` and every
            episode of it damaged.
    """
    check_on_damaged(on_damaged)
    selected = None if episodes is None else samplers.selected_ids(view.ring, view.episodes, episodes)
    if not damage:
        return selected
    if selected is not None:
        domain = selected
    else:  # every held episode: the closed ones kept, and the open one
        table = view.episodes
        domain = np.append(table.ids, table.next_id) if table.is_open(view.ring.appended) else table.ids
    hit = np.intersect1d(domain, np.asarray(damage.episodes, np.int64))
    if not len(hit):
        return selected
    if on_damaged == "raise":
        raise DamagedDataError(f"{damage.summary()}: the draw would include damaged episode(s) {hit[:10].tolist()}; "
                               "pass on_damaged='skip' to leave them out (or episodes= without them)")
    kept = np.setdiff1d(domain, hit)
    if not len(kept):
        which = "held" if selected is None else "selected"
        raise DamagedDataError(f"every {which} episode is damaged ({hit[:10].tolist()}"
                               f"{', ...' if len(hit) > 10 else ''}): on_damaged='skip' leaves none to draw "
                               f"from; {damage.summary()}")
    return kept
