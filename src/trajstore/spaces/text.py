"""``TextSpace``: a bounded-length ``str`` (a language instruction, a task name)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from trajstore.errors import InvalidValueError
from trajstore.spaces.base import SPACE_TYPES, LeafCheck, Space, leaf_name
from trajstore.spaces.metadata import SpaceMetadata

_ALPHABET = np.array(list("abcdefghijklmnopqrstuvwxyz "))


def _one(s: Any) -> Any:
    """One text value as validated: a 0-d array's item, an ``np.str_`` as ``str``, anything else as it is."""
    if isinstance(s, np.ndarray) and s.ndim == 0:
        s = s.item()
    return str(s) if isinstance(s, np.str_) else s


def _utf8(s: str) -> bool:
    """True if ``s`` has a UTF-8 form (no lone surrogate)."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@SPACE_TYPES.register("text")
class TextSpace(Space):
    """Strings of ``min_length`` to ``max_length`` characters (Unicode code points).

    One value is a ``str``; a batch is a NumPy array of dtype ``<U{max_length}`` and shape ``(N,)``.
    A value may also be an ``np.str_`` or a 0-d array holding a ``str``, a batch a list or iterable
    of such values. :meth:`validate` refuses (``InvalidValueError`` naming the leaf) anything else
    (``bytes`` included), NUL characters (fixed-width strings drop them), a length outside
    ``[min_length, max_length]`` and lone surrogates (they have no UTF-8 form to store).
    """

    shape: tuple[int, ...] = ()

    def __init__(self, max_length: int, min_length: int = 0, metadata: Any = None):
        super().__init__(metadata)
        if max_length < 1 or min_length < 0 or min_length > max_length:
            raise ValueError(f"TextSpace needs 0 <= min_length <= max_length and max_length >= 1, "
                             f"got min_length={min_length}, max_length={max_length}")
        self.max_length = int(max_length)
        self.min_length = int(min_length)
        self.dtype = np.dtype(f"<U{self.max_length}")

    def _copy_with(self, metadata: SpaceMetadata) -> "TextSpace":
        return TextSpace(self.max_length, self.min_length, metadata)

    def _check_one(self, s: Any, path: str) -> str:
        if not isinstance(s, str):
            raise InvalidValueError(f"leaf {leaf_name(path)!r}: expected str, got {type(s).__name__}")
        if "\x00" in s:  # NumPy's fixed-width strings (and HDF5's) drop trailing NULs
            raise InvalidValueError(f"leaf {leaf_name(path)!r}: text must not contain NUL characters")
        if not self.min_length <= len(s) <= self.max_length:
            raise InvalidValueError(f"leaf {leaf_name(path)!r}: expected {self.min_length} to "
                                    f"{self.max_length} characters, got {len(s)}")
        if not s.isascii() and not _utf8(s):  # stored as UTF-8: found here, not by the background write of the block
            bad = next(i for i, c in enumerate(s) if not _utf8(c))
            raise InvalidValueError(f"leaf {leaf_name(path)!r}: text must be valid Unicode, got a lone surrogate "
                                    f"{s[bad]!r} at index {bad} (it has no UTF-8 form)")
        return s

    def validate(self, x: Any, *, batched: bool = False, path: str = "", check_bounds: bool = True) -> Any:
        if not batched:
            return self._check_one(_one(x), path)
        if isinstance(x, (str, Mapping, set)) or not isinstance(x, Iterable):
            raise InvalidValueError(f"leaf {leaf_name(path)!r}: expected a batch of strings (a list or an array "
                                    f"of shape (N,)), got {type(x).__name__}")
        items = [self._check_one(_one(s), path) for s in x]
        return np.asarray(items, dtype=self.dtype).reshape(len(items))

    def leaf_check(self) -> LeafCheck:
        """Takes a ``str`` (or ``np.str_``, or a 0-d array holding one) of ``min_length`` to
        ``max_length`` characters without NUL, as a 0-d array of ``dtype`` (``<U{max_length}``, the
        dtype of a batch); no bounds."""
        lo, hi, dtype = self.min_length, self.max_length, self.dtype

        def convert(x: Any) -> np.ndarray | None:
            if type(x) is np.ndarray:
                if x.ndim:
                    return None
                x = x.item()
            if not isinstance(x, str) or not lo <= len(x) <= hi or "\x00" in x or not (x.isascii() or _utf8(x)):
                return None
            return np.asarray(x, dtype)

        return LeafCheck(convert)

    def sample(self, rng: np.random.Generator | None = None, batch_size: int | None = None) -> Any:
        rng = rng or np.random.default_rng()

        def one() -> str:
            n = int(rng.integers(self.min_length, self.max_length, endpoint=True))
            return "".join(rng.choice(_ALPHABET, size=n))

        if batch_size is None:
            return one()
        return np.asarray([one() for _ in range(batch_size)], dtype=self.dtype)

    def _config(self) -> dict[str, Any]:
        return {"max_length": self.max_length, "min_length": self.min_length}

    @classmethod
    def _from_config(cls, config: dict[str, Any], metadata: SpaceMetadata) -> "TextSpace":
        return cls(config["max_length"], config.get("min_length", 0), metadata)

    def __repr__(self) -> str:
        return f"TextSpace(max_length={self.max_length})"
