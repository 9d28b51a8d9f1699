"""A sum tree and a min tree over ``n`` non-negative masses, in NumPy, vectorised over batches.

The trees of prioritized replay (Schaul et al. 2016): leaf ``i`` holds the mass ``m_i = p_i ** alpha`` of
slot ``i`` (0 for a slot that holds no step). :meth:`SumTree.find` turns ``B`` uniform draws in
``[0, total)`` into the leaves whose prefix sums contain them, so leaf ``i`` is drawn with probability
``m_i / total``; :meth:`SumTree.update` sets ``B`` leaves. Both cost ``O(B log n)`` as one NumPy
operation per level of the tree, never a Python loop over ``B``.
:class:`SumTree` builds in ``O(n)`` (one vectorised pass per level).

Layout: a complete binary tree in one float64 array of ``2L`` nodes, ``L`` the power of two ``>= n``;
node 1 is the root, node ``k`` has the children ``2k`` and ``2k + 1``, leaf ``i`` is node ``L + i``.
The min tree has the same layout, with ``+inf`` for a leaf of mass 0 (a slot without a step), so its
root is the smallest positive mass. NumPy's cost is per call more than per element, so the nodes above
the first level of at most :data:`TOP` nodes are not kept: that level's running sums (one ``cumsum``,
cached until the next update) give the total and a ``searchsorted`` that replaces 12 levels of descent.
"""

from __future__ import annotations

import numpy as np


#: The tree keeps its levels up to the first of at most this many nodes (the *top* level); ``find``
#: searches the top level by one ``searchsorted`` of its running sums, and the total and the minimum
#: are reductions of it: the levels above it would cost one NumPy call each per update.
TOP = 4096


class SumTree:
    """Sums and minima over the masses ``masses`` (float ``(n,)``, each ``>= 0`` and finite).

    Attributes:
        n: the number of leaves.
    """

    def __init__(self, masses: np.ndarray):
        masses = np.asarray(masses, np.float64)
        self.n = len(masses)
        size = self._leaves = 1 << max(0, int(self.n - 1).bit_length()) if self.n > 1 else 1
        self._top = min(TOP, size)
        self._sums = np.zeros(2 * size, np.float64)
        self._mins = np.full(2 * size, np.inf, np.float64)
        self._sums[size:size + self.n] = masses
        self._mins[size:size + self.n] = np.where(masses > 0, masses, np.inf)
        self._sum_pairs, self._min_pairs = self._sums.reshape(-1, 2), self._mins.reshape(-1, 2)
        level, sums, mins = size // 2, self._sums, self._mins
        while level >= self._top:  # one vectorised pass per level: O(n) in all
            np.add(sums[2 * level:4 * level:2], sums[2 * level + 1:4 * level:2], out=sums[level:2 * level])
            np.minimum(mins[2 * level:4 * level:2], mins[2 * level + 1:4 * level:2], out=mins[level:2 * level])
            level //= 2
        self._running: np.ndarray | None = None  # running sums of the top level, until the next update

    def _top_running(self) -> np.ndarray:
        if self._running is None:
            self._running = np.cumsum(self._sums[self._top:2 * self._top])
        return self._running

    @property
    def total(self) -> float:
        """The sum of every mass."""
        return float(self._top_running()[-1])

    @property
    def min(self) -> float:
        """The smallest positive mass (``inf`` when every mass is 0)."""
        return float(self._mins[self._top:2 * self._top].min())

    def masses(self, leaves: np.ndarray | None = None) -> np.ndarray:
        """The masses of ``leaves`` (int64 ``(B,)``, below the padded size; default every leaf), float64, a copy."""
        if leaves is None:
            return self._sums[self._leaves:self._leaves + self.n].copy()
        return self._sums[self._leaves:].take(leaves)  # a padding leaf (>= n) has mass 0

    def update(self, leaves: np.ndarray, masses: np.ndarray) -> None:
        """Set the masses of ``leaves`` (int64 ``(B,)`` in ``[0, n)``) to ``masses`` (float ``(B,)``, ``>= 0``);
        a leaf given twice gets one of its masses (NumPy's assignment keeps the last), and the sums above it
        are those of the mass it kept. ``O(B log n)``: per level below the top, the parents of the
        nodes set, from their two children (one gather, one add, one scatter, and as many for the minima, up to
        the first level where a node's minimum stays as it was)."""
        if not len(leaves):
            return
        nodes = np.asarray(leaves, np.int64) + self._leaves
        masses = np.asarray(masses, np.float64)
        sums, mins, sum_pairs, min_pairs = self._sums, self._mins, self._sum_pairs, self._min_pairs
        sums[nodes] = masses
        mins[nodes] = np.where(masses > 0, masses, np.inf)
        moved = nodes.copy()  # nodes whose minimum changed: a parent whose minimum stays keeps its ancestors'
        level = self._leaves
        while level > self._top:
            level //= 2
            nodes >>= 1  # repeats are harmless: each writes the same value
            children = sum_pairs.take(nodes, axis=0)
            sums[nodes] = np.add(children[:, 0], children[:, 1])
            if len(moved):
                moved >>= 1
                children = min_pairs.take(moved, axis=0)
                new = np.minimum(children[:, 0], children[:, 1])
                changed = new != mins.take(moved)
                mins[moved] = new
                moved = moved[changed]
        self._running = None

    def find(self, targets: np.ndarray) -> np.ndarray:
        """The leaf whose prefix sum holds each target (float ``(B,)`` in ``[0, total)``), int64 ``(B,)``:
        the smallest ``i`` with ``targets < sum(masses[:i + 1])``. ``O(B log n)``: the top level by one
        ``searchsorted`` of its running sums, then one step per level below it.

        A leaf of mass 0 is never returned for a target below :attr:`total`, except through rounding at a
        boundary; :func:`draw` draws those again.
        """
        u = np.array(targets, np.float64)
        sums, top = self._sums, self._top
        running = self._top_running()
        at = np.minimum(np.searchsorted(running, u, side="right"), top - 1)
        node = at + top
        u -= running.take(at) - sums.take(node)  # the mass before that node
        level = top
        while level < self._leaves:
            level *= 2
            node <<= 1
            left = sums.take(node)
            right = u >= left
            u -= left * right
            node |= right
        return node - self._leaves


def draw(tree: SumTree, batch_size: int, rng: np.random.Generator) -> np.ndarray:
    """``batch_size`` leaves drawn with probability ``mass / total``, with replacement, int64 ``(B,)``.

    Raises:
        ValueError: every mass is 0 (nothing to draw).
    """
    total = tree.total
    if not total > 0:
        raise ValueError("cannot sample by priority: no held step has a priority (the buffer is empty)")
    leaves = tree.find(rng.random(batch_size) * total)
    for _ in range(64):  # rounding put a target on a leaf of mass 0 (a boundary): draw it again
        bad = np.flatnonzero(tree.masses(leaves) <= 0)
        if not len(bad):
            return leaves
        leaves[bad] = tree.find(rng.random(len(bad)) * total)
    raise RuntimeError("the sum tree keeps drawing leaves of mass 0")  # pragma: no cover - a broken tree
