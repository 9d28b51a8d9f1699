"""ROS 2 message types the rosbag import understands, each as a stream space and a value per message.

A :class:`MessageKind` turns a deserialized message (rosbags' typestore classes) into a value of the
stream's space; the space comes from the topic's first message (:meth:`MessageKind.space`), and every
later message must have the same sizes (a :class:`~trajstore.errors.FormatError` naming the topic and
the message otherwise). :data:`KINDS` maps ROS type names (``"sensor_msgs/msg/Image"``) to them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from trajstore.errors import FormatError
from trajstore.interop.rosbag._images import compressed_image, image_space, raw_image
from trajstore.spaces import BinarySpace, BoxSpace, DictSpace, Space

XYZ = ("x", "y", "z")
XYZW = ("x", "y", "z", "w")


def header_stamp_ns(msg: Any) -> int | None:
    """``header.stamp`` of a message in ns since its clock's epoch, or None when it has no header."""
    header = getattr(msg, "header", None)
    if header is None:
        return None
    return int(header.stamp.sec) * 1_000_000_000 + int(header.stamp.nanosec)


def _box(shape: tuple[int, ...], dtype: Any = np.float64, **meta: Any) -> BoxSpace:
    dtype = np.dtype(dtype)
    meta = {k: v for k, v in meta.items() if v is not None}
    if dtype.kind == "f":
        return BoxSpace(-np.inf, np.inf, shape, dtype, metadata=meta)
    info = np.iinfo(dtype)
    return BoxSpace(info.min, info.max, shape, dtype, metadata=meta)


def _same_shape(value: np.ndarray, space: Space, where: str, leaf: str = "") -> np.ndarray:
    if value.shape != space.shape:  # type: ignore[attr-defined]
        name = f" {leaf!r}" if leaf else ""
        raise FormatError(f"{where}:{name} has shape {value.shape}; the topic's first message has "
                          f"{space.shape}")  # type: ignore[attr-defined]
    return value


@dataclass(frozen=True)
class MessageKind:
    """How one ROS message type becomes stream values.

    ``space(msg, fps)`` gives the stream space from the topic's first message (``fps``: its measured rate
    in Hz, kept in camera metadata); ``value(msg, space, where)`` the value of one message (``where`` names
    the topic and message in errors).
    """

    space: Callable[[Any, float | None], Space]
    value: Callable[[Any, Space, str], Any]


# ---- cameras ------------------------------------------------------------------------------------------

def _image_value(decode: Callable[[Any, str], tuple[np.ndarray, str]]) -> MessageKind:
    def space(msg: Any, fps: float | None) -> Space:
        frame, encoding = decode(msg, "first message")
        return image_space(frame, encoding, fps)

    def value(msg: Any, space: Space, where: str) -> np.ndarray:
        frame, _ = decode(msg, where)
        if frame.dtype != space.dtype:  # type: ignore[attr-defined]
            raise FormatError(f"{where}: a {frame.dtype} frame; the topic's first message is "
                              f"{space.dtype}")  # type: ignore[attr-defined]
        return _same_shape(frame, space, where)

    return MessageKind(space, value)


# ---- fixed-size geometry ------------------------------------------------------------------------------

#: A leaf of a geometry message: (leaf name, attribute path from the message, components, units).
Part = tuple[str, str, tuple[str, ...], str | None]


def _get(msg: Any, path: str) -> Any:
    for attr in filter(None, path.split(".")):
        msg = getattr(msg, attr)
    return msg


def _geometry(parts: list[Part], single: bool = False) -> MessageKind:
    """A message of fixed-size vectors: a dict stream ``{leaf: (len(components),) float64}``, or one
    Box when ``single``."""
    def leaf_space(part: Part) -> BoxSpace:
        name, _, comps, units = part
        return _box((len(comps),), units=units, components="".join(comps) if comps != XYZ else None)

    def space(msg: Any, fps: float | None) -> Space:
        if single:
            return leaf_space(parts[0])
        return DictSpace({p[0]: leaf_space(p) for p in parts})

    def one(msg: Any, part: Part) -> np.ndarray:
        obj = _get(msg, part[1])
        return np.array([float(getattr(obj, c)) for c in part[2]], dtype=np.float64)

    def value(msg: Any, space: Space, where: str) -> Any:
        if single:
            return one(msg, parts[0])
        return {p[0]: one(msg, p) for p in parts}

    return MessageKind(space, value)


