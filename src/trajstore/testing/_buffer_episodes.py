"""Episodes, the ring's wrap-around and random operation sequences against the ring model: the
second group of :class:`~trajstore.testing.buffer.BufferTests`."""

from __future__ import annotations

import copy
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from trajstore.replay_buffer import ReplayBuffer
from trajstore.testing._buffer_case import EPISODES, BufferCase
from trajstore.testing._buffer_sampling import check_samplers, check_stats
from trajstore.testing.ring_model import Op, RingModel, apply_operation
from trajstore.testing.values import flatten_value

#: Slots of a ring in the random-operations test.
RANDOM_RING = 5
#: Operations after which every step the writer holds is committed (a discard commits at once).
COMMITS = ("flush", "end_episode", "discard", "reopen")

#: A writer that extends by the steps of one .npz file (leaves in order), flushes, extends by those of a
#: second one, reads (so they are written into their slots, overwriting a ring's) and dies without a flush.
_CRASHING_WRITER = """
import os, sys
import numpy as np
from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import tree
rb = ReplayBuffer.load_from(sys.argv[1], read_only=False)
for n, name in enumerate(sys.argv[2:]):
    leaves = np.load(name)
    rb.extend(tree.unflatten(rb.space, [leaves[f"arr_{i}"] for i in range(len(leaves.files))]))
    if n == 0:
        rb.flush()
rb[len(rb) - 1]  # the writer reads its own steps: the lost ones reach their slots, uncommitted
os._exit(0)
"""


