"""robomimic / LIBERO / MimicGen / RoboCasa HDF5 files in and out of trajstore.

:func:`import_robomimic` (``trajstore import robomimic``) makes a buffer folder of a file's demos;
:func:`export_robomimic` (``trajstore export robomimic``) writes a buffer's episodes as such a file, which
robomimic 0.3.0's ``SequenceDataset`` reads. Both need h5py.
"""

from trajstore.interop.robomimic.export import RobomimicExport, export_robomimic
from trajstore.interop.robomimic.import_ import DEFAULT_FPS, import_robomimic

__all__ = ["DEFAULT_FPS", "RobomimicExport", "export_robomimic", "import_robomimic"]
