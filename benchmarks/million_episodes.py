"""Opening a buffer of a million episodes: time and memory of ``load_from``, read-only and writable.

The folder: ``--episodes`` (1,000,000) episodes of one low-dim step each (``action``: float32 ``(2,)``),
each ended with ``end_episode(success=k % 3 != 0, seed=k, task="push")`` (an ~80 MiB episode log).
Through the public API that takes ~1.2 ms an episode here (``end_episode`` waits for the background
writer), ~20 minutes, so the folder is made by a documented generator (:func:`generate`):

1. the public API writes the steps: ``ReplayBuffer.create`` (unbounded), ``extend`` in batches of 65,536
   steps, one ``end_episode()`` at the end, ``close()``; the storage and ``trajstore.json`` are the
   library's own;
2. the episode log is replaced by the one the writer would have written had each step been an episode:
   the log header and one JSON line per episode, in the writer's key order and separators, and
   ``trajstore.json``'s ``"episodes"`` entry names it (``records``, ``bytes``, ``next_id``), as
   trajstore before the episode index wrote it (no index);
3. a writable ``load_from`` of the source under test opens and closes it (untimed here, reported as
   "first writable open"): a source with the episode index builds and commits it, so the timed opens
   that follow are of a folder that source itself wrote.

``--check`` (on by default) first makes a small folder both ways, through ``end_episode`` per episode
and through the generator, and requires the two episode logs to be byte for byte the same.

Timed, each in a fresh process (``--rounds`` of each): ``load_from(read_only=True)`` and
``load_from(read_only=False)``, then the first ``len(rb.episodes)``, ``rb.episodes[-1].data`` and the
selection ``success == true`` (:func:`~trajstore.replay_buffer.episode_query.parse_selection`) over
``rb.episodes``; RSS (``/proc/self/statm``) after the imports, after the open and the first two reads,
and after the selection. The source that has the index is also timed on a copy of its folder without
the index (what trajstore before it wrote): ``old ro``. The values read are checked against the
generator's (counts, first/last episode, the data, the number selected).

Run (the project's python)::

    python benchmarks/million_episodes.py --src before=/tmp/main-src-eps/src --src after=src [--episodes 1000000]

Figures (``--rounds 1``, 2 cores shared with 7 other jobs, so absolute times are ~3x those of an idle
machine; before = main 6197fa0, after = the episode index), ratios after / before:

* open read-only 34.1 s -> 1.33 s (x0.04), writable 30.7 s -> 1.39 s (x0.05); RSS above the imports after
  the open 689 -> 72 MiB (x0.10);
* first ``len(rb.episodes)`` 24.1 s -> 0.0001 s and ``rb.episodes[-1].data`` 23.8 s -> 0.0003 s (main
  built the list of a million ``Episode`` for each);
* ``success == true`` over ``rb.episodes`` 22.6 s -> 8.5 s read-only (x0.38; 29.6 -> 14.1 s writable);
* a folder without the index (main's) read-only: 34.0 s, as main (the log is parsed); its first writable
  open builds the index (26.9 s, once).

No timing is asserted anywhere.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))

import _harness as hx  # noqa: E402

CHILD, MEASURE = "--child", "--measure"
BATCH = 65536
SELECTION = "success == true"


def data_of(k: int) -> dict:
    return {"success": k % 3 != 0, "seed": k, "task": "push"}


def main() -> None:
    if sys.argv[1:2] == [CHILD]:
        print(json.dumps(child(json.loads(sys.argv[2]))))
        return
    if sys.argv[1:2] == [MEASURE]:
        print(json.dumps(measure(json.loads(sys.argv[2]))))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    hx.add_source_arguments(ap)
    ap.add_argument("--episodes", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3, help="timed opens of each kind (default 3)")
    ap.add_argument("--no-check", action="store_true", help="skip the generator-against-API byte check")
    ap.add_argument("--json", type=Path, help="also write the results as JSON to this file")
    ap.add_argument("--workdir", type=Path, help="where the folders go (default: a new folder, removed at the end)")
    ap.add_argument("--keep", action="store_true", help="keep the workdir")
    args = ap.parse_args()
    cons = hx.contenders(argparse.Namespace(src=args.src, python=args.python, peers="", no_install=True))
    work = hx.workdir(args, "million-episodes-")
    config = {"episodes": args.episodes, "rounds": args.rounds, "check": not args.no_check}
    results = hx.run_sources(cons, work, Path(__file__).resolve(), CHILD, lambda i, out: {**config, "out": str(out)},
                             timeout=3600, keep=args.keep)
    report(args, results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


# -- the folder ------------------------------------------------------------------------------
def generate(folder: Path, n: int, *, steps_only: bool = False) -> None:
    """A folder of ``n`` one-step episodes (see the module docstring, steps 1 and 2)."""
    import numpy as np

    from trajstore.replay_buffer import ReplayBuffer
    from trajstore.spaces import BoxSpace, DictSpace
    from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

    space = DictSpace({"action": BoxSpace(-1, 1, (2,), np.float32)})
    rb = ReplayBuffer.create(DictStorage, space, cache_path=str(folder), capacity=None,
                             **dict_storage_kwargs_from_space(space))
    for lo in range(0, n, BATCH):
        hi = min(n, lo + BATCH)
        rb.extend({"action": np.full((hi - lo, 2), 0.5, np.float32)})
    if steps_only:
        rb.close()
        return
    rb.end_episode()
    rb.close()
    header = json.dumps({"format": "trajstore.episode_log", "version": 1}, separators=(",", ":")) + "\n"
    meta_path = folder / "trajstore.json"
    meta = json.loads(meta_path.read_text())
    for p in folder.glob("episodes.*"):
        p.unlink()
    size = 0
    with open(folder / "episodes.000000.log", "wb") as f:
        f.write(header.encode())
        size += len(header)
        for lo in range(0, n, BATCH):
            chunk = "".join(json.dumps({"id": k, "start": k, "stop": k + 1, "final": -1, "interrupted": False,
                                        "data": data_of(k)}, separators=(",", ":")) + "\n"
                            for k in range(lo, min(n, lo + BATCH))).encode()
            f.write(chunk)
            size += len(chunk)
        f.flush()
        os.fsync(f.fileno())
    meta["episodes"] = {"open_start": None, "next_id": n, "final_count": 0, "discards": 0,
                        "log": {"file": "episodes.000000.log", "bytes": size, "records": n, "skip": 0}}
    tmp = folder / "trajstore.json.tmp"
    tmp.write_text(json.dumps(meta, indent=1))
    os.replace(tmp, meta_path)


def through_api(folder: Path, n: int) -> None:
    """The same ``n`` episodes through ``end_episode`` per episode (the check's reference)."""
    import numpy as np

    from trajstore.replay_buffer import ReplayBuffer
    from trajstore.spaces import BoxSpace, DictSpace
    from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

    space = DictSpace({"action": BoxSpace(-1, 1, (2,), np.float32)})
    with ReplayBuffer.create(DictStorage, space, cache_path=str(folder), capacity=None,
                             **dict_storage_kwargs_from_space(space)) as rb:
        for k in range(n):
            rb.extend({"action": np.full((1, 2), 0.5, np.float32)})
            rb.end_episode(flush=False, **data_of(k))


def strip_index(folder: Path) -> None:
    """``folder`` as trajstore before the episode index wrote it: no ``.idx`` file, no ``"index"`` key."""
    meta = json.loads((folder / "trajstore.json").read_text())
    meta["episodes"]["log"].pop("index", None)
    (folder / "trajstore.json").write_text(json.dumps(meta, indent=1))
    for p in folder.glob("episodes.*.idx"):
        p.unlink()


def child(config: dict) -> dict:
    out = Path(config["out"])
    out.mkdir(parents=True, exist_ok=True)
    n = config["episodes"]
    res: dict = {"episodes": n}
    if config["check"]:
        a, b = out / "check-api", out / "check-gen"
        through_api(a, 300)
        generate(b, 300)
        same = (a / "episodes.000000.log").read_bytes() == (b / "episodes.000000.log").read_bytes()
        if not same:
            raise SystemExit("the generator's episode log differs from the one end_episode writes")
        res["check"] = "generator log == end_episode log (300 episodes)"
    folder = out / "rb"
    t = time.perf_counter()
    generate(folder, n)
    res["generate_s"] = time.perf_counter() - t
    res["log_mib"] = (folder / "episodes.000000.log").stat().st_size / 2 ** 20
    old = out / "old"
    shutil.copytree(folder, old)
    first = run_measure({"path": str(folder), "read_only": False, "n": n, "select": False})
    res["first_rw_open_s"] = first["open_s"]
    res["has_index"] = any(folder.glob("episodes.*.idx"))
    res["ro"] = [run_measure({"path": str(folder), "read_only": True, "n": n}) for _ in range(config["rounds"])]
    res["rw"] = [run_measure({"path": str(folder), "read_only": False, "n": n}) for _ in range(config["rounds"])]
    if res["has_index"]:
        strip_index(old)
        res["old_ro"] = [run_measure({"path": str(old), "read_only": True, "n": n})
                         for _ in range(config["rounds"])]
    return res


def run_measure(config: dict) -> dict:
    proc = subprocess.run([sys.executable, __file__, MEASURE, json.dumps(config)], capture_output=True, text=True,
                          timeout=1800)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"measure failed: {proc.stderr.strip()[-2000:]}")
    return json.loads(lines[-1])


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20


