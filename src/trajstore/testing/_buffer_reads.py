"""Writing and reading back, index kinds, reopening, refresh, pickling, read-only and bad input:
the first group of :class:`~trajstore.testing.buffer.BufferTests`."""

from __future__ import annotations

import copy
import pickle
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from trajstore.errors import AlreadyOpenError, InvalidValueError, ReadOnlyError, StaleReadError
from trajstore.replay_buffer import ReplayBuffer
from trajstore.testing._buffer_case import BufferCase
from trajstore.testing.ring_model import RingModel
from trajstore.testing.values import flatten_value, leaves_of, unflatten_value


#: Steps a stale reader samples.
BATCH_OF_STALE = 16


def _indexes(n: int) -> list[Any]:
    """Every index kind, for a buffer of ``n`` >= 6 steps."""
    rng = np.random.default_rng(n)
    mask = np.zeros(n, bool)
    mask[rng.permutation(n)[: n // 3]] = True
    return [0, 3, n - 1, -1, -n, slice(None), slice(1, n - 2), slice(None, None, 3), slice(-4, None),
            slice(2, 2), slice(n + 5, n + 9), np.array([n - 1, 0, 3, 3, 1, n - 1]), np.array([-1, 0, -2]),
            np.array([], np.int64), [2, 1, 2], mask]


class ReadTests(BufferCase):
    """Steps read back as written; see :mod:`trajstore.testing.buffer`."""

    def test_append_and_extend_read_back(self, tmp_path: Path) -> None:
        rb = self.create(tmp_path)
        model = RingModel(rb.capacity)
        assert len(rb) == 0 and rb.total_steps == 0 and rb.episodes == []
        self.record(rb, model, (1, 4, 3), end_last=False)
        self.check_model(rb, model)
        self.check_steps(rb, rb[-1], model.held[-1], what="rb[-1]")  # staged steps read back before a flush
        rb.flush()
        self.check_model(rb, model)
        parts = rb.storage.parts()
        rb.close()
        self.check_back_door(parts, model)

    def test_back_door_sees_the_held_steps(self, tmp_path: Path) -> None:
        """The ``step`` leaf read around trajstore (the other tests check it too, where it exists)."""
        rb, model = self.recorded(tmp_path)
        parts = rb.storage.parts()
        rb.close()
        if self.back_door_serials(parts) is None:
            pytest.skip("no back door for this layout's step leaf: override back_door_serials")
        self.check_back_door(parts, model)

    def test_every_index_kind_matches_numpy(self, tmp_path: Path) -> None:
        rb, model = self.recorded(tmp_path)
        held = np.array(model.held, np.int64)
        for index in _indexes(len(held)):
            expected = held[index]
            try:
                self.check_steps(rb, rb[index], expected, what=f"rb[{index!r}]")
            except AssertionError as exc:
                raise AssertionError(f"index {index!r}: {exc}") from exc
        rb.close()

    def test_bad_index(self, tmp_path: Path) -> None:
        rb, model = self.recorded(tmp_path)
        n = len(model.held)
        for index, error in [(n, IndexError), (-n - 1, IndexError), (np.array([0, n]), IndexError),
                             (1.5, TypeError), (slice(None, None, -1), ValueError)]:
            with pytest.raises(error):
                rb[index]
        rb.close()

    @pytest.mark.parametrize("read_only", [True, False])
    def test_reopen_after_close(self, tmp_path: Path, read_only: bool) -> None:
        rb, model = self.recorded(tmp_path, end_last=False)
        folder, parts = rb.cache_path, rb.storage.parts()
        rb.close()
        self.check_back_door(parts, model)
        again = ReplayBuffer.load_from(folder, read_only=read_only)
        assert again.read_only is read_only and again.capacity == self.capacity and again.space == rb.space
        if not read_only:
            model.reopen_for_writing()  # the open episode left by close() is ended as interrupted
        self.check_model(again, model)
        for k, ep in enumerate(model.episodes()):
            final = again.final_observation(k)
            assert (final is None) == (ep.final_serial is None), f"episode {k}: final observation {final!r}"
            if final is not None:
                self.check_steps(again, final, ep.final_serial, subtree="observation", what=f"final {k}")
        if not read_only:  # a writer goes on where the folder ended
            self.record(again, model, (3,))
            self.check_model(again, model)
        again.close()

    def test_refresh_sees_the_writers_flush(self, tmp_path: Path) -> None:
        writer = self.create(tmp_path, multiprocessing=True)
        model = RingModel(writer.capacity)
        self.record(writer, model, (4, 3))
        reader = ReplayBuffer.load_from(writer.cache_path, read_only=True, multiprocessing=True)
        self.check_model(reader, model)
        assert reader.refresh() is False
        self.record(writer, model, (6, 8), end_last=False)  # a ring of 16 wraps here
        writer.flush()
        assert reader.refresh() is True
        self.check_model(reader, model)
        assert reader.refresh() is False
        writer.end_episode(**{"task": "last"})
        model.end_episode({"task": "last"})
        assert reader.refresh() is True
        self.check_model(reader, model)
        self.record(writer, model, (5,), end_last=False)
        writer.flush()
        assert writer.discard_episode() == model.discard() == 5  # committed at once: no flush needed
        assert reader.refresh() is True
        self.check_model(reader, model)
        reader.close()
        writer.close()

    def test_set_at_overwrites_held_steps(self, tmp_path: Path) -> None:
        rb, model = self.recorded(tmp_path)
        at = np.array([len(model.held) - 1, 0, 6, 2])
        serials = model.new_serials(len(at))
        rb.set_at(at, self.step_values(serials))
        for i, serial in zip(at.tolist(), serials):
            model.held[i] = serial
        self.check_model(rb, model)
        one = model.new_serials(1)
        rb.set_at(-2, self._one(one))  # an int index: one step, no batch axis
        model.held[-2] = one[0]
        self.check_model(rb, model)
        parts = rb.storage.parts()
        rb.close()
        self.check_back_door(parts, model)
        with ReplayBuffer.load_from(rb.cache_path) as again:
            self.check_model(again, model)

    def test_reader_then_writer_in_one_process(self, tmp_path: Path) -> None:
        """A reader open, then a writer of the same folder in the same process: both work, or the
        writer is refused with ``AlreadyOpenError``; never an error that calls the folder damaged."""
        rb, model = self.recorded(tmp_path, multiprocessing=True)
        rb.close()
        reader = ReplayBuffer.load_from(rb.cache_path, read_only=True, multiprocessing=True)
        try:
            writer = ReplayBuffer.load_from(rb.cache_path, read_only=False, multiprocessing=True)
        except AlreadyOpenError:
            reader.close()
            return
        self.record(writer, model, (3,))
        assert reader.refresh() is True
        self.check_model(reader, model)
        writer.close()
        reader.close()

    def test_a_stale_reader_gets_no_torn_steps(self, tmp_path: Path) -> None:
        """A reader that did not refresh while the writer overwrote (a ring) or kept (unbounded) the
        steps it holds: a read gives those steps as written, or ``StaleReadError`` and a refreshed view;
        a sampler redraws by itself and gives steps of the view it read."""
        writer = self.create(tmp_path, multiprocessing=True)
        model = RingModel(writer.capacity)
        self.record(writer, model, (4, 5))
        before = copy.deepcopy(model)
        readers = [ReplayBuffer.load_from(writer.cache_path, read_only=True, multiprocessing=True) for _ in range(2)]
        self.record(writer, model, (2 * (self.capacity or 8) + 3,))  # overwrites every slot of a ring
        stale = readers[0]
        try:
            self.check_steps(stale, stale[:], np.array(before.held), what="a stale reader's view")
            assert self.capacity is None, "a ring's overwritten steps were read back as they were"
        except StaleReadError:
            self.check_model(stale, model)  # refreshed by the time it is raised
        batch, idx = readers[1].sample(BATCH_OF_STALE, rng=np.random.default_rng(8), return_indices=True)
        now = model if len(readers[1]) == len(model.held) and readers[1].total_steps == model.total else before
        self.check_steps(readers[1], batch, np.array(now.held)[idx], what="a stale reader's sample")
        for reader in readers:
            reader.close()
        writer.close()

    def test_pickle_reopens_read_only(self, tmp_path: Path) -> None:
        rb, model = self.recorded(tmp_path)
        of_writer = pickle.loads(pickle.dumps(rb))
        of_reader = pickle.loads(pickle.dumps(of_writer))
        for reopened in (of_writer, of_reader):
            assert reopened.read_only and reopened.cache_path == rb.cache_path
            self.check_model(reopened, model)
            with pytest.raises(ReadOnlyError):
                reopened.append(self._one(model.new_serials(1)))
            reopened.close()
        rb.close()

    def test_read_only_refuses_writes(self, tmp_path: Path) -> None:
        rb, model = self.recorded(tmp_path, end_last=False)
        rb.flush()
        ro = ReplayBuffer.load_from(rb.cache_path)
        serials = model.new_serials(2)
        attempts = {"append": lambda: ro.append(self._one(serials)), "extend": lambda: ro.extend(
            self.step_values(serials)), "set_at": lambda: ro.set_at(0, self._one(serials)),
            "end_episode": lambda: ro.end_episode(task="x"), "discard_episode": ro.discard_episode,
            "flush": ro.flush}
        for name, attempt in attempts.items():
            with pytest.raises(ReadOnlyError):
                attempt()
        self.check_model(ro, model)
        ro.close()
        rb.close()

    def test_bad_input_names_the_leaf_and_writes_nothing(self, tmp_path: Path) -> None:
        rb, model = self.recorded(tmp_path, end_last=False)
        good = self.step_values(model.new_serials(3))
        flat = flatten_value(rb.space, good)
        for name, leaf in leaves_of(rb.space):
            wrong_shape = {**flat, name: np.zeros((3, *leaf.shape, 2), flat[name].dtype)}
            for attempt in (lambda: rb.extend(unflatten_value(rb.space, wrong_shape)),
                            lambda: rb.append(self._one_of({k: v[:1] for k, v in wrong_shape.items()}, rb))):
                with pytest.raises(InvalidValueError, match=re.escape(repr(name))):
                    attempt()
            short = {**flat, name: flat[name][:2]}
            with pytest.raises(InvalidValueError, match=re.escape(name)):
                rb.extend(unflatten_value(rb.space, short))
            if getattr(leaf, "dtype", None) is not None and np.dtype(leaf.dtype).kind == "f":
                outside = {**flat, name: np.full_like(flat[name], np.nan)}
                with pytest.raises(InvalidValueError, match=re.escape(repr(name))):
                    rb.extend(unflatten_value(rb.space, outside))
        missing = dict(good)
        missing.pop(next(iter(missing)))
        with pytest.raises(InvalidValueError):
            rb.extend(missing)
        with pytest.raises(InvalidValueError, match="'bad'"):
            rb.end_episode(bad=np.zeros(3))
        has_observation = "observation" in getattr(rb.space, "spaces", {})
        observation = dict(flatten_value(rb.space["observation"], self.observation_value(model.new_serials(1)[0]))
                            if has_observation else {})
        for name, value in observation.items():  # a bad final observation or set_at value: refused too
            wrong = {**observation, name: np.zeros((*np.shape(value), 2), np.asarray(value).dtype)}
            with pytest.raises(InvalidValueError, match=re.escape(name)):
                rb.end_episode(unflatten_value(rb.space["observation"], wrong), task="refused")
            with pytest.raises(InvalidValueError, match=re.escape(repr(f"observation/{name}"))):
                rb.set_at(0, self._one_of({**{k: v[:1] for k, v in flat.items()},
                                           f"observation/{name}": wrong[name][None]}, rb))
        self.check_model(rb, model)
        rb.close()
        again = ReplayBuffer.load_from(rb.cache_path)
        self.check_model(again, model)  # nothing of the refused calls reached the folder
        again.close()

    # -- helpers -----------------------------------------------------------------------------
    def _one(self, serials: list[int]) -> Any:
        """One step (no batch axis) encoding ``serials[0]``."""
        space = self.make_space()
        return unflatten_value(space, {p: v[0] for p, v in flatten_value(space, self.step_values(serials[:1])).items()})

    @staticmethod
    def _one_of(flat: dict[str, np.ndarray], rb: Any) -> Any:
        return unflatten_value(rb.space, {p: v[0] for p, v in flat.items()})
