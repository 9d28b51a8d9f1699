"""LeRobot v3.0 datasets (pyarrow + PyAV, the ``lerobot`` extra; LeRobot itself is not needed).

:func:`import_lerobot` copies a LeRobot dataset folder into a new trajstore buffer folder; see
:mod:`~trajstore.integrations.lerobot_import`.
"""

from trajstore.integrations.lerobot_import import LeRobotImportSummary, import_lerobot

__all__ = ["LeRobotImportSummary", "import_lerobot"]
