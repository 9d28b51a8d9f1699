"""A Diffusion-Policy-shaped training batch: trajstore sources side by side with LeRobot and TorchRL.

The workload (``benchmarks/peers/_workload.py``): 2048 steps in 16 episodes of 128, one step a
128x128x3 uint8 camera frame and four low-dim leaves. The batch (``peers/_windows.py``): 64
anchors drawn at random; camera and state (joint positions and velocities) at offsets ``[-1,
0]``, action at ``0 .. 15``, reward at the anchor; offsets outside the anchor's episode read its
edge step and are flagged in masks. Each contender writes the workload once in its own layout
(not timed), then, ``--rounds`` times (the order rotates every round), a fresh process opens it,
draws ``--check-batches`` batches in the first round (checked: each window's steps, the edge
padding, the masks and the frames; one batch, unchecked, as warm-up in later rounds) and times
``--batches`` more.

Contenders and what one batch is (see each ``peers/run_<library>.py``):

* trajstore, camera JPEG q75 (its default for image leaves) and PNG (lossless):
  ``rb.sample_windows(64, delta_indices={"observation": [-1, 0], "action": range(16)}, pad=True)``;
* LeRobot 0.4.4 with ``delta_timestamps`` (offsets / 10 Hz): ``default_collate([ds[i] for i in
  64 random indices])``, what ``DataLoader(ds, batch_size=64)`` does in one process; camera as
  ``video`` (AV1, LeRobot's default; decoded by PyAV, see ``peers/_lerobot_compat.py``) and as
  ``image`` (PNG inside the parquet files);
* TorchRL 0.14.1: ``SliceSampler`` slices of 17 steps (``span=(1, 1)``, ``strict_length=False``)
  from ``LazyMemmapStorage``, re-cut into the same windows with edge padding by a few lines of
  torch (timed with it): TorchRL has neither per-key offsets nor edge padding
  (``peers/_torchrl_windows.py`` says what differs);
* UniEnv has no window reads: listed as unsupported.

Reported: ``ms/batch``, the median of all timed batches of all rounds, and ``range`` (max - min of
the per-round medians over their median; other load on the machine widens it); ``open ms``; the
folder's ``MB``; the check (windows checked, how many were padded at the start / the end of an
episode, minimum frame PSNR, frames nearer their own step than any other within 3 steps); ratios
contender / the first trajstore row (> 1: slower). All reads come from the page cache, one process,
no DataLoader workers. No timing is asserted anywhere.

Run (the project's python; peers get venvs of their own under ``~/.cache/trajstore-peers``)::

    python benchmarks/window_batch.py [--src LABEL=DIR ...] [--rounds 3] [--batches 10]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))

import _harness as hx  # noqa: E402
import _windows as win  # noqa: E402
import _workload as wl  # noqa: E402

VARIANTS = {"trajstore": [("jpeg", "JPEG q75"), ("png", "PNG")], "lerobot": [("video", "video"), ("png", "PNG")]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    hx.add_arguments(ap)
    ap.add_argument("--rounds", type=int, default=3, help="fresh processes per contender (default 3)")
    ap.add_argument("--batches", type=int, default=10, help="timed batches per process (default 10)")
    ap.add_argument("--check-batches", type=int, default=8, help="checked batches in the first round (default 8)")
    args = ap.parse_args()
    cons = hx.contenders(args)
    work = hx.workdir(args, "windows-")
    try:
        rows = expand(cons)
        run(args, rows, work)
        report(args, rows)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def expand(cons: list[hx.Contender]) -> list[dict]:
    """One row per contender and camera variant."""
    rows = []
    for c in cons:
        kind = "trajstore" if c.label.startswith("trajstore") else c.label
        for variant, label in VARIANTS.get(kind, [("", "")]):
            rows.append({"label": f"{c.label} {label}".strip(), "con": c, "variant": variant, "runs": [],
                         "status": None if c.ok else c.status})
    return rows


def run(args: argparse.Namespace, rows: list[dict], work: Path) -> None:
    workload = wl.generate(work / "workload")
    for i, row in enumerate(rows):
        if row["status"]:
            continue
        row["path"] = work / f"data{i}"
        try:
            _, res = row["con"].run("windows", "--workload", str(workload), "--path", str(row["path"]), "--prepare",
                                    "--variant", row["variant"], timeout=1800)
        except hx.ContenderError as exc:
            row["status"] = f"failed: {exc}"
            continue
        if "unsupported" in res:
            row["status"] = f"unsupported: {res['unsupported']}"
            continue
        row["prepared"] = res
        print(f"{row['label']}: written ({res['prepare_s']:.1f} s)", file=sys.stderr, flush=True)
    for r in range(args.rounds):
        live = [row for row in rows if not row["status"]]
        k = r % max(1, len(live))
        for row in live[k:] + live[:k]:
            check = str(args.check_batches if r == 0 else 0)
            try:
                _, res = row["con"].run("windows", "--workload", str(workload), "--path", str(row["path"]),
                                        "--variant", row["variant"], "--batches", str(args.batches),
                                        "--check-batches", check, "--seed", str(r), timeout=1800)
            except hx.ContenderError as exc:
                row["status"] = f"failed: {exc}"
                continue
            row["runs"].append(res)
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)


def report(args: argparse.Namespace, rows: list[dict]) -> None:
    med = {}
    for row in rows:
        if row["runs"]:
            per_round = [statistics.median(x["batch_ms"]) for x in row["runs"]]
            med[row["label"]] = hx.median([t for x in row["runs"] for t in x["batch_ms"]])
            row["spread"] = hx.spread(per_round)
    base = med.get(rows[0]["label"]) if rows else None
    table = []
    for row in rows:
        if row["label"] not in med:
            table.append([row["label"], row["status"] or "no result"])
            continue
        ck = row["runs"][0].get("check", {})
        own = ck.get("frames_nearest_own", [0, 0])
        checked = ("ok" if ck.get("ok") else "WRONG") + f" {ck.get('windows', 0)} ({ck.get('left_padded', 0)}/"
        checked += f"{ck.get('right_padded', 0)})"
        table.append([row["label"], med[row["label"]], row["spread"], hx.median([x["open_ms"] for x in row["runs"]]),
                      row["prepared"]["bytes"] / 1e6, checked, hx.fmt(ck.get("psnr_min")),
                      f"{own[0]}/{own[1]}", hx.ratio(med[row["label"]], base), row["prepared"]["camera"]])
    print(f"\nA Diffusion-Policy-shaped batch: {win.BATCH} anchors, camera + state at {list(win.OBS_OFFSETS)}, "
          f"action at {win.ACTION_OFFSETS[0]}..{win.ACTION_OFFSETS[-1]}, edge-padded with masks; "
          f"{wl.STEPS} steps in {wl.STEPS // wl.EPISODE_LEN} episodes of {wl.EPISODE_LEN}; "
          f"{args.rounds} rounds x {args.batches} batches, alternating; ratios vs {rows[0]['label'] if rows else '-'}")
    print(hx.table(["contender", "ms/batch", "range", "open ms", "MB", "check: windows (padded start/end)",
                    "PSNR min dB", "frames nearest own", "ratio", "camera"], table))
    for row in rows:
        problems = row["runs"][0].get("check", {}).get("problems") if row["runs"] else None
        if problems:
            print(f"  {row['label']}: {'; '.join(problems)}")
        if row["runs"] and row["status"]:
            print(f"  {row['label']}: a later round {row['status']}")


if __name__ == "__main__":
    main()
