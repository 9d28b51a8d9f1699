"""Memory of torch DataLoader workers reading a JPEG replay buffer: the main process and each worker.

The data: ``--episodes`` (20) episodes of ``--steps`` (100) steps, a ``--height`` x ``--width`` (96x128)
RGB camera ``observation/pixels`` (``kind="image"``: JPEG, the routing default), ``observation/state``
float32 ``(7,)`` and ``action`` float32 ``(7,)``; written once (by the first source) and read by every one.

Each case is a fresh process: ``ReplayBufferDataset(path, ...)`` (steps, or windows: the camera at
[-2, -1, 0], the action chunk at 0..15), a ``DataLoader`` (``batch_size`` 32, ``shuffle``, fork,
``persistent_workers`` with workers, ``pin_memory=False``) run for ``--epochs`` (2) epochs of at most
``--batches`` (40) batches, with 0, 2 and 4 workers. A thread samples ``/proc/<pid>/smaps_rollup`` of
the main process and of every worker every 20 ms; reported per case: the main process's and the
workers' peak RSS and PSS (MiB; the workers' the largest one's and the sum over the workers), and each
worker's ``Private`` (clean + dirty, the pages no other process shares: what the worker holds of its own)
when it starts (after ``worker_init_fn``) and at its peak; plus how many bytes the dataset pickles into
(what spawn sends each worker) and the items' bytes per batch. ``--image-layout CHW`` /
``--image-dtype float32`` choose the items' frames (a source without those options is run without them).
``--tree-fix`` runs the last source once more with ``trajstore.spaces.tree.unflatten`` replaced by a
version without its reference cycle (see :func:`patch_unflatten`).

Each ``--src LABEL=DIR`` runs in processes of its own (``PYTHONPATH=DIR``); the first is the baseline of
the ratios. Nothing is asserted. Run (the project's python)::

    python benchmarks/worker_memory.py --src before=/tmp/main-src-torch/src --src after=src --tree-fix

Figures (2 cores shared, load average 12-23; memory, not time, so the load matters little), MiB, defaults:

* a worker's private pages, start -> peak: steps 2 workers 13.7 -> 51.0 (before), 16.5 -> 51.2 (after),
  14.1 -> 16.0 (after+tree-fix); windows 2 workers 17.2 -> 126.4, 16.6 -> 129.6, 12.8 -> 25.1; windows 4
  workers 23.4 -> 72.0, 20.3 -> 67.1, 20.4 -> 25.4. Main process alone (0 workers), peak PSS: windows
  358, 347, 206; steps 264, 266, 181. Total PSS (main + workers) after+tree-fix / before: x0.57-0.81.
  What grows is anonymous memory (malloc'ed arrays): ``tree.unflatten``'s self-referencing closure keeps
  each batch's leaf arrays alive until the cyclic GC runs (up to ~30 batches of garbage).
* the dataset pickles into 0.9 KiB (steps) / 1.3 KiB (windows): a folder reference, not the buffer;
  3000 episodes of 5 steps: a worker's private pages 13.7 -> 15.8 (no per-worker copy of the episode table).
* ``--image-layout CHW --image-dtype float32`` against ``uint8``, windows: 13.52 against 3.39 MiB of items
  per batch through the queue; a worker's private peak 146.8 against 126.5.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))

import _harness as hx  # noqa: E402

CHILD, CASE = "--child", "--case"
MODES = ("steps", "windows")
WORKERS = (0, 2, 4)
MIB = 1 << 20


def main() -> None:
    if sys.argv[1:2] == [CHILD]:
        print(json.dumps(run(json.loads(sys.argv[2]))))
        return
    if sys.argv[1:2] == [CASE]:
        print(json.dumps(case(json.loads(sys.argv[2]))))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    hx.add_source_arguments(ap)
    ap.add_argument("--episodes", type=int, default=20)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--height", type=int, default=96)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--batches", type=int, default=40, help="at most this many batches an epoch")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--workers", default=",".join(map(str, WORKERS)))
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--image-layout", default=None, choices=("HWC", "CHW"))
    ap.add_argument("--image-dtype", default=None, choices=("uint8", "float32"))
    ap.add_argument("--tree-fix", action="store_true",
                    help="also run the last source with trajstore.spaces.tree.unflatten replaced by a version without "
                         "a reference cycle (the fix proposed for spaces/tree.py), labelled '<label>+tree-fix'")
    ap.add_argument("--json", type=Path, help="also write the results as JSON to this file")
    ap.add_argument("--workdir", type=Path, help="where the buffer goes (default: a new folder, removed at the end)")
    ap.add_argument("--keep", action="store_true", help="keep the workdir")
    args = ap.parse_args()
    cons = hx.contenders(argparse.Namespace(src=args.src, python=args.python, peers="", no_install=True))
    work = hx.workdir(args, "worker-memory-")
    config = {k: v for k, v in vars(args).items() if k not in ("src", "python", "json", "workdir", "keep")}
    config["buffer"] = str(work / "buffer")
    if args.tree_fix:
        cons.append(dataclasses.replace(cons[-1], label=cons[-1].label + "+tree-fix"))
    fixed = len(cons) - 1 if args.tree_fix else -1
    results = hx.run_sources(cons, work, Path(__file__).resolve(), CHILD,
                             lambda i, out: {**config, "out": str(out), "patch_unflatten": i == fixed},
                             timeout=3600, keep=args.keep)
    report(args, results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


def report(args: argparse.Namespace, results: dict[str, dict]) -> None:
    print(f"\nDataLoader memory, MiB: {args.episodes} x {args.steps} steps, {args.height}x{args.width} JPEG frames, "
          f"batch {args.batch}, {args.epochs} epochs of <= {args.batches} batches, fork, persistent workers; "
          f"w PSS/RSS: the largest worker's peak; sum PSS: over the workers; priv: a worker's private pages "
          f"at start -> peak (largest worker)")
    base = next((r for r in results.values() if "failed" not in r), None)
    rows = []
    for label, res in results.items():
        if "failed" in res:
            rows.append([label, f"failed: {res['failed']}"])
            continue
        for key, c in res["cases"].items():
            if "failed" in c:
                rows.append([f"{label} {key}", f"failed: {c['failed']}"])
                continue
            b = (base or {}).get("cases", {}).get(key, {})
            w = c["workers"]
            rows.append([f"{label} {key}", c["main_pss"], c["main_rss"], w.get("max_pss", 0.0), w.get("max_rss", 0.0),
                         w.get("sum_pss", 0.0), f"{w.get('priv_start', 0):.1f} -> {w.get('priv_peak', 0):.1f}",
                         hx.ratio(c["main_pss"] + w.get("sum_pss", 0.0),
                                  b.get("main_pss", 0.0) + b.get("workers", {}).get("sum_pss", 0.0) if b else None),
                         c["pickle_kib"]])
    print(hx.table(["source case", "main PSS", "main RSS", "w PSS", "w RSS", "sum w PSS", "w priv",
                    "total PSS vs first", "pickle KiB"], rows))
    print("\nAt the end of each case, by kind of mapping (smaps): private MiB of the main process / of worker 0 "
          "(anon: malloc heap, thread arenas, arrays; shm: torch shared-memory batches; libs: file-backed)")
    kinds = ("anon", "shm", "libs", "stack", "other")
    rows = []
    for label, res in results.items():
        for key, c in res.get("cases", {}).items():
            parts = c.get("parts") or {}
            m, w = parts.get("main", {}), parts.get("worker0", {})
            rows.append([f"{label} {key}"] + [f"{m.get(k, {}).get('priv', 0):.1f} / {w.get(k, {}).get('priv', 0):.1f}"
                                               for k in kinds])
    print(hx.table(["source case", *kinds], rows))
    for label, res in results.items():
        if "failed" not in res:
            print(f"  {label}: load average {res['load'][0]:.1f} -> {res['load'][1]:.1f}; item bytes per batch: "
                  + ", ".join(f"{m} {res['cases'].get(f'{m} w0', {}).get('batch_mib', float('nan')):.2f} MiB"
                              for m in args.modes.split(",")))


# -- in the measured source tree's process -----------------------------------------------------------
def run(config: dict) -> dict:
    load0 = os.getloadavg()
    if not (Path(config["buffer"]) / "done").exists():
        write(config)
    cases = {}
    for mode in config["modes"].split(","):
        for n in (int(w) for w in config["workers"].split(",")):
            key = f"{mode} w{n}"
            proc = subprocess.run([sys.executable, __file__, CASE, json.dumps({**config, "mode": mode, "workers": n})],
                                  capture_output=True, text=True, timeout=1800)
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
            if proc.returncode or not lines:
                cases[key] = {"failed": (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]}
            else:
                cases[key] = json.loads(lines[-1])
            print(f"  {key}: done", file=sys.stderr, flush=True)
    return {"cases": cases, "load": [load0[0], os.getloadavg()[0]]}


def write(config: dict) -> None:
    import numpy as np

    from trajstore.replay_buffer import ReplayBuffer
    from trajstore.spaces import BoxSpace, DictSpace
    from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

    h, w = config["height"], config["width"]
    space = DictSpace({"observation": DictSpace({
        "pixels": BoxSpace(0, 255, (h, w, 3), np.uint8, metadata={"kind": "image", "layout": "HWC"}),
        "state": BoxSpace(-1e3, 1e3, (7,), np.float32)}), "action": BoxSpace(-1e3, 1e3, (7,), np.float32)})
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:h, 0:w]
    with ReplayBuffer.create(DictStorage, space, cache_path=config["buffer"],
                             **dict_storage_kwargs_from_space(space)) as rb:
        for e in range(config["episodes"]):
            n = config["steps"]
            t = np.arange(n)[:, None, None]
            base = ((xx + yy + 3 * t + 17 * e) % 256).astype(np.uint8)  # a moving gradient, plus noise
            pix = np.stack([base, base[:, ::-1], 255 - base], -1)
            pix = np.clip(pix + rng.integers(0, 12, pix.shape), 0, 255).astype(np.uint8)
            rb.extend({"observation": {"pixels": pix, "state": rng.normal(size=(n, 7)).astype(np.float32)},
                       "action": rng.normal(size=(n, 7)).astype(np.float32)})
            rb.end_episode()
    (Path(config["buffer"]) / "done").write_text("")


def rollup(pid: int) -> dict[str, float]:
    """``/proc/<pid>/smaps_rollup`` in MiB: Rss, Pss, Private (clean + dirty); empty when the process is gone."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return {}
    kb = {}
    for line in text.splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 2 and parts[1].isdigit():
            kb[parts[0].rstrip(":")] = int(parts[1])
    return {"rss": kb.get("Rss", 0) / 1024, "pss": kb.get("Pss", 0) / 1024,
            "priv": (kb.get("Private_Clean", 0) + kb.get("Private_Dirty", 0)) / 1024}