class EpisodeTests(BufferCase):
    """Episodes and the ring; see :mod:`trajstore.testing.buffer`."""

    def test_episodes_keep_data_and_final_observations(self, tmp_path: Path) -> None:
        rb, model = self.recorded(tmp_path)
        self.check_model(rb, model, values=False)
        held = model.episodes()
        assert rb.num_episodes == len(held)
        for k, ep in enumerate(held):
            got = rb.episode(k)
            assert got.data == ep.data and got.id == ep.id, f"episode {k}: {got!r} data {got.data}"
            assert rb.episode(k - len(held)).id == ep.id  # negative positions count from the newest
            self.check_steps(rb, rb.get_episode(k), np.array(model.held[ep.start:ep.stop]), what=f"episode {k}")
            final = rb.final_observation(k)
            if ep.final_serial is None:
                assert final is None, f"episode {k} has no final observation, got {final!r}"
            else:
                self.check_steps(rb, final, ep.final_serial, subtree="observation", what=f"final observation {k}")
        rb.close()

    def test_discard_episode(self, tmp_path: Path) -> None:
        rb, model = self.recorded(tmp_path, end_last=False)
        rb.flush()  # the steps to discard were committed: readers could see them
        n_open = EPISODES[-1]
        assert rb.discard_episode() == model.discard() == n_open
        self.check_model(rb, model)
        assert rb.discard_episode() == model.discard() == 0
        self.record(rb, model, (4,))  # the freed step numbers and slots are written again
        self.check_model(rb, model)
        rb.close()
        again = ReplayBuffer.load_from(rb.cache_path)
        self.check_model(again, model)
        again.close()

    def test_interrupted_episode_after_an_unclean_close(self, tmp_path: Path) -> None:
        rb, model = self.recorded(tmp_path, end_last=False)
        rb.close()  # without end_episode: the writer stopped in the middle of an episode
        reader = ReplayBuffer.load_from(rb.cache_path)
        last = reader.episode(-1)
        assert not last.done and not last.interrupted, f"a reader sees the fragment as the open episode: {last!r}"
        self.check_model(reader, model, values=False)
        reader.close()
        writer = ReplayBuffer.load_from(rb.cache_path, read_only=False)
        model.reopen_for_writing()
        last = writer.episode(-1)
        assert last.interrupted and not last.done and last.data == {}, f"after reopening for writing: {last!r}"
        self.record(writer, model, (2,))  # a new episode, never merged with the fragment
        self.check_model(writer, model)
        assert writer.episode(-1).id == last.id + 1
        writer.close()

    def test_interrupted_episode_after_a_crash(self, tmp_path: Path) -> None:
        """A writer process that dies (``os._exit``) in the middle of an episode, after a flush and
        more appends: the next writer finds the flushed steps (less, for a ring, a prefix of its oldest
        ones that the lost appends may have overwritten), ends them as an interrupted episode and
        counts none of the lost steps."""
        rb, model = self.recorded(tmp_path, lengths=EPISODES[:2])
        folder = rb.cache_path
        rb.close()
        flushed = self.step_values(model.add(5))
        flushed_model = copy.deepcopy(model)
        lost = self.step_values(model.add((self.capacity or 8) // 2 + 3))  # appended, never flushed
        for name, batch in (("flushed", flushed), ("lost", lost)):
            np.savez(tmp_path / f"{name}.npz", *flatten_value(rb.space, batch).values())
        subprocess.run([sys.executable, "-c", _CRASHING_WRITER, str(folder), str(tmp_path / "flushed.npz"),
                        str(tmp_path / "lost.npz")], check=True, timeout=120)
        writer = ReplayBuffer.load_from(folder, read_only=False)
        model = flushed_model
        held = self.serials_of(writer[:]).tolist() if len(writer) else []
        dropped = len(model.held) - len(held)
        assert held == model.held[dropped:], f"after the crash {held}, flushed {model.held}"
        assert dropped == 0 or self.capacity is not None, "an unbounded buffer lost flushed steps"
        del model.held[:dropped]
        model.reopen_for_writing()
        self.check_model(writer, model)  # the fragment, where held, is the interrupted last episode
        assert model.episodes() and model.episodes()[-1].interrupted, "the suite's ring lost the whole fragment"
        self.record(writer, model, (3,))
        self.check_model(writer, model)
        writer.close()

    def test_ring_wraps_around(self, tmp_path: Path) -> None:
        rb, model = self.recorded(tmp_path)
        total = sum(EPISODES)
        assert rb.total_steps == total
        if self.capacity is None:
            assert len(rb) == total and not any(e.overwritten for e in rb.episodes)
        else:
            assert self.capacity < total, "the suite's episodes must wrap the ring: use a capacity below 27"
            assert len(rb) == self.capacity
            assert self.serials_of(rb[0]) == model.held[0]  # the oldest held step
            assert rb.episode(0).overwritten or rb.episode(0).start == 0
        self.check_model(rb, model)
        more = 2 * (self.capacity or 8) + 3  # one episode longer than the ring
        self.record(rb, model, (more,))
        self.check_model(rb, model)
        if self.capacity is not None:
            assert len(rb) == self.capacity and [e.overwritten for e in rb.episodes] == [True]
        parts = rb.storage.parts()
        rb.close()
        self.check_back_door(parts, model)

    def test_random_operations_match_the_ring_model(self, tmp_path: Path) -> None:
        """hypothesis draws sequences of append/extend/end_episode/discard/flush/reopen; after every
        operation the buffer matches :class:`~trajstore.testing.ring_model.RingModel`, and at the end
        a reader of the closed folder and the back door do too. A ring layout runs with at most
        :data:`RANDOM_RING` slots, so that short sequences wrap it several times."""
        from hypothesis import HealthCheck, given, settings

        from trajstore.testing.strategies import operations

        capacity = None if self.capacity is None else min(self.capacity, RANDOM_RING)

        @settings(max_examples=self.random_examples, deadline=None, database=None,
                  suppress_health_check=[HealthCheck.too_slow])
        @given(ops=operations(min_size=self.random_operations // 2, max_size=self.random_operations,
                              max_extend=2 * RANDOM_RING))
        def run(ops: list[Op]) -> None:
            with tempfile.TemporaryDirectory(dir=tmp_path) as folder:
                self._run_operations(Path(folder), ops, capacity)

        run()

    def _run_operations(self, folder: Path, ops: list[Op], capacity: int | None) -> None:
        """Run ``ops`` on a writer and the model, with a reader of the folder that refreshes after
        every commit (flush, end_episode, discard, reopen) and must then see the model's state."""
        rb = self.create(folder, capacity=capacity, multiprocessing=True)
        model = RingModel(rb.capacity)
        readers = [ReplayBuffer.load_from(rb.cache_path, read_only=True, multiprocessing=True)]

        def reopen(old: Any) -> Any:
            readers.pop().close()  # a reader open in this process while a writer opens: see the suite's own test
            old.close()
            new = ReplayBuffer.load_from(old.cache_path, read_only=False, multiprocessing=True)
            readers.append(ReplayBuffer.load_from(old.cache_path, read_only=True, multiprocessing=True))
            return new

        try:
            for i, op in enumerate(ops):
                rb = apply_operation(rb, model, op, steps=self.step_values, observation=self.observation_value,
                                     reopen=reopen)
                try:
                    self.check_model(rb, model, values=False)
                    if op.kind in COMMITS:  # the writer's whole state is committed: a reader sees it all
                        readers[0].refresh()
                        self.check_model(readers[0], model, values=False)
                except AssertionError as exc:
                    raise AssertionError(f"after {ops[:i + 1]}: {exc}") from exc
            self.check_model(rb, model)
            try:
                check_samplers(self, rb, model, np.random.default_rng(len(ops)))
                check_stats(self, rb, model)
            except AssertionError as exc:
                raise AssertionError(f"sampling or statistics after {ops}: {exc}") from exc
        finally:
            parts = rb.storage.parts()
            readers[0].close()
            rb.close()
        reader = ReplayBuffer.load_from(rb.cache_path)
        try:
            self.check_model(reader, model)
            check_stats(self, reader, model)
        except AssertionError as exc:
            raise AssertionError(f"a reader after {ops}: {exc}") from exc
        finally:
            reader.close()
        self.check_back_door(parts, model)
