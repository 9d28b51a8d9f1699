"""Prioritized replay: trajstore's sum tree (NumPy) against TorchRL 0.14's ``PrioritizedSampler`` (C++), in the same run.

Steps as ``benchmarks/rl_sampling.py`` (``observation`` (4,) float32, ``action`` (2,), ``reward``, two flags),
a ring of ``--sizes`` steps (20,000 and 1,000,000) filled once, every step then given a random priority
(uniform in [0.1, 10]); alpha 0.6, beta 0.4, batch 256. Cases (median of ``--repeats`` calls after a warm-up):

* ``draw``: indices and importance weights only: ``rb.sample_indices(256, priority="td")`` vs TorchRL
  ``rb.sampler.sample(rb.storage, 256)`` (index and ``_weight``);
* ``update``: ``rb.update_priorities(steps, values)`` of 256 drawn steps vs ``rb.update_priority(index, values)``;
* ``sample``: ``rb.sample(256, priority="td")`` (batch, weights, indices) vs TorchRL ``rb.sample()`` of a
  ``TensorDictReplayBuffer(storage=LazyTensorStorage(N), sampler=PrioritizedSampler(N, 0.6, 0.4))``.

trajstore runs in memory (``cache_path=None``, the writer) and on disk (a reader: ``load_from`` of the
flushed folder, the tree built from the committed priorities; it cannot update). TorchRL runs in its own
venv (``benchmarks/peers/_venvs.py torchrl``). Its C++ extension as shipped for torchrl 0.14.1 does not
load with that venv's torch (``undefined symbol ..._wrap_outputs``), without which ``PrioritizedSampler``
refuses to run; ``--torchrl-ext`` names a ``_torchrl*.so`` built from the package's own ``torchrl/csrc``
(``pybind.cpp``, ``utils.cpp``) against that torch (g++ -O3 -std=c++17, see ``EXT_BUILD``), loaded in place
of the shipped one. The machine is shared: compare ratios of the same run.

Run::

    python benchmarks/prioritized_sampling.py [--sizes 20000,1000000] [--repeats 101] [--rounds 5]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

BATCH, ALPHA, BETA = 256, 0.6, 0.4
DEFAULT_EXT = "/root/.cache/trajstore-peers/torchrl-ext/_torchrl.cpython-311-x86_64-linux-gnu.so"
EXT_BUILD = ("g++ -O3 -shared -fPIC -std=c++17 -D_GLIBCXX_USE_CXX11_ABI=1 -DTORCH_EXTENSION_NAME=_torchrl "
             "-I$TORCH/include -I$TORCH/include/torch/csrc/api/include -I$PYTHON_INCLUDE pybind.cpp utils.cpp "
             "-L$TORCH/lib -ltorch -ltorch_cpu -lc10 -ltorch_python -Wl,-rpath,$TORCH/lib -o _torchrl...so")


def leaves(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"observation": rng.standard_normal((n, 4), np.float32), "action": rng.uniform(-1, 1, (n, 2)).astype(
        np.float32), "reward": rng.standard_normal(n).astype(np.float32), "terminated": np.zeros(n, bool),
        "truncated": np.zeros(n, bool)}


def median_ms(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times) * 1e3)


def trajstore_cases(sizes, repeats: int, root: Path) -> dict:
    from trajstore.replay_buffer import ReplayBuffer
    from trajstore.spaces import BinarySpace, BoxSpace, DictSpace
    from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

    space = DictSpace({"observation": BoxSpace(-np.inf, np.inf, (4,), np.float32),
                       "action": BoxSpace(-1, 1, (2,), np.float32), "reward": BoxSpace(-np.inf, np.inf, (), np.float32),
                       "terminated": BinarySpace(), "truncated": BinarySpace()})
    out = {}
    for total in sizes:
        for where in ("memory", "disk"):
            path = None if where == "memory" else root / f"ts-{total}"
            rb = ReplayBuffer.create(DictStorage, space, cache_path=path, capacity=total, priorities=("td",),
                                     **dict_storage_kwargs_from_space(space))
            rb.extend(leaves(total))
            rb.end_episode()
            rng = np.random.default_rng(1)
            rb.update_priorities(np.arange(total), rng.uniform(0.1, 10, total))
            if where == "disk":
                rb.close()
                rb = ReplayBuffer.load_from(path)
            t = time.perf_counter()
            rb.sample_indices(BATCH, priority="td", alpha=ALPHA, beta=BETA)  # the tree is built at the first draw
            out[f"build {where} {total}"] = (time.perf_counter() - t) * 1e3
            out[f"draw {where} {total}"] = median_ms(
                lambda: rb.sample_indices(BATCH, priority="td", alpha=ALPHA, beta=BETA, rng=rng), repeats)
            out[f"sample {where} {total}"] = median_ms(
                lambda: rb.sample(BATCH, priority="td", alpha=ALPHA, beta=BETA, rng=rng), repeats)
            if where == "memory":
                def update():
                    info = rb.sample_indices(BATCH, priority="td", alpha=ALPHA, beta=BETA, rng=rng)
                    values = rng.uniform(0.1, 10, BATCH)
                    t0 = time.perf_counter()
                    rb.update_priorities(info.step, values, priority="td")
                    return time.perf_counter() - t0
                update()
                out[f"update {where} {total}"] = float(np.median([update() for _ in range(repeats)]) * 1e3)
            rb.close()
            if path is not None:
                shutil.rmtree(path, ignore_errors=True)
    return out


def torchrl_cases(sizes, repeats: int, ext: str) -> dict:
    if ext and Path(ext).exists():  # the rebuilt extension, in place of the shipped one (see the docstring)
        import torch  # noqa: F401 - the extension links against it
        spec = importlib.util.spec_from_file_location("torchrl._torchrl", ext)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules["torchrl._torchrl"] = module
    import torch
    from tensordict import TensorDict
    from torchrl.data import LazyTensorStorage, PrioritizedSampler, TensorDictReplayBuffer

    out = {}
    for total in sizes:
        sampler = PrioritizedSampler(total, alpha=ALPHA, beta=BETA)
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(total), sampler=sampler, batch_size=BATCH)
        data = {k: torch.from_numpy(v) for k, v in leaves(total).items()}
        rb.extend(TensorDict(data, batch_size=[total]))
        rng = np.random.default_rng(1)
        rb.update_priority(torch.arange(total), torch.from_numpy(rng.uniform(0.1, 10, total).astype(np.float32)))
        out[f"draw memory {total}"] = median_ms(lambda: sampler.sample(rb.storage, BATCH), repeats)
        out[f"sample memory {total}"] = median_ms(rb.sample, repeats)

        def update():
            index, _ = sampler.sample(rb.storage, BATCH)
            values = torch.from_numpy(rng.uniform(0.1, 10, BATCH).astype(np.float32))
            t0 = time.perf_counter()
            rb.update_priority(index, values)
            return time.perf_counter() - t0
        update()
        out[f"update memory {total}"] = float(np.median([update() for _ in range(repeats)]) * 1e3)
    return out


def torchrl_results(args) -> dict:
    here = Path(__file__).resolve().parent
    sys.path.insert(0, str(here / "peers"))
    from _venvs import peer_python

    python, reason = peer_python("torchrl", create=False)
    if python is None:
        print(f"TorchRL unavailable: {reason}", file=sys.stderr)
        return {}
    cmd = [str(python), __file__, "--peer", "--sizes", args.sizes, "--repeats", str(args.repeats),
           "--torchrl-ext", args.torchrl_ext]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        print(done.stderr[-3000:], file=sys.stderr)
        return {}
    return json.loads(done.stdout.strip().splitlines()[-1])


def table(ours: dict, peer: dict, sizes) -> str:
    rows = ["| case | steps | trajstore ms | TorchRL ms (LazyTensorStorage) | trajstore / TorchRL |",
            "|---|---|---|---|---|"]
    for total in sizes:
        for case in ("draw", "update", "sample"):
            theirs = peer.get(f"{case} memory {total}")
            for where in ("memory", "disk"):
                mine = ours.get(f"{case} {where} {total}")
                if mine is None:
                    continue
                ratio = f"{mine / theirs:.2f}" if theirs else "-"
                label = f"{case} ({'in memory' if where == 'memory' else 'reader of a folder'})"
                rows.append(f"| {label} | {total:,} | {mine:.3f} | {theirs or float('nan'):.3f} | {ratio} |")
    builds = "; ".join(f"{k.split()[1]} {int(k.split()[2]):,}: {v:.1f} ms" for k, v in ours.items()
                       if k.startswith("build"))
    return "\n".join(rows) + f"\n\ntree built at the first draw (trajstore): {builds}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="20000,1000000")
    ap.add_argument("--repeats", type=int, default=101)
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds of both sides (the median is reported)")
    ap.add_argument("--torchrl-ext", default=DEFAULT_EXT, help="a rebuilt torchrl._torchrl (see the docstring)")
    ap.add_argument("--peer", action="store_true", help=argparse.SUPPRESS)  # the TorchRL side, in its venv
    ap.add_argument("--skip-peer", action="store_true", help="trajstore only")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if args.peer:
        print(json.dumps(torchrl_cases(sizes, args.repeats, args.torchrl_ext)))
        return
    # The machine is shared: the two sides run alternately, --rounds times; each figure is the median over
    # the rounds of that round's median.
    rounds: list[tuple[dict, dict]] = []
    for _ in range(args.rounds):
        root = Path(tempfile.mkdtemp(prefix="prioritized-"))
        try:
            ours = trajstore_cases(sizes, args.repeats, root)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        rounds.append((ours, {} if args.skip_peer else torchrl_results(args)))
    ours = {k: float(np.median([r[0][k] for r in rounds])) for k in rounds[0][0]}
    peer = {k: float(np.median([r[1][k] for r in rounds if k in r[1]])) for k in rounds[0][1]}
    print(f"median of {args.rounds} alternating rounds, each the median of {args.repeats} calls")
    print(table(ours, peer, sizes))


if __name__ == "__main__":
    main()