def measure(config: dict) -> dict:
    import warnings

    from trajstore.replay_buffer import ReplayBuffer
    from trajstore.replay_buffer.episode_query import parse_selection

    n = config["n"]
    base = rss_mib()
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rb = ReplayBuffer.load_from(config["path"], read_only=config["read_only"])
    t1 = time.perf_counter()
    count = len(rb.episodes)
    t2 = time.perf_counter()
    last = rb.episodes[-1].data
    t3 = time.perf_counter()
    res = {"open_s": t1 - t0, "len_s": t2 - t1, "last_data_s": t3 - t2, "rss_base_mib": base,
           "rss_open_mib": rss_mib() - base}
    first, final = rb.episode(0), rb.episode(-1)
    ok = (count == n and last == data_of(n - 1) and (first.id, first.start, first.stop) == (0, 0, 1)
          and (final.id, final.start, final.stop) == (n - 1, n - 1, n) and rb.episode(0).data == data_of(0))
    if config.get("select", True):
        t4 = time.perf_counter()
        selected = parse_selection(SELECTION).select(rb.episodes)
        res["select_s"] = time.perf_counter() - t4
        res["rss_select_mib"] = rss_mib() - base
        ok = ok and len(selected) == n - (n + 2) // 3 and selected[:2] == [1, 2]
    rb.close()
    if not ok:
        raise SystemExit(f"wrong values read: {count} episodes, last {last!r}, first {first!r}, final {final!r}")
    return res


