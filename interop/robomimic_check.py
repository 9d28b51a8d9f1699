"""The robomimic half of ``make robomimic-check``: open a trajstore export with robomimic 0.3.0's own
``SequenceDataset`` and compare it with the reference that ``robomimic_reference.py dump`` wrote from the
buffer. Runs in the robomimic venv (``python benchmarks/peers/_venvs.py robomimic``):

    <robomimic python> interop/robomimic_check.py EXPORT.hdf5 REFERENCE.npz

Checks, for each filter key of the reference (``filter_by_attribute``) and for the whole file, in two
cache modes (``"all"`` and none): the demos listed and their order, the number of samples, and every
``obs`` / ``next_obs`` (``load_next_obs=True``) / ``actions`` / ``rewards`` / ``dones`` value of every
sample exactly (in the dtype robomimic hands out: cached modes cast the dataset keys to float32). Camera
keys (``(N, H, W, 3)`` uint8) are read as robomimic's ``rgb`` modality, the others as ``low_dim``. Also a
``frame_stack=2, seq_length=3`` padded sequence read and ``goal_mode="last"`` (the goal is ``next_obs`` of a
demo's last sample). Prints one line per check; exits 1 on a failure.
"""

from __future__ import annotations

import sys

import h5py
import numpy as np
import robomimic.utils.obs_utils as ObsUtils
from robomimic.utils.dataset import SequenceDataset

FAILURES: list[str] = []


def check(ok: bool, what: str) -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {what}", flush=True)
    if not ok:
        FAILURES.append(what)


def main(path: str, reference: str) -> None:
    ref = dict(np.load(reference))
    lengths = ref.pop("__lengths__")
    masks = {k[len("__mask__"):]: ref.pop(k) for k in list(ref) if k.startswith("__mask__")}
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    obs_keys = sorted(k[4:] for k in ref if k.startswith("obs/"))
    rgb = [k for k in obs_keys if ref[f"obs/{k}"].ndim == 4 and ref[f"obs/{k}"].dtype == np.uint8]
    low_dim = [k for k in obs_keys if k not in rgb]
    ds_keys = [k for k in ("actions", "rewards", "dones") if k in ref]
    ObsUtils.initialize_obs_utils_with_obs_specs({"obs": {"low_dim": low_dim, "rgb": rgb}})
    with h5py.File(path, "r") as f:
        file_masks = sorted(f["mask"]) if "mask" in f else []
        total = int(f["data"].attrs["total"])
    print(f"{path}: {len(lengths)} demos, {int(lengths.sum())} samples, rgb {rgb}, low_dim {low_dim}, "
          f"dataset keys {ds_keys}, masks {file_masks}")
    check(file_masks == sorted(masks), f"filter keys {file_masks} == {sorted(masks)}")
    check(total == int(lengths.sum()), f"data attr total {total} == {int(lengths.sum())}")
    for fk in [*sorted(masks), None]:
        demos = masks[fk].tolist() if fk is not None else list(range(len(lengths)))
        for cache in ("all", None):
            ds = SequenceDataset(hdf5_path=path, obs_keys=obs_keys, dataset_keys=ds_keys, frame_stack=1,
                                 seq_length=1, pad_frame_stack=True, pad_seq_length=True, get_pad_mask=False,
                                 goal_mode=None, hdf5_cache_mode=cache, hdf5_use_swmr=True,
                                 hdf5_normalize_obs=False, filter_by_attribute=fk, load_next_obs=True)
            what = f"filter_by_attribute={fk!r}, hdf5_cache_mode={cache!r}"
            want_names = [f"demo_{d}" for d in demos]
            check(list(ds.demos) == want_names and len(ds) == int(lengths[demos].sum()),
                  f"{what}: demos {list(ds.demos)} == {want_names}, {len(ds)} samples")
            wrong, i = 0, 0
            for d in demos:
                for t in range(int(lengths[d])):
                    item = ds[i]
                    i += 1
                    row = starts[d] + t
                    for k in obs_keys:
                        for part in ("obs", "next_obs"):
                            got = np.asarray(item[part][k][0])
                            wrong += got.dtype != ref[f"{part}/{k}"].dtype or not np.array_equal(got, ref[f"{part}/{k}"][row])
                    for k in ds_keys:
                        got = np.asarray(item[k][0])
                        wrong += not np.array_equal(got, ref[k][row].astype(got.dtype))
            check(wrong == 0, f"{what}: every obs, next_obs (dtype and value), {', '.join(ds_keys)} value of "
                              f"every sample exact ({wrong} wrong)")
    # padded sequences and the goal: frame_stack 2, seq_length 3, goal = next_obs of the demo's last sample
    ds = SequenceDataset(hdf5_path=path, obs_keys=obs_keys, dataset_keys=ds_keys, frame_stack=2, seq_length=3,
                         pad_frame_stack=True, pad_seq_length=True, get_pad_mask=True, goal_mode="last",
                         hdf5_cache_mode="all", filter_by_attribute=None)
    wrong, i = 0, 0
    for d in range(len(lengths)):
        n = int(lengths[d])
        for t in range(n):
            item = ds[i]
            i += 1
            rows = starts[d] + np.clip(np.arange(t - 1, t + 3), 0, n - 1)
            for k in obs_keys:
                wrong += not np.array_equal(np.asarray(item["obs"][k]), ref[f"obs/{k}"][rows])
                wrong += not np.array_equal(np.asarray(item["goal_obs"][k]), ref[f"next_obs/{k}"][starts[d] + n - 1])
            got = np.asarray(item["actions"])
            wrong += not np.array_equal(got, ref["actions"][rows].astype(got.dtype))
    check(wrong == 0, f"frame_stack=2, seq_length=3 padded windows and goal_mode='last' at every sample ({wrong} wrong)")
    print(f"{'PASSED' if not FAILURES else 'FAILED'}: {path}", flush=True)
    if FAILURES:
        sys.exit(1)


if __name__ == "__main__":
    main(*sys.argv[1:3])
