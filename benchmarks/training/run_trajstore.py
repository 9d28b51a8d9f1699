"""trajstore as a contender of the training-loader benchmark (the project's python, ``PYTHONPATH`` = a source tree).

``--variant jpeg`` reads ``DATA/trajstore_jpeg`` (cameras as JPEG, the default routing), ``--variant
video`` ``DATA/trajstore_video`` (cameras as H.264, ``VideoStorage``); ``--build`` writes the folder
from ``DATA/raw`` (``_data.build_trajstore``). The loader::

    ReplayBufferDataset(folder, delta_indices={camera and state: [-1, 0], "action": range(16)})

in the benchmark's ``DataLoader`` (``_loader_common.torch_loader``: batch 32, shuffled, persistent
workers, which reopen the folder read-only). Frames come back uint8 ``(B, 2, H, W, 3)``. Item ``i`` is
the window at anchor ``i`` and, with edge padding, every step is an anchor, so anchor ``i`` is step
``i``; the dataset does not return it, so ``index`` is read off the state at offset 0, which codes its
step (``_loader_common.state_values``), and the rest of the batch is checked against it; the item's
``"is_pad"`` flags are checked as ``<key>_is_pad``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _data  # noqa: E402
import _loader_common as lc  # noqa: E402


def flatten(nested, prefix=""):
    out = {}
    for key, value in nested.items():
        if isinstance(value, dict):
            out.update(flatten(value, f"{prefix}{key}/"))
        else:
            out[prefix + key] = value
    return out


def main() -> None:
    args = lc.parse_args()
    args.variant = args.variant or "jpeg"
    if args.build:
        t0 = time.perf_counter()
        folder = _data.build_trajstore(args.data, args.variant)
        lc.built(args, folder, time.perf_counter() - t0, f"trajstore {args.variant}")
        return
    truth = lc.load_truth(args.data)
    folder = Path(args.data) / f"trajstore_{args.variant}"
    if not folder.with_name(folder.name + ".complete").exists():
        lc.unavailable(args, truth, f"no {folder} (run with --build)", f"trajstore {args.variant}")
        return
    import numpy as np
    import trajstore
    from trajstore.training.torch import ReplayBufferDataset

    delta = {**{k: list(lc.OBS_OFFSETS) for k in truth.cameras + [lc.STATE_KEY]},
             lc.ACTION_KEY: list(lc.ACTION_OFFSETS)}

    def make_loader():
        return lc.torch_loader(ReplayBufferDataset(str(folder), delta_indices=delta), args)

    def to_numpy(batch):
        flat = {}
        for k, v in flatten(batch).items():  # is_pad/<key> -> <key>_is_pad (checked against the episodes)
            flat[k.removeprefix("is_pad/") + lc.PAD_SUFFIX if k.startswith("is_pad/") else k] = v.numpy()
        flat[lc.INDEX_KEY] = flat[lc.STATE_KEY][:, lc.OBS_OFFSETS.index(0), 0].astype(np.int64)
        return flat

    camera = "JPEG q90 4:4:4 (default routing)" if args.variant == "jpeg" else "H.264 video (VideoStorage)"
    lc.measure(make_loader, to_numpy, truth, args, contender=f"trajstore {args.variant}", folder=folder,
               notes=f"{camera}; frames uint8 HWC; index from state (the dataset returns no anchor "
                     "index: the checker reads it off the state at offset 0, which codes the step exactly); "
                     f"trajstore from {Path(trajstore.__file__).parent.parent}")


if __name__ == "__main__":
    main()
