"""``trajstore import rosbag BAG... OUT``: ROS 2 bags into a new stream buffer folder (one episode per bag).

Parses the arguments, calls :func:`trajstore.interop.rosbag.import_rosbag`, prints its summary; its
warnings (topics left out, messages lost to a cut-short bag) as ``warning: ...`` lines on stderr.
"""

from __future__ import annotations

import sys
import warnings
from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer

from trajstore.cli._output import progress_option
from trajstore.errors import TrajstoreError


class Stamp(str, Enum):
    header = "header"
    log = "log"


class RosCamera(str, Enum):
    png = "png"
    jpeg = "jpeg"
    video = "video"


def parse_topics(values: Optional[List[str]]) -> dict[str, Optional[str]]:
    """``["/camera/image_raw=wrist", "/imu"]`` -> ``{"/camera/image_raw": "wrist", "/imu": None}``."""
    out: dict[str, Optional[str]] = {}
    for value in values or []:
        topic, sep, name = value.partition("=")
        if not topic or (sep and not name):
            raise typer.BadParameter(f"expected TOPIC or TOPIC=STREAM, got {value!r}", param_hint="--topic")
        out[topic] = name or None
    return out


def import_rosbag_command(
    paths: List[Path] = typer.Argument(..., help="BAG... OUT: rosbag2 folders (sqlite3 or MCAP storage) or "
                                                 ".mcap/.db3 files, one episode each; then the new folder."),
    topic: Optional[List[str]] = typer.Option(None, "--topic", "-t", help="TOPIC=STREAM names a topic's stream, "
                                              "e.g. /camera/image_raw=wrist (repeat); TOPIC alone lists it."),
    only: bool = typer.Option(False, "--only", help="Import only the topics given with --topic."),
    stamp: Stamp = typer.Option(Stamp.header, help="Sample times: header.stamp (messages without a header: log "
                                                   "time) or the bag's log time."),
    camera: RosCamera = typer.Option(RosCamera.png, help="How to store colour frames (png: lossless)."),
    progress: bool = progress_option(),
) -> None:
    """Import ROS 2 bags: each topic a stream at its own rate (Image, CompressedImage, JointState, Imu,
    *MultiArray, geometry_msgs twists/poses/wrenches...); a cut-short bag imports its readable prefix."""
    from trajstore.cli._output import console, fail
    from trajstore.interop.rosbag import import_rosbag

    if len(paths) < 2:
        raise fail("give at least one BAG and the OUT folder")
    *bags, out = paths
    topics = parse_topics(topic)
    shown: set[str] = set()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                summary = import_rosbag(bags, out, topics=topics or None, only=only, stamp=stamp.value,
                                        camera=camera.value, progress=progress)
            finally:
                for w in caught:
                    text = " ".join(str(w.message).split())
                    if text not in shown:
                        shown.add(text)
                        print(f"warning: {text}", file=sys.stderr, flush=True)
    except (TrajstoreError, ImportError, ValueError, TypeError, OSError) as exc:
        raise fail(exc)
    console.print(summary.line(), soft_wrap=True, markup=False)
