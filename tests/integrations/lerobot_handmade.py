"""A hand-made LeRobot v3.0 dataset with what the LeRobot-written fixture does not have: episodes spread
over two data files and two meta/episodes files, a shared video whose episodes are stored out of order
after two filler frames, a camera listed channels-first, a 2-D float64 feature, scalar int and bool
columns, an episode with two tasks, and tasks.parquet with a ``task`` column.

Values (fps 5): camera frame i of episode e is every pixel ``pixel(e, i)``; ``observation.state`` is
``[[e, i, 0], [1, 2, 3]]``, ``count`` is ``10 * e + i``, ``flag`` is ``i % 2 == 1``.
"""

from fractions import Fraction
from pathlib import Path
import json

import numpy as np

FPS = 5
LENGTHS = (4, 6, 3)
TASKS = ("reach", "grasp")
#: task_index of each frame of episode e
FRAME_TASKS = {0: [0] * 4, 1: [1, 1, 1, 0, 0, 0], 2: [1] * 3}
#: episode order inside the mp4, after FILLER frames
VIDEO_ORDER = (2, 0, 1)
FILLER = 2
SIZE = 16


def pixel(e: int, i: int) -> int:
    return 20 + 30 * e + 10 * i


def write(root: Path) -> Path:
    import av
    import pyarrow as pa
    import pyarrow.parquet as pq

    features = {
        "observation.image": {"dtype": "video", "shape": [3, SIZE, SIZE], "names": ["channels", "height", "width"]},
        "observation.state": {"dtype": "float64", "shape": [2, 3], "names": None},
        "count": {"dtype": "int64", "shape": [1], "names": None},
        "flag": {"dtype": "bool", "shape": [1], "names": None},
        **{k: {"dtype": "float32" if k == "timestamp" else "int64", "shape": [1], "names": None}
           for k in ("timestamp", "frame_index", "episode_index", "index", "task_index")},
    }
    info = {"codebase_version": "v3.0", "fps": FPS, "features": features, "total_episodes": 3,
            "data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
            "video_path": "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"}
    (root / "meta").mkdir(parents=True)
    (root / "meta" / "info.json").write_text(json.dumps(info))
    pq.write_table(pa.table({"task_index": [0, 1], "task": list(TASKS)}), root / "meta" / "tasks.parquet")

    data_file = {e: int(e >= 2) for e in range(len(LENGTHS))}  # episodes 0, 1 in file 0, the rest in file 1
    start = 0
    rows_by_file: dict[int, list[dict]] = {0: [], 1: []}
    for e, n in enumerate(LENGTHS):
        for i in range(n):
            rows_by_file[data_file[e]].append({
                "observation.state": [[float(e), float(i), 0.0], [1.0, 2.0, 3.0]], "count": 10 * e + i,
                "flag": i % 2 == 1, "timestamp": i / FPS, "frame_index": i, "episode_index": e,
                "index": start + i, "task_index": FRAME_TASKS[e][i]})
        start += n
    for f, rows in rows_by_file.items():
        path = root / f"data/chunk-000/file-{f:03d}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        state_type = pa.list_(pa.list_(pa.float64(), 3), 2)
        pq.write_table(pa.Table.from_pylist(rows, schema=pa.schema([
            ("observation.state", state_type), ("count", pa.int64()), ("flag", pa.bool_()),
            ("timestamp", pa.float32()), ("frame_index", pa.int64()), ("episode_index", pa.int64()),
            ("index", pa.int64()), ("task_index", pa.int64())])), path)

    video = root / "videos/observation.image/chunk-000/file-000.mp4"
    video.parent.mkdir(parents=True)
    frames = [np.full((SIZE, SIZE, 3), 250, np.uint8)] * FILLER
    from_ts = {}
    for e in VIDEO_ORDER:
        from_ts[e] = len(frames) / FPS
        frames += [np.full((SIZE, SIZE, 3), pixel(e, i), np.uint8) for i in range(LENGTHS[e])]
    with av.open(str(video), "w") as container:
        stream = container.add_stream("libx264", rate=FPS)
        stream.width = stream.height = SIZE
        stream.pix_fmt = "yuv420p"
        stream.codec_context.gop_size = 2
        for j, arr in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(arr, format="rgb24")
            frame.pts, frame.time_base = j, Fraction(1, FPS)
            container.mux(stream.encode(frame))
        container.mux(stream.encode())

    episodes = [{"episode_index": e, "tasks": [TASKS[t] for t in dict.fromkeys(FRAME_TASKS[e])], "length": n,
                 "data/chunk_index": 0, "data/file_index": data_file[e],
                 "videos/observation.image/chunk_index": 0, "videos/observation.image/file_index": 0,
                 "videos/observation.image/from_timestamp": from_ts[e],
                 "videos/observation.image/to_timestamp": from_ts[e] + n / FPS} for e, n in enumerate(LENGTHS)]
    for f, part in ((0, episodes[:1]), (1, episodes[1:])):
        path = root / f"meta/episodes/chunk-000/file-{f:03d}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(part), path)
    return root
