"""LeRobot dataset format v3.0: export (:func:`export_lerobot`) of a replay buffer.

LeRobot itself is not a dependency; pyarrow and PyAV are (``pip install 'trajstore[lerobot]'``).
"""

from trajstore.integrations.lerobot_export import export_lerobot

__all__ = ["export_lerobot"]
