"""trajstore: record and serve robot-learning data.

Subpackages, from the bottom layer up (imports point down only):

- :mod:`trajstore.spaces`: what one step of data looks like (no I/O).
- :mod:`trajstore.backends`: numpy / torch / jax conversion at the edges.
- :mod:`trajstore.storages`: where each leaf is stored, one module per storage.
- :mod:`trajstore.replay_buffer`: ring / unbounded buffer with episodes and sampling.
- :mod:`trajstore.integrations`, :mod:`trajstore.cli`: torch, gymnasium, the command line.
"""

__version__ = "0.1.0"
