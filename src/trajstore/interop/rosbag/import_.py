"""Import ROS 2 recordings into a new :class:`~trajstore.streams.StreamBuffer` folder: what
``trajstore import rosbag BAG... OUT`` calls.

Reads rosbag2 folders (sqlite3 or MCAP storage) and plain ``.mcap`` / ``.db3`` files with ``rosbags``
(pure Python, the ``ros`` extra; no ROS install), one bag per episode; each topic becomes a stream at its
own rate with its own timestamps (see :func:`import_rosbag`).
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from trajstore._fs import staged_folder
from trajstore._text import count
from trajstore.interop.rosbag._source import BagSource, open_bag
from trajstore.interop.rosbag._topics import (RosbagWarning, as_topic_map, choose_topics, convert, plan_topics,
                                              warn_lost)


@dataclass(frozen=True)
class RosbagImportSummary:
    """What :func:`import_rosbag` wrote.

    Attributes:
        path: the new stream buffer folder.
        episodes: bags imported (one episode each).
        samples: stream name -> samples imported (all bags).
        streams: topic -> stream name.
        lost: bag path -> {topic: messages lost (None: unknown)} for bags only partly readable.
    """

    path: Path
    episodes: int
    samples: dict[str, int]
    streams: dict[str, str]
    lost: dict[str, dict[str, int | None]] = field(default_factory=dict)

    def line(self) -> str:
        text = (f"imported {count(self.episodes, 'bag')} ({count(len(self.samples), 'stream')}, "
                f"{count(sum(self.samples.values()), 'sample')}) into {self.path}")
        if self.lost:
            text += f"; {count(len(self.lost), 'bag')} only partly readable (see the warnings)"
        return text


def routing_for(camera: str) -> dict[str, Any]:
    """``StreamBuffer.create`` routing for camera streams: colour frames as ``camera`` says (``"png"``:
    lossless, ``"jpeg"``, ``"video"``); depth (uint16) frames always as 16-bit PNG (exact); grey (mono8)
    frames as 8-bit PNG with ``"png"``, else in HDF5 (exact; a :class:`~trajstore.errors.RoutingWarning`
    says so: JPEG and video frames here are RGB)."""
    from trajstore._cameras import camera_routing
    from trajstore.storages.frames.image import ImageStorage

    routing = camera_routing(camera)
    kind_cls = dict(routing.get("kind_storage_cls") or {"image": ImageStorage})
    kind_cls["depth"] = ImageStorage
    kind_kwargs = {k: dict(v) for k, v in (routing.get("kind_kwargs") or {}).items()}
    kind_kwargs["depth"] = {"format": "PNG"}
    return {"kind_storage_cls": kind_cls, "kind_kwargs": kind_kwargs}


def import_rosbag(bags: str | os.PathLike | Iterable[str | os.PathLike], out: str | os.PathLike, *,
                  topics: Mapping[str, str | None] | Iterable[str] | None = None, only: bool = False,
                  stamp: str = "header", camera: str = "png", progress: bool = False) -> RosbagImportSummary:
    """Import ROS 2 bags into a new stream buffer folder ``out``: bag ``i`` becomes episode ``i``, each
    topic a stream, each message one sample at its own time.

    - **Timestamps** (int64 ns since the bag clock's epoch, as recorded): ``stamp="header"`` (default) uses a
      message's ``header.stamp`` (sensor time) and, for types without a header (``Float64MultiArray``,
      ``Twist``, ...) or a topic whose first stamp is 0 (unset; a :class:`RosbagWarning`), the log time;
      ``stamp="log"`` uses the bag's log (receive) time for every topic. A topic's times must not go back
      (a FormatError names the message; ``stamp="log"`` is ordered by construction).
    - **Streams**: named by ``topics`` (``{"/camera/image_raw": "wrist"}``), else from the topic
      (``"/camera/image_raw"`` -> ``"camera.image_raw"``: ``/`` -> ``.``, other unsafe characters -> ``_``);
      ``only=True`` imports only the listed topics (``topics`` may then be a list of topic names). Topics of
      types not imported are left out with a :class:`RosbagWarning`.
    - **Values** (see :mod:`~trajstore.interop.rosbag._messages`): ``Image`` rgb8/bgr8/rgba8/bgra8 ->
      ``(H, W, 3)`` uint8 RGB, mono8 -> ``(H, W)`` uint8, mono16/16UC1 -> ``(H, W)`` uint16 depth (mm),
      32FC1 -> ``(H, W)`` float32 (m); ``CompressedImage`` JPEG/PNG decoded the same way (it is stored by
      the buffer's frame storage: PNG by default, so the decoded pixels are kept exactly; trajstore has no
      way to store the bag's JPEG bytes as they are); ``JointState`` -> ``{"position", "velocity",
      "effort"}`` ``(n_joints,)`` float64 (those the first message fills; joint names in metadata
      ``names``); ``Imu`` -> ``orientation`` (4,) xyzw, ``angular_velocity`` (3,) rad/s,
      ``linear_acceleration`` (3,) m/s^2 and their ``(3, 3)`` covariances; ``*MultiArray`` -> its data
      (layout sizes as shape when they cover it); ``geometry_msgs`` Twist/Accel/Wrench/Pose/Transform (and
      their Stamped, WithCovarianceStamped), Vector3/Point/Quaternion -> ``{"linear", "angular"}`` etc. as
      float64 vectors; std_msgs scalars.
    - **Metadata** of each stream's space: ``topic``, ``ros_type``, ``fps`` (the measured nominal rate in
      Hz, :func:`~trajstore.interop.rosbag._topics.measured_fps`), cameras ``kind`` (``"image"`` /
      ``"depth"``), ``layout`` (``"HWC"`` / ``"HW"``), ``encoding``; ``units`` where ROS fixes them.
    - **Episode data**: ``{"bag": name, "path": absolute path, "start_ns": first log time, "topics":
      {topic: ROS type}, "streams": {topic: stream}, "stamp": stamp}``, plus ``"lost": {topic: count or
      None}`` for a bag that was only partly readable (that episode is ``interrupted``).
    - **Cut-short bags** (a recorder killed: an MCAP file without its summary, or cut anywhere else, a
      folder without ``metadata.yaml``, a sqlite3 database missing rows its metadata counts) import their
      readable prefix, with a :class:`RosbagWarning` naming the bag and the messages lost per topic (that
      episode is ``interrupted``). An MCAP file cut after its last message (in its summary section, or with
      ``metadata.yaml`` counting no more messages than were read) imports whole: a warning says so, the
      episode is not interrupted.

    Args:
        bags: bag paths (a rosbag2 folder, or a ``.mcap``/``.db3`` file), or one path.
        out: the stream buffer folder to make; it must not exist (or be empty). It appears only once the
            import is complete (built in a hidden sibling folder, then renamed).
        camera: colour frames as ``"png"`` (default, lossless), ``"jpeg"`` (quality 90) or ``"video"``.
        progress: show a progress bar (messages) on stderr.

    Returns:
        A :class:`RosbagImportSummary`; open the folder with ``StreamBuffer.load_from(out)``.

    Raises:
        FileNotFoundError: a bag path does not exist.
        FormatError: a path that is not a ROS 2 bag, a chunk declaring more than its record holds or the
            import's bounds (checked before it is read), a topic with different types in different bags or in one bag, a message that
            cannot be deserialized or does not match its topic's first message (sizes), times going back.
        ValueError: a listed topic in no bag, two topics with one stream name, a bad stream name, an unknown
            ``stamp`` or ``camera``, no bag given.
        StorageExistsError: ``out`` is a file or a non-empty folder.
        ImportError: rosbags is not installed: ``pip install 'trajstore[ros]'``.
        Everything that can be is checked before anything is written; an error during the import removes what
        was written, so ``out`` is never left half made.
    """
    from trajstore.streams import StreamBuffer
    from trajstore._fs import check_new_folder

    paths = [bags] if isinstance(bags, (str, os.PathLike)) else list(bags)
    if not paths:
        raise ValueError("import_rosbag needs at least one bag")
    if camera not in ("png", "jpeg", "video"):
        raise ValueError(f"camera must be 'png', 'jpeg' or 'video', got {camera!r}")
    topic_map = as_topic_map(topics)
    out = Path(out)
    check_new_folder(out)
    sources: list[BagSource] = []
    try:
        for p in paths:
            sources.append(open_bag(p))
        plans = plan_topics(sources, choose_topics(sources, topic_map, only), stamp)
        if not plans:
            raise ValueError("none of the chosen topics has a message in any bag")
        samples = {p.name: 0 for p in plans}
        lost_all: dict[str, dict[str, int | None]] = {}
        with staged_folder(out) as staging:  # `out` appears whole or not at all
            with StreamBuffer.create(staging, {p.name: p.space for p in plans}, **routing_for(camera)) as buf:
                for src in sources:
                    lost = _import_bag(buf, src, plans, stamp, samples, progress)
                    if lost is not None:
                        lost_all[str(src.path)] = lost
        episodes = len(sources) - sum(1 for src in sources if not any(src.read_counts.values()))
    finally:
        for src in sources:
            src.close()
    return RosbagImportSummary(out, episodes, samples, {p.topic: p.name for p in plans}, lost_all)


def _import_bag(buf: Any, src: BagSource, plans: list, stamp: str, samples: dict[str, int],
                progress: bool) -> dict[str, int | None] | None:
    """Copy one bag's messages into ``buf`` as one episode; returns its lost messages, or None if it read whole."""
    from tqdm import tqdm

    mine = [p for p in plans if p.topic in src.topics]
    total = sum(src.declared.get(p.topic, 0) for p in mine) or None
    with tqdm(total=total, desc=f"importing {src.path.name}", unit="msg", disable=not progress) as bar:
        for plan, t, values in convert(src, mine):
            buf.extend(plan.name, values, t)
            samples[plan.name] += len(t)
            bar.update(len(t))
    lost = warn_lost(src)
    partial = not src.read_all()  # a bag cut after its last message imports whole
    if not any(src.read_counts.values()):
        warnings.warn(RosbagWarning(f"{src.path}: no message of the imported topics; no episode made"),
                      stacklevel=3)
        return lost if partial else None
    data: dict[str, Any] = {
        "bag": src.path.name, "path": str(src.path.resolve()), "start_ns": src.start_ns,
        "topics": {p.topic: p.msgtype for p in mine}, "streams": {p.topic: p.name for p in mine}, "stamp": stamp}
    if partial:
        data["lost"] = lost
    buf.end_episode(interrupted=partial, **data)
    return lost if partial else None
