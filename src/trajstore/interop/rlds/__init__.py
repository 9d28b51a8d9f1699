"""RLDS / Open X-Embodiment datasets (TFDS dataset directories of ``tfrecord`` shards) into trajstore
buffers, read without TensorFlow: :func:`import_rlds` (see :mod:`~trajstore.interop.rlds.import_`).

Modules: ``_tfrecord`` (record framing, CRC32C), ``_example`` (``tf.train.Example`` wire format),
``_features`` (``features.json`` -> features and spaces), ``_source`` (dataset folder, splits, shards),
``_episode`` (one episode's values), ``_plan`` (the checked first pass), ``import_`` (the copy).
"""

from trajstore.interop.rlds.import_ import DEFAULT_FPS, import_rlds

__all__ = ["DEFAULT_FPS", "import_rlds"]
