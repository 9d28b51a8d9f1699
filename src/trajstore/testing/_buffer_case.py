"""The hooks and helpers of :class:`~trajstore.testing.buffer.BufferTests` (see its module docstring).

Every step the suite writes encodes a *serial* (:class:`~trajstore.testing.ring_model.RingModel`
gives them out, never twice): its ``step`` leaf is the serial, the other leaves are functions of
it, and its camera frame is one of :data:`FRAMES` synthetic frames (``moving_scene``), any two of
which are farther apart (<= 22 dB PSNR) than a lossy layout's bound allows, so a frame within the
bound is the right frame. The oracle of a read is the values of the serials the model holds there.
"""

from __future__ import annotations

import functools
import itertools
from pathlib import Path
from typing import Any, Iterator

import h5py
import numpy as np
import pytest

from trajstore.spaces import BinarySpace, BoxSpace, DictSpace, Space
from trajstore.storages import DictStorage, HDF5Storage, MemmapStorage, SpaceStorage, dict_storage_kwargs_from_space
from trajstore.storages.hdf5 import DATA_FILE as HDF5_FILE
from trajstore.storages.memmap import DATA_FILE as MEMMAP_FILE
from trajstore.replay_buffer import ReplayBuffer
from trajstore.testing._frames import moving_scene, psnr
from trajstore.testing.ring_model import RingModel, check_against_model
from trajstore.testing.values import flatten_value, leaves_of, unflatten_value

#: Camera frames of the default space, ``(H, W, 3)`` uint8, and how many distinct ones there are.
FRAME_SHAPE = (24, 32, 3)
FRAMES = 64
#: PSNR (dB) above which two different frames of :func:`frames` never come: a bound must be higher.
FRAMES_APART_DB = 22.0
#: Lengths of the episodes :meth:`BufferCase.recorded` writes (27 steps: a ring of 16 wraps).
EPISODES = (5, 7, 9, 6)


@functools.lru_cache(maxsize=None)
def frames() -> np.ndarray:
    """uint8 ``(FRAMES, *FRAME_SHAPE)``: every third frame of a moving scene (read-only array)."""
    out = moving_scene(3 * FRAMES, FRAME_SHAPE[0], FRAME_SHAPE[1], seed=3)[::3].copy()
    out.flags.writeable = False
    return out


@functools.lru_cache(maxsize=None)
def closest_frames_db() -> float:
    """The highest PSNR (dB) between two different frames of :func:`frames`."""
    f = frames()
    return max(float(psnr(f, f[(np.arange(len(f)) + shift) % len(f)]).max()) for shift in range(1, len(f)))


def step_space() -> DictSpace:
    """The default step: a camera and a state (``observation``), ``action``, ``reward``,
    ``terminated``, ``truncated`` (so transitions can be drawn) and ``step`` (the serial, int64)."""
    camera = {"kind": "image", "layout": "HWC", "fps": 10}
    wide = dict(low=-1e6, high=1e6, dtype=np.float32)
    return DictSpace({
        "observation": DictSpace({"pixels": BoxSpace(0, 255, FRAME_SHAPE, np.uint8, metadata=camera),
                                  "state": BoxSpace(shape=(3,), **wide)}),
        "action": BoxSpace(shape=(2,), **wide),
        "reward": BoxSpace(shape=(), **wide),
        "terminated": BinarySpace(),
        "truncated": BinarySpace(),
        "step": BoxSpace(0, 2**40, (), np.int64),
    })


def observation_of(serials: np.ndarray) -> dict[str, np.ndarray]:
    """The observation leaves of :func:`step_space` for int64 serials ``(N,)``."""
    s = serials.astype(np.float64)[:, None]
    return {"pixels": frames()[serials % FRAMES],
            "state": (s * [1.0, -1.0, 0.5] + [0.0, 0.25, 0.125]).astype(np.float32)}


