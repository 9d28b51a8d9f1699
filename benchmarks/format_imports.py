"""Format importers against the formats' own readers: RLDS (TFRecord) and robomimic (HDF5), one run, ratios.

Data (``format_imports_data.py``, written once per run): an RLDS dataset of ``--rlds-episodes`` x
``--rlds-steps`` steps (64x64 PNG frames, state (8,), action (7,), 4 shards, masked CRC32C) and a
robomimic-layout file of ``--demos`` x ``--demo-steps`` samples (two 84x84 cameras, gzip).

Rows (each a fresh process, ``format_imports_run.py``; best of ``--repeat`` where it says so):

* **rlds parse** (best of 5 or ``--repeat``): records (episodes) framed, CRC-checked and parsed into
  features, no image decode.
  trajstore: ``_tfrecord.iter_records`` + ``_example.parse_example`` (CRC32C from google_crc32c when the
  ``rlds`` extra is in). tfrecord 1.14.6 (its own venv, the ``tfrecord`` peer): ``example_loader`` as
  shipped, which reads the CRC words without checking them, and the same parse with both CRCs of every
  record checked by hand (crc32c package). Reference: tfrecord with CRC.
* **rlds import**: ``import_rlds(camera=png|jpeg)`` (parse, PNG decode, storage in a new buffer folder)
  against tfrecord + Pillow decoding every episode into numpy arrays (no storage). Reference: tfrecord + Pillow.
* **robomimic load**: ``import_robomimic(camera=jpeg|png)`` against robomimic 0.3.0's ``SequenceDataset``
  construction (``seq_length 16, frame_stack 2``, ``load_next_obs=False``) with ``hdf5_cache_mode="all"``
  (reads every demo into RAM and then builds every item: memory grows with samples x 17 frames) and
  ``"low_dim"``. Reference: robomimic ``all``.
* **robomimic read**: batches of ``--batch`` windows of 17 steps (both cameras, uint8 HWC): trajstore
  ``rb.sample_windows(B, 17)`` over each imported buffer, robomimic ``SequenceDataset.__getitem__`` through a
  torch ``DataLoader(num_workers=0)`` (samples drawn uniformly with replacement, like ``sample_windows``; one torch thread).
  Best of ``--repeat`` rounds of ``--batches`` after 2 warm-up batches. Reference: robomimic ``all``.

Columns: items (records, steps or samples), best seconds, items/s, MB/s (source bytes / s, for parse
rows), peak RSS of the process, and ``x ref``: the row's items/s over its case's reference row (> 1: faster
than the format's reader). The machine's other load makes single figures noisy: compare the ratios of one
run.

Run: ``python benchmarks/format_imports.py [--quick] [--no-install] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))
sys.path.insert(0, str(HERE))

import _harness as hx  # noqa: E402
import _venvs  # noqa: E402
import format_imports_data as data  # noqa: E402

RUN = HERE / "format_imports_run.py"
HEADER = ("case", "contender", "items", "seconds", "items/s", "MB/s", "peak RSS MB", "x ref")
FULL = {"rlds_episodes": 200, "rlds_steps": 100, "demos": 16, "demo_steps": 150, "batches": 30, "repeat": 3}
QUICK = {"rlds_episodes": 16, "rlds_steps": 40, "demos": 4, "demo_steps": 60, "batches": 4, "repeat": 1}


@dataclasses.dataclass
class Row:
    case: str
    contender: str
    result: dict | None = None
    status: str | None = None  # why the row has no figures
    nbytes: int | None = None  # source bytes, for MB/s
    reference: bool = False

    @property
    def rate(self) -> float | None:
        if not self.result:
            return None
        items = self.result.get("records") or self.result.get("steps") or self.result.get("samples")
        return items / self.result["seconds"] if self.result["seconds"] > 0 else None

    def cells(self, ref: Row | None) -> list:
        if self.result is None:
            return [f"{self.case}: {self.contender}", self.status or "not run"]
        r = self.result
        items = r.get("records") or r.get("steps") or r.get("samples")
        mbs = self.nbytes / r["seconds"] / 1e6 if self.nbytes else None
        return [self.case, self.contender, str(items), r["seconds"], self.rate, mbs, r["peak_rss_mb"],
                "ref" if self.reference else hx.ratio(self.rate, ref.rate if ref else None)]


def _pythons(args: argparse.Namespace) -> dict[str, tuple[Path | None, str | None]]:
    out: dict[str, tuple[Path | None, str | None]] = {"trajstore": (args.python, None)}
    for peer in ("tfrecord", "robomimic"):
        print(f"peer {peer}: preparing its venv ...", file=sys.stderr, flush=True)
        out[peer] = _venvs.peer_python(peer, create=not args.no_install)
    return out


def _run(pythons: dict, who: str, job: str, cfg: dict, row: Row, timeout: float) -> Row:
    py, reason = pythons[who]
    if reason:
        row.status = f"unavailable: {reason}"
        return row
    env = hx.base_env()
    if who == "trajstore":
        env.update(PYTHONPATH=str(args_src), TRAJSTORE_SRC=str(args_src))
    con = hx.Contender(row.contender, RUN, py, env)
    try:
        _, row.result = con.run(job, json.dumps(cfg), timeout=timeout)
    except hx.ContenderError as exc:
        row.status = f"failed: {exc}"
    print(f"{row.case} / {row.contender}: {'done' if row.result else row.status}", file=sys.stderr, flush=True)
    return row


args_src: Path = hx.REPO_SRC


def measure(args: argparse.Namespace, work: Path) -> list[Row]:
    sizes = QUICK if args.quick else FULL
    for k in sizes:
        if getattr(args, k, None) is None:
            setattr(args, k, sizes[k])
    pythons = _pythons(args)
    print(f"writing RLDS {args.rlds_episodes}x{args.rlds_steps} and robomimic {args.demos}x{args.demo_steps} ...",
          file=sys.stderr, flush=True)
    rlds = data.rlds_dataset(work / "rlds" / "1.0.0", args.rlds_episodes, args.rlds_steps)
    shards = [str(p) for p in data.rlds_shards(rlds)]
    rlds_bytes = sum(Path(p).stat().st_size for p in shards)
    h5 = data.robomimic_file(work / "robomimic.hdf5", args.demos, args.demo_steps)
    rep, t = args.repeat, args.timeout
    rows: list[Row] = []

    # RLDS
    parse = {"shards": shards, "repeat": max(5, rep)}  # cheap; the first pass also pays for imports
    rows.append(_run(pythons, "trajstore", "ts-rlds-parse", parse, Row("rlds parse", "trajstore (CRC)",
                                                                         nbytes=rlds_bytes), t))
    rows.append(_run(pythons, "tfrecord", "tfrecord-parse", dict(parse, crc=False),
                     Row("rlds parse", "tfrecord 1.14.6 (no CRC)", nbytes=rlds_bytes), t))
    rows.append(_run(pythons, "tfrecord", "tfrecord-parse", dict(parse, crc=True),
                     Row("rlds parse", "tfrecord 1.14.6 + CRC", nbytes=rlds_bytes, reference=True), t))
    imp_rep = max(1, rep // 2)
    for camera in ("png", "jpeg"):
        rows.append(_run(pythons, "trajstore", "ts-rlds-import",
                         {"src": str(rlds), "out": str(work / f"rlds-rb-{camera}"), "camera": camera,
                          "repeat": imp_rep},
                         Row("rlds import", f"import_rlds camera={camera}", nbytes=rlds_bytes), t))
        shutil.rmtree(work / f"rlds-rb-{camera}", ignore_errors=True)
    rows.append(_run(pythons, "tfrecord", "tfrecord-decode", {"shards": shards, "repeat": imp_rep},
                     Row("rlds import", "tfrecord + Pillow to numpy", nbytes=rlds_bytes, reference=True), t))

    # robomimic
    h5_bytes = h5.stat().st_size
    for camera in ("jpeg", "png"):
        rows.append(_run(pythons, "trajstore", "ts-robomimic-import",
                         {"src": str(h5), "out": str(work / f"rm-rb-{camera}"), "camera": camera, "repeat": imp_rep,
                          "keep_out": True},
                         Row("robomimic load", f"import_robomimic camera={camera}", nbytes=h5_bytes), t))
    seq = {"src": str(h5), "low_dim": list(data.LOW_DIM), "rgb": list(data.CAMERAS), "seq_length": 16,
           "frame_stack": 2}
    for cache in ("all", "low_dim"):
        rows.append(_run(pythons, "robomimic", "robomimic-load", dict(seq, cache=cache),
                         Row("robomimic load", f"robomimic 0.3.0 cache={cache}", nbytes=h5_bytes,
                             reference=cache == "all"), t))
    read = {"batch": args.batch, "batches": args.batches, "warmup": 2, "repeat": rep}
    for camera in ("jpeg", "png"):
        rb = work / f"rm-rb-{camera}"
        if rb.exists():
            rows.append(_run(pythons, "trajstore", "ts-robomimic-read", dict(read, rb=str(rb), window=17),
                             Row("robomimic read", f"sample_windows camera={camera}"), t))
        else:
            rows.append(Row("robomimic read", f"sample_windows camera={camera}", status="no buffer (import failed)"))
    for cache in ("all", "low_dim"):
        rows.append(_run(pythons, "robomimic", "robomimic-read", {**seq, **read, "cache": cache},
                         Row("robomimic read", f"SequenceDataset cache={cache}", reference=cache == "all"), t))
    return rows


def render(rows: list[Row]) -> str:
    refs = {r.case: r for r in rows if r.reference}
    return hx.table(HEADER, [r.cells(refs.get(r.case)) for r in rows])


def markdown(rows: list[Row]) -> str:
    refs = {r.case: r for r in rows if r.reference}
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for r in rows:
        cells = r.cells(refs.get(r.case))
        if len(cells) < len(HEADER):
            cells = [r.case, r.contender, cells[1]] + [""] * (len(HEADER) - 3)
        lines.append("| " + " | ".join(c if isinstance(c, str) else hx.fmt(c) for c in cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[Row]:
    global args_src
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small data, one repeat (a smoke run)")
    ap.add_argument("--rlds-episodes", type=int)
    ap.add_argument("--rlds-steps", type=int)
    ap.add_argument("--demos", type=int)
    ap.add_argument("--demo-steps", type=int)
    ap.add_argument("--batch", type=int, default=32, help="windows per read batch")
    ap.add_argument("--batches", type=int, help="timed read batches")
    ap.add_argument("--repeat", type=int, help="best of this many runs (reads; parse at least 5; imports half)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds one measurement may take")
    ap.add_argument("--python", type=Path, default=Path(sys.executable), help="the python that runs trajstore")
    ap.add_argument("--src", type=lambda v: hx.parse_src(v)[1], default=hx.REPO_SRC,
                    help="the trajstore source tree (default: this checkout's src)")
    ap.add_argument("--no-install", action="store_true", help="use peer venvs that exist; never build one")
    ap.add_argument("--workdir", type=Path, help="where data and buffers go (default: a new folder, removed)")
    ap.add_argument("--keep", action="store_true", help="keep the workdir")
    ap.add_argument("--markdown", action="store_true", help="print the table as markdown too")
    args = ap.parse_args(argv)
    args_src = args.src
    sys.path.insert(0, str(args.src))  # the data writer uses the project's test encoder (and its CRC32C)
    work = hx.workdir(args, "format-imports-")
    try:
        rows = measure(args, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"RLDS {args.rlds_episodes} episodes x {args.rlds_steps} steps (64x64 PNG); robomimic {args.demos} "
          f"demos x {args.demo_steps} steps (2 cameras 84x84, gzip); read batches {args.batch} x 17 steps, "
          f"{args.batches} timed; x ref: items/s over the case's ref row (> 1: faster)")
    print(render(rows))
    if args.markdown:
        print()
        print(markdown(rows))
    return rows


if __name__ == "__main__":
    main()
