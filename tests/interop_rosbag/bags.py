"""Small ROS 2 bags written with rosbags' own Writer (sqlite3 or MCAP storage) for the import tests."""

from pathlib import Path

import numpy as np
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

TS = get_typestore(Stores.ROS2_JAZZY)
T = TS.types
T0 = 1_700_000_000_000_000_000


def header(ns, frame_id=""):
    return T["std_msgs/msg/Header"](stamp=T["builtin_interfaces/msg/Time"](sec=ns // 10**9, nanosec=ns % 10**9),
                                    frame_id=frame_id)


def vec3(x, y, z):
    return T["geometry_msgs/msg/Vector3"](x=float(x), y=float(y), z=float(z))


def write_bag(path: Path, messages, storage="sqlite3"):
    """``messages``: ``[(topic, msgtype, log_ns, msg), ...]`` in log order. Returns ``path``."""
    plugin = StoragePlugin.SQLITE3 if storage == "sqlite3" else StoragePlugin.MCAP
    with Writer(path, version=9, storage_plugin=plugin) as writer:
        conns = {}
        for topic, msgtype, log_ns, msg in messages:
            if topic not in conns:
                conns[topic] = writer.add_connection(topic, msgtype, typestore=TS)
            writer.write(conns[topic], log_ns, TS.serialize_cdr(msg, msgtype))
    return path


def image(ns, h, w, encoding, pixels: np.ndarray, bigendian=0, step=None):
    data = np.ascontiguousarray(pixels).view(np.uint8).reshape(-1)
    row = data.size // h
    if step is not None and step > row:  # rows padded to `step` bytes
        padded = np.zeros((h, step), np.uint8)
        padded[:, :row] = data.reshape(h, row)
        data = padded.reshape(-1)
    return T["sensor_msgs/msg/Image"](header=header(ns, "cam"), height=h, width=w, encoding=encoding,
                                      is_bigendian=bigendian, step=step or row, data=data)
