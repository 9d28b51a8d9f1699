"""trajstore: record and serve robot-learning data.

Subpackages, from the bottom layer up (imports point down only):

- :mod:`trajstore.spaces`: what one step of data looks like (no I/O).
- :mod:`trajstore.backends`: numpy / torch / jax conversion at the edges (:func:`to_torch` is
  exported here: ``trajstore.to_torch(batch, device=None, pin_memory=False)``).
- :mod:`trajstore.storages`: where each leaf is stored, one module per storage.
- :mod:`trajstore.replay_buffer`: ring / unbounded buffer with episodes and sampling.
- edges, on the buffer's public API: :mod:`trajstore.recording` (gymnasium recorders),
  :mod:`trajstore.training` (torch datasets, normaliser, Ray), :mod:`trajstore.interop` (LeRobot,
  zarr), :mod:`trajstore.ops` (copy, merge, verify, info, preview), :mod:`trajstore.remote`
  (object storage), :mod:`trajstore.view` (the browser viewer), :mod:`trajstore.cli` (the command line).
"""

from trajstore.backends import to_torch

__version__ = "0.1.0"

__all__ = ["to_torch", "__version__"]
