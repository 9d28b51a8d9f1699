"""Whether a reader's read may have raced the writer reusing slots. Pure arithmetic, no I/O.

A writer reuses the slot of a committed step in two cases, each time after committing a view
that no longer holds that step:

* a ring overwrites its oldest steps (the committed view drops them first, see
  :func:`~trajstore.replay_buffer.metadata.view_before_overwrite`): the oldest held step number
  rises;
* ``discard_episode`` gives the slots of the open episode's steps (some of which may have been
  flushed, so readers saw them) to the next appends: the episode table's ``discards`` counter
  rises. Discards happen at non-decreasing step numbers, and a discard after the reader's view
  either dropped the episode that was open in that view or started past the view's newest step.

A reader reads under its view, then refreshes; if the view changed, the read is stale when one
of these may have rewritten a slot it read.
"""

from __future__ import annotations

from trajstore.replay_buffer.episodes import EpisodeTable
from trajstore.replay_buffer.ring import RingState


def read_may_be_stale(view: RingState, view_episodes: EpisodeTable, now: RingState, now_episodes: EpisodeTable,
                      first: int, last: int) -> bool:
    """True if the steps at logical indices ``first..last`` of ``view`` may have been rewritten by
    the time the writer committed ``now``.

    Conservative: a discard after the view makes every read step of the episode open in the view
    stale, even when the discard hit a later episode (the caller reads again).
    """
    if view.first_step + first < now.first_step:
        return True  # the ring overwrote the oldest steps read
    open_start = view_episodes.open_start
    return (now_episodes.discards != view_episodes.discards and open_start is not None
            and view.first_step + last >= open_start)
