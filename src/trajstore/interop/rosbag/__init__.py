"""ROS 2 bags (rosbag2 folders with sqlite3 or MCAP storage, plain ``.mcap`` files) into stream buffers,
read with ``rosbags`` (pure Python, the ``ros`` extra; no ROS install).

:func:`import_rosbag` makes a :class:`~trajstore.streams.StreamBuffer` folder, one bag per episode and one
stream per topic (see :mod:`~trajstore.interop.rosbag.import_`); :func:`read_bag` converts one bag in
memory the same way.
"""

from trajstore.interop.rosbag._topics import RosbagWarning, TopicData, read_bag, stream_name
from trajstore.interop.rosbag.import_ import RosbagImportSummary, import_rosbag

__all__ = ["RosbagImportSummary", "RosbagWarning", "TopicData", "import_rosbag", "read_bag", "stream_name"]
