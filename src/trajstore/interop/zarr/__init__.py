"""Diffusion Policy's zarr replay buffers in and out of trajstore.

Diffusion Policy (real-stanford/diffusion_policy) stores demonstrations as a zarr group
(``diffusion_policy/common/replay_buffer.py``)::

    data/<key>           one array per key, step axis first: img (N, 96, 96, 3), state (N, 5), action (N, 2), ...
    meta/episode_ends    int64 (E,): the cumulative (exclusive) end step of each episode

:func:`import_zarr` turns such a group into a trajstore buffer folder, :func:`export_zarr` writes a
buffer (or some of its episodes) as one, in zarr format 2, the format of Diffusion Policy's
published datasets (zarr-python 3 writes it with ``zarr_format=2``).

Names. trajstore leaves are nested (``observation/pixels``), zarr keys of this layout are flat.
Export names a leaf's array by its keys joined with ``"."`` (``data/observation.pixels``), or by
``key_map`` (``{"observation/pixels": "img"}`` for Diffusion Policy's own keys), and keeps the
leaf's name and space in the array's attributes (``trajstore_path``, ``trajstore_space``); import
uses ``key_map``, then those attributes, then the key itself as a top-level leaf. So
buffer -> zarr -> buffer restores names, dtypes, bounds and metadata, and zarr -> buffer -> zarr
restores keys (each array's key is kept in its leaf name).

Cameras. Export: a ``kind="image"`` ``(H, W, 3)`` uint8 leaf gets one frame per chunk, coded as
Diffusion Policy does (JPEG 2000 at 50 dB by default, JPEG XL, lossless variants, or raw); see
:mod:`~trajstore.interop.zarr.codecs`. Import: ``(N, H, W, 3)`` uint8 arrays and the arrays
named in ``image_keys`` become camera leaves (``kind="image"``, ``layout="HWC"``, ``fps``).

Episodes. ``meta/episode_ends`` gives the boundaries. The layout has no per-episode data:
export keeps each episode's ``data`` and ``interrupted`` flag in the group attribute
``trajstore_episode_data`` and import restores them. Final observations are not carried.

Reading an export without trajstore: plain ``zarr.open(out)`` reads every array; compressed frames
(numcodecs ids ``imagecodecs_jpeg2k``/``imagecodecs_jpegxl``) are found through trajstore's numcodecs
entry points where trajstore is installed, and elsewhere after
``import imagecodecs.numcodecs; imagecodecs.numcodecs.register_codecs()`` (see
:mod:`~trajstore.interop.zarr.codecs`).

Both need the ``zarr`` extra (``pip install 'trajstore[zarr]'``: zarr, numcodecs, imagecodecs).
"""

from trajstore.interop.zarr.export import ZarrExportSummary, default_key, export_zarr
from trajstore.interop.zarr.import_ import ZarrImportSummary, import_zarr
from trajstore.interop.zarr.layout import DEFAULT_FPS

__all__ = ["import_zarr", "export_zarr", "ZarrImportSummary", "ZarrExportSummary", "default_key", "DEFAULT_FPS"]
