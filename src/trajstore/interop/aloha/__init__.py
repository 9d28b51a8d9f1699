"""ALOHA / ACT episodes (a folder of ``episode_N.hdf5``, one file per episode) into trajstore buffers.

The layout, as the recorders write it (h5py; read for the facts in tonyzhaozh/act ``record_sim_episodes.py``
and ``utils.py``, MarkFzp/mobile-aloha and Interbotix/aloha ``record_episodes.py``, MarkFzp/act-plus-plus
``utils.py`` and ``compress_data.py``):

- root attributes ``sim`` (bool; missing in old files: ACT then takes False, the import leaves it out) and,
  for compressed files, ``compress`` (True);
- ``/observations/qpos``, ``/observations/qvel`` ``(T, 14)`` and ``/action`` ``(T, 14)``; on the real robot
  ``/observations/effort`` ``(T, 14)``; mobile ALOHA ``/base_action`` ``(T, 2)``. The recorders create them
  with ``create_dataset(name, (T, 14))`` and no dtype: h5py's default, float32 (their docstrings say
  float64);
- ``/observations/images/<cam>``: ``(T, 480, 640, 3)`` uint8, chunks ``(1, 480, 640, 3)``; or, with
  ``compress``, ``(T, padded_size)`` uint8, chunks ``(1, padded_size)``: each row the bytes of
  ``cv2.imencode(".jpg", image, [IMWRITE_JPEG_QUALITY, 50])`` padded with zeros to the longest frame of
  the episode, and ``/compress_len`` ``(num_cams, T)`` (float32, h5py's default again) the byte length of
  each frame, one row per camera in the recorder's ``camera_names`` order (its task config; not kept in the
  file, where h5py lists cameras by name);
- one file per episode, ``episode_{N}.hdf5``; ACT's ``load_data`` reads ``episode_0`` ..
  ``episode_{num_episodes - 1}``. The rate is not in the files: ``DT = 0.02`` s (50 Hz) in the recorders'
  ``constants.py``.

:func:`import_aloha` makes the buffer (see :mod:`~trajstore.interop.aloha.import_`).
"""

from trajstore.interop.aloha._source import AlohaWarning
from trajstore.interop.aloha.import_ import DEFAULT_FPS, default_leaf, import_aloha

__all__ = ["DEFAULT_FPS", "AlohaWarning", "default_leaf", "import_aloha"]