def breakdown(pid: int) -> dict[str, dict[str, float]]:
    """``/proc/<pid>/smaps`` summed by kind of mapping, MiB of ``pss`` and ``priv``: ``anon`` (malloc heap,
    thread arenas, NumPy/torch buffers), ``shm`` (torch's shared-memory batches, ``/dev/shm``, memfd),
    ``libs`` (file-backed: ``.so``, Python files), ``stack``, ``other``."""
    out: dict[str, dict[str, float]] = {}
    kind = "other"
    try:
        lines = Path(f"/proc/{pid}/smaps").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        head = line.split()
        if head and "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
            name = head[5] if len(head) > 5 else ""
            if not name or name == "[heap]" or name.startswith("[anon"):
                kind = "anon"
            elif name.startswith("/dev/shm") or "torch_" in name or name.startswith("/memfd"):
                kind = "shm"
            elif name.startswith("[stack"):
                kind = "stack"
            elif name.startswith("/"):
                kind = "libs"
            else:
                kind = "other"
            continue
        if head and head[0] in ("Pss:", "Private_Clean:", "Private_Dirty:"):
            d = out.setdefault(kind, {"pss": 0.0, "priv": 0.0})
            d["pss" if head[0] == "Pss:" else "priv"] += int(head[1]) / 1024
    return out