def _with_covariance(kind: MessageKind, path: str, n: int, leaf: str = "covariance") -> MessageKind:
    """``kind`` plus a ``(n, n)`` float64 covariance leaf read from ``path``."""
    def space(msg: Any, fps: float | None) -> Space:
        inner = kind.space(msg, fps)
        return DictSpace({**inner.spaces, leaf: _box((n, n))})  # type: ignore[attr-defined]

    def value(msg: Any, space: Space, where: str) -> Any:
        out = kind.value(msg, space, where)
        cov = np.asarray(_get(msg, path), dtype=np.float64).reshape(-1)
        if cov.size != n * n:
            raise FormatError(f"{where}: {path} has {cov.size} values, expected {n * n}")
        out[leaf] = cov.reshape(n, n)
        return out

    return MessageKind(space, value)


def _prefixed(parts: list[Part], prefix: str) -> list[Part]:
    return [(name, f"{prefix}.{path}", comps, units) for name, path, comps, units in parts]


TWIST: list[Part] = [("linear", "linear", XYZ, "m/s"), ("angular", "angular", XYZ, "rad/s")]
ACCEL: list[Part] = [("linear", "linear", XYZ, "m/s^2"), ("angular", "angular", XYZ, "rad/s^2")]
WRENCH: list[Part] = [("force", "force", XYZ, "N"), ("torque", "torque", XYZ, "N*m")]
POSE: list[Part] = [("position", "position", XYZ, "m"), ("orientation", "orientation", XYZW, None)]
TRANSFORM: list[Part] = [("translation", "translation", XYZ, "m"), ("rotation", "rotation", XYZW, None)]


# ---- variable-size messages ---------------------------------------------------------------------------

JOINT_FIELDS = ("position", "velocity", "effort")


def _joint_state() -> MessageKind:
    """``sensor_msgs/msg/JointState`` -> ``{"position", "velocity", "effort"}`` ``(n_joints,)`` float64, each
    leaf present when the first message fills it, joint names in each leaf's ``names`` metadata. Later
    messages may list the joints in another order (values are put back in the first message's order)."""
    def space(msg: Any, fps: float | None) -> Space:
        names = [str(n) for n in msg.name]
        if len(set(names)) != len(names):
            raise FormatError(f"first message: joint names {names} are not unique")
        leaves = {f: _box((len(names),), names=names) for f in JOINT_FIELDS if len(getattr(msg, f))}
        if not leaves:
            raise FormatError("first message: a JointState without position, velocity or effort")
        for f, leaf in leaves.items():
            if len(getattr(msg, f)) != len(names):
                raise FormatError(f"first message: {len(getattr(msg, f))} {f} values for {len(names)} joints")
        return DictSpace(leaves, metadata={"names": names})

    def value(msg: Any, space: Space, where: str) -> Any:
        names = list(space.metadata["names"])
        got = [str(n) for n in msg.name]
        if got == names:
            order = None
        elif sorted(got) == sorted(names):
            order = [got.index(n) for n in names]
        else:
            raise FormatError(f"{where}: joints {got}; the topic's first message has {names}")
        out = {}
        for f in space.spaces:  # type: ignore[attr-defined]
            v = np.asarray(getattr(msg, f), dtype=np.float64)
            if v.shape != (len(got),):
                raise FormatError(f"{where}: {v.size} {f} values for {len(got)} joints")
            out[f] = v if order is None else v[order]
        return out

    return MessageKind(space, value)


def _imu() -> MessageKind:
    parts: list[Part] = [("orientation", "orientation", XYZW, None),
                         ("angular_velocity", "angular_velocity", XYZ, "rad/s"),
                         ("linear_acceleration", "linear_acceleration", XYZ, "m/s^2")]
    kind = _geometry(parts)
    for name in ("orientation", "angular_velocity", "linear_acceleration"):
        kind = _with_covariance(kind, f"{name}_covariance", 3, f"{name}_covariance")
    return kind


