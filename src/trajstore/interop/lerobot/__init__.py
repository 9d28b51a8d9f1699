"""LeRobot v3.0 datasets (pyarrow + PyAV, the ``lerobot`` extra; LeRobot itself is not needed).

:func:`import_lerobot` copies a LeRobot dataset folder into a new trajstore buffer folder (see
:mod:`~trajstore.interop.lerobot.import_`); :func:`export_lerobot` writes a buffer out as a
LeRobot dataset that LeRobot 0.4.4's own reader loads (see :mod:`~trajstore.interop.lerobot.export`).
"""

from trajstore.interop.lerobot.export import export_lerobot
from trajstore.interop.lerobot.import_ import LeRobotImportSummary, import_lerobot

__all__ = ["LeRobotImportSummary", "export_lerobot", "import_lerobot"]
