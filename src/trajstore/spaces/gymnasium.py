"""Convert ``gymnasium.spaces`` to trajstore spaces (gymnasium is imported lazily)."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from trajstore.spaces.base import Space
from trajstore.spaces.binary import BinarySpace
from trajstore.spaces.box import BoxSpace
from trajstore.spaces.dict import DictSpace
from trajstore.spaces.text import TextSpace


def from_gymnasium(space: Any, metadata: Mapping[str, Any] | None = None) -> Space:
    """The trajstore space equal in values to a gymnasium space.

    ``Box`` -> :class:`BoxSpace`; ``Discrete(n, start)`` -> scalar int64 ``BoxSpace`` on
    ``[start, start + n - 1]``; ``MultiBinary`` -> :class:`BinarySpace`; ``Text`` ->
    :class:`TextSpace`; ``Dict`` -> :class:`DictSpace` (recursively). ``metadata`` goes on the top space.

    Raises:
        TypeError: any other gymnasium space type.
    """
    from gymnasium import spaces as gs

    if isinstance(space, gs.Box):
        out: Space = BoxSpace(space.low, space.high, space.shape, space.dtype)
    elif isinstance(space, gs.Discrete):
        start = int(space.start)
        out = BoxSpace(start, start + int(space.n) - 1, (), np.int64)
    elif isinstance(space, gs.MultiBinary):
        out = BinarySpace(tuple(np.atleast_1d(space.n)))
    elif isinstance(space, gs.Text):
        out = TextSpace(space.max_length, space.min_length)
    elif isinstance(space, gs.Dict):
        out = DictSpace({k: from_gymnasium(v) for k, v in space.spaces.items()})
    else:
        raise TypeError(f"cannot convert gymnasium space {type(space).__name__} "
                        "(supported: Box, Discrete, MultiBinary, Text, Dict)")
    return out.with_metadata(metadata) if metadata else out
