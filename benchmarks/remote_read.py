"""Reading a buffer from an S3 endpoint next to reading it from local disk.

The buffer: ``--steps`` (3000) steps in episodes of 100, one 96x96 RGB camera as JPEG (the
defaults: quality 90, 4:4:4) and a low-dimensional state (8,) and action (2,) (HDF5), built twice:
with 1 MiB and with 64 MiB (the default) image chunk files. Each is pushed (``trajstore.remote.push``)
to moto's S3 server, run as a separate process on a free loopback port (so its request handling
does not share this process's GIL), and opened with ``ReplayBuffer.load_from("s3://...")``.

Measured per chunk size, local folder vs the S3 endpoint (the same seeded draws on both):

* random batch: ``rb.sample(256)``, ms per batch (median of ``--batches``);
* window batch: ``rb.sample_windows(64, delta_indices={"observation": [-1, 0], "action": range(16)})``;
* GETs per batch: requests the remote buffer sent (its payload source's count); it must not grow
  with the chunk size: frames are ranged reads of their own bytes, close ones merged;
* MB per batch: bytes those requests returned (frames plus the gaps merged requests read);
* open: ``load_from`` of the URL (manifest and small files, one time per process).

moto keeps objects in memory and answers on loopback, in Python: the times show its request
overhead, not a network's. Its time per ranged GET also grows with the object's size (it copies
the object for each request: the last rows time a 4 KB ranged GET of a 1 MiB and of a 64 MiB
object; 13 vs 63 ms measured), which S3 does not do; so compare chunk sizes by GETs and bytes per
batch, which carry over to S3, not by moto's milliseconds.

Run: ``python benchmarks/remote_read.py [--steps 3000] [--batches 20]`` (needs the ``remote`` extra
and ``moto[server]``).
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

from trajstore.remote import push
from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

SPACE = DictSpace({
    "observation": DictSpace({
        "pixels": BoxSpace(0, 255, (96, 96, 3), np.uint8, metadata={"kind": "image", "layout": "HWC", "fps": 10}),
        "state": BoxSpace(-10, 10, (8,), np.float32)}),
    "action": BoxSpace(-1, 1, (2,), np.float32),
})
WINDOWS = {"observation": [-1, 0], "action": range(16)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_moto() -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            urllib.request.urlopen(url + "/moto-api/", timeout=1)
            return proc, url
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("moto server did not start")


def build(path: Path, steps: int, chunk_bytes: int) -> None:
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:96, 0:96]
    kwargs = dict_storage_kwargs_from_space(SPACE, kind_kwargs={"image": {"chunk_bytes": chunk_bytes}})
    with ReplayBuffer.create(DictStorage, SPACE, cache_path=path, **kwargs) as rb:
        for start in range(0, steps, 100):
            n = min(100, steps - start)
            t = np.arange(start, start + n)[:, None, None]
            pixels = np.stack([(x * 2 + t) % 256, (y * 2 + 3 * t) % 256, (x + y + t) % 256], -1).astype(np.uint8)
            rb.extend({"observation": {"pixels": pixels, "state": rng.uniform(-1, 1, (n, 8)).astype(np.float32)},
                       "action": rng.uniform(-1, 1, (n, 2)).astype(np.float32)})
            rb.end_episode()


def timed(fn, batches: int) -> float:
    times = []
    for k in range(batches):
        t0 = time.perf_counter()
        fn(k)
        times.append(time.perf_counter() - t0)
    return float(np.median(times)) * 1e3


def measure(rb: ReplayBuffer, batches: int) -> dict[str, float]:
    source = rb.payload_source
    out = {}
    for name, fn in (("random 256", lambda k: rb.sample(256, rng=np.random.default_rng(k))),
                     ("windows 64", lambda k: rb.sample_windows(64, delta_indices=WINDOWS,
                                                                rng=np.random.default_rng(k)))):
        fn(0)  # warm-up: the first read opens descriptors and the pools
        before = (source.requests, source.bytes_fetched) if source else (0, 0)
        out[name] = timed(fn, batches)
        out[name + " GETs"] = ((source.requests - before[0]) / batches) if source else 0.0
        out[name + " MB"] = ((source.bytes_fetched - before[1]) / batches / 1e6) if source else 0.0
    return out


def ranged_get_ms(fs, size: int, repeat: int = 20) -> float:
    """ms per 4 KB ranged GET of a ``size``-byte object on the endpoint (moto's own cost)."""
    fs.pipe_file(f"bench/probe-{size}", np.random.default_rng(0).bytes(size))
    t0 = time.perf_counter()
    for i in range(repeat):
        fs.cat_file(f"bench/probe-{size}", start=4096 * i, end=4096 * (i + 1))
    return (time.perf_counter() - t0) / repeat * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--batches", type=int, default=20)
    args = parser.parse_args()
    proc, endpoint = start_moto()
    options = {"key": "bench", "secret": "bench", "client_kwargs": {"endpoint_url": endpoint,
                                                                     "region_name": "eu-west-1"}}
    try:
        import s3fs

        fs = s3fs.S3FileSystem(skip_instance_cache=True, **options)
        fs.mkdir("bench")
        probes = {size: ranged_get_ms(fs, size) for size in (2**20, 64 * 2**20)}
        rows = []
        with tempfile.TemporaryDirectory() as tmp:
            for chunk_bytes in (2**20, 64 * 2**20):
                folder = Path(tmp) / f"rb-{chunk_bytes}"
                build(folder, args.steps, chunk_bytes)
                url = f"s3://bench/rb-{chunk_bytes}"
                push(folder, url, options)
                with ReplayBuffer.load_from(folder) as local:
                    here = measure(local, args.batches)
                t0 = time.perf_counter()
                remote = ReplayBuffer.load_from(url, storage_options=options)
                opened = (time.perf_counter() - t0) * 1e3
                with remote:
                    there = measure(remote, args.batches)
                rows.append((chunk_bytes, here, there, opened))
        print(f"{args.steps} steps, 96x96 JPEG camera + state (8,) + action (2,); median of {args.batches} batches; "
              "S3 = moto server on loopback")
        print(f"{'chunk':>8} {'batch':>11} {'local ms':>9} {'S3 ms':>8} {'S3/local':>9} {'GETs/batch':>11} "
              f"{'MB/batch':>9}")
        for chunk_bytes, here, there, opened in rows:
            for name in ("random 256", "windows 64"):
                print(f"{chunk_bytes // 2**20:>6}Mi {name:>11} {here[name]:9.1f} {there[name]:8.1f} "
                      f"{there[name] / here[name]:9.1f} {there[name + ' GETs']:11.1f} {there[name + ' MB']:9.2f}")
            print(f"{chunk_bytes // 2**20:>6}Mi {'open':>11} {'':>9} {opened:8.1f}")
        for size, ms in probes.items():
            print(f"moto alone: a 4 KB ranged GET of a {size // 2**20} MiB object takes {ms:.1f} ms")
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