def _multi_array(dtype: str) -> MessageKind:
    """``std_msgs/msg/*MultiArray`` -> one Box: ``(len(data),)``, or the layout's dimension sizes when
    they cover ``data`` exactly (``data_offset`` 0); dimension labels in the ``dims`` metadata."""
    def shape_of(msg: Any) -> tuple[tuple[int, ...], list[str]]:
        n = len(msg.data)
        dims = list(msg.layout.dim)
        sizes = tuple(int(d.size) for d in dims)
        labels = [str(d.label) for d in dims]
        if len(dims) > 1 and int(msg.layout.data_offset) == 0 and int(np.prod(sizes)) == n:
            return sizes, labels
        return (n,), labels

    def space(msg: Any, fps: float | None) -> Space:
        shape, labels = shape_of(msg)
        return _box(shape, dtype, dims=labels or None)

    def value(msg: Any, space: Space, where: str) -> np.ndarray:
        v = np.asarray(msg.data, dtype=dtype)
        if v.size != int(np.prod(space.shape)):  # type: ignore[attr-defined]
            raise FormatError(f"{where}: {v.size} values; the topic's first message has "
                              f"{int(np.prod(space.shape))}")  # type: ignore[attr-defined]
        return v.reshape(space.shape)  # type: ignore[attr-defined]

    return MessageKind(space, value)


def _scalar(dtype: str) -> MessageKind:
    def space(msg: Any, fps: float | None) -> Space:
        return BinarySpace(()) if dtype == "bool" else _box((), dtype)

    def value(msg: Any, space: Space, where: str) -> np.ndarray:
        return np.asarray(msg.data, dtype=dtype)

    return MessageKind(space, value)


def _build() -> dict[str, MessageKind]:
    g = "geometry_msgs/msg/"
    kinds = {
        "sensor_msgs/msg/Image": _image_value(raw_image),
        "sensor_msgs/msg/CompressedImage": _image_value(compressed_image),
        "sensor_msgs/msg/JointState": _joint_state(),
        "sensor_msgs/msg/Imu": _imu(),
        g + "Twist": _geometry(TWIST), g + "TwistStamped": _geometry(_prefixed(TWIST, "twist")),
        g + "TwistWithCovarianceStamped": _with_covariance(_geometry(_prefixed(TWIST, "twist.twist")),
                                                          "twist.covariance", 6),
        g + "Accel": _geometry(ACCEL), g + "AccelStamped": _geometry(_prefixed(ACCEL, "accel")),
        g + "Wrench": _geometry(WRENCH), g + "WrenchStamped": _geometry(_prefixed(WRENCH, "wrench")),
        g + "Pose": _geometry(POSE), g + "PoseStamped": _geometry(_prefixed(POSE, "pose")),
        g + "PoseWithCovarianceStamped": _with_covariance(_geometry(_prefixed(POSE, "pose.pose")),
                                                         "pose.covariance", 6),
        g + "Transform": _geometry(TRANSFORM),
        g + "TransformStamped": _geometry(_prefixed(TRANSFORM, "transform")),
        g + "Vector3": _geometry([("", "", XYZ, None)], single=True),
        g + "Vector3Stamped": _geometry([("", "vector", XYZ, None)], single=True),
        g + "Point": _geometry([("", "", XYZ, "m")], single=True),
        g + "PointStamped": _geometry([("", "point", XYZ, "m")], single=True),
        g + "Quaternion": _geometry([("", "", XYZW, None)], single=True),
        g + "QuaternionStamped": _geometry([("", "quaternion", XYZW, None)], single=True),
    }
    for name, dtype in [("Float32", "float32"), ("Float64", "float64"), ("Int8", "int8"), ("Int16", "int16"),
                        ("Int32", "int32"), ("Int64", "int64"), ("UInt8", "uint8"), ("UInt16", "uint16"),
                        ("UInt32", "uint32"), ("UInt64", "uint64")]:
        kinds[f"std_msgs/msg/{name}MultiArray"] = _multi_array(dtype)
        kinds[f"std_msgs/msg/{name}"] = _scalar(dtype)
    kinds["std_msgs/msg/Bool"] = _scalar("bool")
    return kinds


#: ROS 2 type name -> how it is imported.
KINDS: dict[str, MessageKind] = _build()