# -- the report ------------------------------------------------------------------------------
def report(args: argparse.Namespace, results: dict[str, dict]) -> None:
    print(f"\n{args.episodes:,} one-step episodes; median of {args.rounds} fresh processes each; "
          f"RSS in MiB above the imports")
    rows = []
    base = next((r for r in results.values() if "failed" not in r), None)
    for label, res in results.items():
        if "failed" in res:
            rows.append([label, f"failed: {res['failed']}"])
            continue
        for kind in ("ro", "rw", "old_ro"):
            runs = res.get(kind)
            if not runs:
                continue
            med = {k: hx.median([r[k] for r in runs]) for k in runs[0]}
            ref = hx.median([r["open_s"] for r in base[kind if kind != "old_ro" else "ro"]]) if base else None
            rows.append([f"{label} {kind.replace('_', ' ')}", med["open_s"], hx.spread([r["open_s"] for r in runs]),
                         hx.ratio(med["open_s"], ref), med["len_s"], med["last_data_s"], med["select_s"],
                         med["rss_open_mib"], med["rss_select_mib"]])
    print(hx.table(["source open", "open s", "spread", "vs first", "len s", "[-1].data s", "select s",
                    "RSS open", "RSS select"], rows))
    for label, res in results.items():
        if "failed" not in res:
            print(f"{label}: log {res['log_mib']:.1f} MiB, generated in {res['generate_s']:.1f} s, first writable "
                  f"open {res['first_rw_open_s']:.2f} s (index {'built' if res['has_index'] else 'none'}); "
                  f"{res.get('check', 'no check')}")


if __name__ == "__main__":
    main()
