"""``BufferTests``: the replay-buffer conformance suite, the same tests for every storage layout.

:class:`~trajstore.testing.storage.StorageTests` checks one storage; this suite checks a whole
:class:`~trajstore.replay_buffer.ReplayBuffer` over a layout (the storages the routing picks for
each leaf, their options, ring or unbounded), through the buffer's public API only, so a new
storage or layout is checked whole. The oracle is :class:`~trajstore.testing.ring_model.RingModel`:
every written step encodes a serial, and a read must give the values of the serials the model
holds there (exactly where the leaf's storage says ``lossless``, within :attr:`min_psnr_db` per
frame for a lossy camera). A back door reads the ``step`` leaf of a closed folder around trajstore
(h5py for HDF5, NumPy for a memmap) and checks that the held steps reached the disk in ring order.

Wiring (``pip install trajstore[testing]``: pytest and hypothesis; hypothesis is imported only by
the random-operations test)::

    from trajstore.storages import VideoStorage
    from trajstore.testing.buffer import BufferTests

    class TestPNGRing(BufferTests):
        routing = {"kind_kwargs": {"image": {"format": "PNG"}}}   # dict_storage_kwargs_from_space(...)
        capacity = 16                                              # a ring; None: unbounded

    class TestVideoUnbounded(BufferTests):
        routing = {"kind_storage_cls": {"image": VideoStorage}}
        capacity = None
        min_psnr_db = 28.0                                         # the stated bound of a lossy camera
        random_examples = 3                                        # fewer random sequences (slow codec)

Other hooks (see :class:`BufferCase`): ``layout(space)`` returns
``(storage_cls, storage kwargs)`` for a layout that the routing keywords cannot express;
``make_space`` with ``step_values``, ``observation_value`` and ``serials_of`` for another step;
``assert_close`` for another lossy leaf; ``back_door_serials`` for another raw form.

The tests, for every layout:

- append/extend and read back (staged, flushed), every index kind against NumPy (int, negative
  int, slices, unsorted int arrays with repeats, bool masks), bad indexes, ``set_at``, the back door;
- episodes: data, final observations, ``discard_episode``, an episode left open by a writer that
  closed without ``end_episode`` or died after a flush (open for readers, interrupted once the
  folder is reopened for writing);
- the ring: ``len``, ``total_steps``, the oldest step and ``overwritten`` after wrapping around
  (the default episodes hold 27 steps: use a capacity below that);
- reopening after close (read-only and writable), ``refresh()`` of a reader after the writer's
  flush and discard, a stale reader of an overwritten ring (its steps or ``StaleReadError``, never
  torn steps), a reader then a writer in one process, pickling (reopens read-only);
- ``sample`` (with and without ``return_indices``, ``episodes=``), ``sample_windows`` (plain and
  with ``delta_indices`` and ``pad``), ``sample_transitions`` (when the step has its keys), each
  value an actual step of the buffer; ``stats()`` against NumPy, a reader's equal to the writer's;
- ``ReadOnlyError`` for every write of a reader; ``InvalidValueError`` naming the leaf for bad
  values, with nothing written;
- random sequences of append/extend/end_episode/discard/flush/reopen (hypothesis) on a ring of at
  most 5 slots or unbounded: the writer, and a reader refreshed after every commit, match the ring
  model after every operation; at the end the samplers, the statistics, a fresh reader and the
  back door do too.
"""

from __future__ import annotations

from trajstore.testing._buffer_case import (EPISODES, FRAMES, FRAMES_APART_DB, BufferCase, closest_frames_db, frames,
                                            step_space)
from trajstore.testing._buffer_episodes import EpisodeTests
from trajstore.testing._buffer_reads import ReadTests
from trajstore.testing._buffer_sampling import SamplingTests

__all__ = ["BufferTests", "BufferCase", "EPISODES", "FRAMES", "FRAMES_APART_DB", "frames", "step_space"]


class BufferTests(ReadTests, EpisodeTests, SamplingTests):
    """The whole suite; a test module subclasses it and sets ``capacity`` (and ``routing``)."""

    def test_frames_are_apart_at_the_bound(self) -> None:
        """The suite's own premise: a frame within ``min_psnr_db`` of another is that frame."""
        assert self.min_psnr_db > FRAMES_APART_DB, (f"min_psnr_db {self.min_psnr_db} dB does not tell the suite's "
                                                    f"frames apart (any two are within {FRAMES_APART_DB} dB)")
        assert closest_frames_db() < FRAMES_APART_DB, "two of the suite's frames are too close"