class BufferCase:
    """Hooks (override in a test module) and helpers shared by the groups of buffer tests.

    Attributes:
        capacity: ring size in steps, or ``None`` for an unbounded buffer (set by the subclass).
        routing: keyword arguments of :func:`~trajstore.storages.dict_storage_kwargs_from_space`
            (the layout), used by the default :meth:`layout`.
        min_psnr_db: the bound of a lossy camera leaf (a storage whose ``lossless`` is False): every
            frame read back must be at least this close to the frame written (dB). Must exceed
            :data:`FRAMES_APART_DB`, so that a frame within it is the right one.
        random_examples: hypothesis examples of the random-operations test (each a new folder).
        random_operations: operations per example.
    """

    capacity: int | None
    routing: dict[str, Any] = {}
    min_psnr_db: float = 35.0
    random_examples: int = 8
    random_operations: int = 12

    # -- hooks -------------------------------------------------------------------------------
    def make_space(self) -> Space:
        """The step space; another space needs :meth:`step_values`, :meth:`observation_value` and
        :meth:`serials_of` to match."""
        return step_space()

    def layout(self, space: Space) -> tuple[type[SpaceStorage], dict[str, Any]]:
        """``(storage_cls, storage kwargs)`` for ``ReplayBuffer.create``."""
        return DictStorage, dict_storage_kwargs_from_space(space, **self.routing)

    def step_values(self, serials: Any) -> Any:
        """A batch of steps (leading axis ``N``) that encode int serials ``(N,)``."""
        s = np.asarray(serials, np.int64).reshape(-1)
        return {"observation": observation_of(s),
                "action": np.stack([s + 0.5, -2.0 * s], axis=-1).astype(np.float32).reshape(len(s), 2),
                "reward": (s * 0.25).astype(np.float32),
                "terminated": s % 5 == 4,
                "truncated": s % 7 == 6,
                "step": s.copy()}

    def observation_value(self, serial: int) -> Any:
        """One final observation (no batch axis) that encodes ``serial``."""
        return {k: v[0] for k, v in observation_of(np.array([serial], np.int64)).items()}

    def serials_of(self, batch: Any) -> np.ndarray:
        """The serials of steps read back, int64 of the batch's leading shape."""
        return np.asarray(batch["step"], np.int64)

    def assert_close(self, name: str, actual: np.ndarray, expected: np.ndarray) -> None:
        """The bound of a lossy leaf, rows ``(M, *leaf shape)``: a uint8 camera leaf per frame by
        :attr:`min_psnr_db`; any other lossy leaf needs an override.

        Raises:
            AssertionError: a row outside the bound (naming the leaf and the row).
            NotImplementedError: a lossy leaf that is not ``(H, W, 3)`` uint8.
        """
        if actual.dtype != np.uint8 or actual.ndim != 4 or actual.shape[-1] != 3:
            raise NotImplementedError(f"leaf {name!r} is lossy but not an (H, W, 3) uint8 camera: override "
                                      f"{type(self).__name__}.assert_close with its bound")
        assert actual.shape == expected.shape, f"leaf {name!r}: shape {actual.shape}, expected {expected.shape}"
        if not len(actual):
            return
        db = psnr(actual, expected)
        worst = int(np.argmin(db))
        assert db[worst] >= self.min_psnr_db, (f"leaf {name!r}: row {worst} is {db[worst]:.1f} dB from the value "
                                               f"written, the bound is {self.min_psnr_db} dB")

    def back_door_serials(self, parts: dict[str, SpaceStorage]) -> np.ndarray | None:
        """The ``step`` leaf of every slot as it is on disk, read around trajstore (h5py for HDF5,
        NumPy for a memmap), int64 ``(slots,)``; ``None`` when its storage has no raw form here.
        Called once the buffer is closed, with the parts (``storage.parts()``) its storage had."""
        for key, part in parts.items():
            names = [name for name, _ in leaves_of(part.space)]
            if key == "step" and isinstance(part, MemmapStorage):
                return np.fromfile(Path(part.cache_path) / MEMMAP_FILE, "<i8")
            in_hdf5 = (key == "step" and names == [""]) or (key == "*" and "step" in names)
            if isinstance(part, HDF5Storage) and in_hdf5:
                with h5py.File(Path(part.cache_path) / HDF5_FILE, "r", locking=False) as f:
                    return np.asarray(f["data" if key == "step" else "step"][:], np.int64)
        return None

    # -- helpers -----------------------------------------------------------------------------
    _names = itertools.count()

    @pytest.fixture(autouse=True)
    def _closes_its_buffers(self, tmp_path: Path) -> Iterator[None]:
        """Buffers made by :meth:`create` are closed after each test, also when it fails (before the
        folder ``tmp_path`` goes)."""
        yield
        self.close_buffers()

    def close_buffers(self) -> None:
        """Close every buffer :meth:`create` made (closing twice does nothing)."""
        for rb in self.__dict__.pop("_buffers", []):
            rb.close()

    def create(self, tmp_path: Path, *, capacity: Any = "default", multiprocessing: bool = False,
               name: str | None = None) -> Any:
        """A new buffer of this layout in a new folder under ``tmp_path``."""
        space = self.make_space()
        storage_cls, kwargs = self.layout(space)
        folder = tmp_path / (name or f"rb{next(self._names)}")
        rb = ReplayBuffer.create(storage_cls, space, cache_path=folder,
                                 capacity=self.capacity if capacity == "default" else capacity,
                                 multiprocessing=multiprocessing, **kwargs)
        self.__dict__.setdefault("_buffers", []).append(rb)
        return rb

    def record(self, rb: Any, model: RingModel, lengths: tuple[int, ...] = EPISODES, *, finals: bool = True,
               end_last: bool = True) -> None:
        """Episodes of ``lengths`` steps through ``extend`` (the first step of each by ``append``);
        every other one ends with a final observation and data ``{"task": ..., "n": k}``; the last
        stays open unless ``end_last``."""
        for k, n in enumerate(lengths):
            serials = model.add(n)
            batch = self.step_values(serials)
            rb.append(unflatten_value(rb.space, {p: v[0] for p, v in flatten_value(rb.space, batch).items()}))
            rb.extend(unflatten_value(rb.space, {p: v[1:] for p, v in flatten_value(rb.space, batch).items()}))
            if k == len(lengths) - 1 and not end_last:
                break
            final = model.new_serials(1)[0] if finals and k % 2 == 0 else None
            data = {"task": f"task {k % 2}", "n": k}
            rb.end_episode(None if final is None else self.observation_value(final), **data)
            model.end_episode(data, final)

    def recorded(self, tmp_path: Path, **kwargs: Any) -> tuple[Any, RingModel]:
        """A new buffer holding :data:`EPISODES` (see :meth:`record`) and its model."""
        rb = self.create(tmp_path, multiprocessing=kwargs.pop("multiprocessing", False))
        model = RingModel(rb.capacity)
        self.record(rb, model, **kwargs)
        return rb, model

    def lossless_leaves(self, rb: Any) -> dict[str, bool]:
        """Leaf name -> whether the storage holding it says it is lossless (``SpaceStorage.parts()``)."""
        parts = rb.storage.parts()
        out = {}
        for name, _ in leaves_of(rb.space):
            holder = next((part for key, part in parts.items() if key != "*" and (name == key or name.startswith(
                key + "/"))), parts.get("*", rb.storage))
            out[name] = bool(holder.lossless)
        return out

    def check_steps(self, rb: Any, got: Any, serials: Any, *, subtree: str = "", what: str = "read") -> None:
        """Every leaf of ``got`` (leading shape that of ``serials``, or none for a scalar serial) against the
        values written for ``serials``: exact where the leaf's storage is lossless, else :meth:`assert_close`.
        ``subtree``: ``got`` is that subtree of a step (``"observation"``)."""
        s = np.asarray(serials, np.int64)
        space = rb.space[subtree] if subtree else rb.space
        want = self.step_values(s.reshape(-1))
        if subtree:
            want = want[subtree]
        lossless = self.lossless_leaves(rb)
        flat_want = flatten_value(space, want)
        for name, leaf in leaves_of(space):
            full = "/".join(p for p in (subtree, name) if p)
            value = np.asarray(flatten_value(space, got)[name])
            assert value.shape == (*s.shape, *leaf.shape), f"{what}: leaf {full!r} has shape {value.shape}, " \
                f"expected {(*s.shape, *leaf.shape)}"
            rows = value.reshape(-1, *leaf.shape)
            if lossless[full]:
                np.testing.assert_array_equal(rows, flat_want[name], err_msg=f"{what}: leaf {full!r}", strict=True)
            else:
                assert rows.dtype == flat_want[name].dtype, f"{what}: leaf {full!r} has dtype {rows.dtype}"
                self.assert_close(full, rows, flat_want[name])

    def check_model(self, rb: Any, model: RingModel, *, values: bool = True) -> None:
        """Length, step count, episodes and held steps against ``model``; with ``values``, the values of
        the held steps and of the held episodes' final observations too."""
        check_against_model(rb, model, self.serials_of)
        if not values:
            return
        if model.held:
            self.check_steps(rb, rb[:], np.array(model.held))
        for k, ep in enumerate(model.episodes()):
            if ep.final_serial is not None:
                self.check_steps(rb, rb.final_observation(k), ep.final_serial, subtree="observation",
                                 what=f"final observation of episode {ep.id}")

    def check_back_door(self, parts: dict[str, SpaceStorage], model: RingModel) -> None:
        """What reached the disk (closed buffer): the held serials, in ring order from some slot."""
        raw = self.back_door_serials(parts)
        if raw is None:
            return
        held = np.array(model.held, np.int64)
        if model.capacity is None:
            assert raw[:len(held)].tolist() == held.tolist(), "the file's rows are not the held steps in order"
            return
        assert len(raw) == model.capacity, f"the file has {len(raw)} rows for a ring of {model.capacity}"
        if not len(held):
            return
        heads = [h for h in range(model.capacity) if raw[(h + np.arange(len(held))) % model.capacity].tolist()
                 == held.tolist()]
        assert heads, f"the file's rows {raw.tolist()} do not hold the steps {held.tolist()} in ring order"