def children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


class Sampler(threading.Thread):
    """Peaks of the main process and of each worker, every ``period`` s."""

    def __init__(self, period: float = 0.02):
        super().__init__(daemon=True)
        self.period, self.stop, self.main = period, threading.Event(), {}
        self.workers: dict[int, dict[str, float]] = {}
        self.first: dict[int, dict[str, float]] = {}

    def run(self) -> None:
        me = os.getpid()
        while not self.stop.is_set():
            self.sample(me)
            time.sleep(self.period)

    def sample(self, me: int) -> None:
        for pid, store in [(me, None)] + [(c, self.workers) for c in children(me)]:
            r = rollup(pid)
            if not r:
                continue
            peak = self.main if store is None else store.setdefault(pid, {})
            for k, v in r.items():
                peak[k] = max(peak.get(k, 0.0), v)


def case(config: dict) -> dict:
    import inspect
    import multiprocessing as mp
    import pickle

    import torch
    from torch.utils.data import DataLoader

    from trajstore.training.torch import ReplayBufferDataset

    if config.get("patch_unflatten"):
        patch_unflatten()
    starts = {}

    kw: dict = {}
    if config["mode"] == "windows":
        kw["delta_indices"] = {"observation/pixels": [-2, -1, 0], "action": range(16)}
    params = inspect.signature(ReplayBufferDataset).parameters
    for opt in ("image_layout", "image_dtype"):
        if config.get(opt) and opt in params:
            kw[opt] = config[opt]
    sampler = Sampler()
    sampler.start()
    ds = ReplayBufferDataset(config["buffer"], **kw)
    pickle_kib = len(pickle.dumps(ds)) / 1024
    n = config["workers"]
    extra = {"persistent_workers": True, "multiprocessing_context": mp.get_context("fork")} if n else {}
    loader = DataLoader(ds, batch_size=config["batch"], shuffle=True, num_workers=n,
                        generator=torch.Generator().manual_seed(0), **extra)
    batch_bytes = []
    for _ in range(config["epochs"]):
        it = iter(loader)
        if n and not starts:
            time.sleep(0.3)  # the workers are up: their pages right after the fork and the dataset's first use
            for c in children(os.getpid()):
                starts[c] = rollup(c)
        for b, batch in enumerate(it):
            if b == 0 and not batch_bytes:
                batch_bytes.append(sum(t.numel() * t.element_size() for t in _tensors(batch)))
            if b + 1 >= config["batches"]:
                break
    sampler.sample(os.getpid())
    parts = {"main": breakdown(os.getpid())}
    for k, c in enumerate(children(os.getpid())):
        parts[f"worker{k}"] = breakdown(c)
    sampler.stop.set()
    sampler.join()
    ws = list(sampler.workers.values())
    workers = {}
    if ws:
        workers = {"max_pss": max(w["pss"] for w in ws), "max_rss": max(w["rss"] for w in ws),
                   "sum_pss": sum(w["pss"] for w in ws), "priv_peak": max(w["priv"] for w in ws),
                   "priv_start": max((s.get("priv", 0.0) for s in starts.values()), default=0.0)}
    return {"main_pss": sampler.main.get("pss", 0.0), "main_rss": sampler.main.get("rss", 0.0), "workers": workers,
            "pickle_kib": pickle_kib, "batch_mib": (batch_bytes or [0])[0] / MIB, "parts": parts}


def patch_unflatten() -> None:
    """Replace ``trajstore.spaces.tree.unflatten`` (its recursive closure ``build`` refers to itself and to
    the iterator over the leaf values: a reference cycle that keeps every batch's arrays alive until the
    cyclic GC runs) by the same function without the cycle."""
    from trajstore.spaces import tree

    def is_dict(space):
        return getattr(space, "spaces", None) is not None and space.type_name == "dict"

    def build(sub, it):
        return {key: build(child, it) if is_dict(child) else next(it) for key, child in sub.spaces.items()}

    def unflatten(space, values):
        return build(space, iter(values)) if is_dict(space) else values[0]

    tree.unflatten = unflatten


def _tensors(node):
    import torch

    if isinstance(node, dict):
        for v in node.values():
            yield from _tensors(v)
    elif isinstance(node, torch.Tensor):
        yield node


if __name__ == "__main__":
    main()
