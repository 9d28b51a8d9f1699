"""Virtual environments for the peers that benchmarks compare trajstore with.

Each peer runs in a venv of its own under ``~/.cache/trajstore-peers/<name>`` (or
``$TRAJSTORE_PEERS_DIR/<name>``), never in the project's venv: TorchRL would replace the CPU
torch there. :func:`peer_python` creates the venv on first use and returns its python, or the
reason the peer cannot be had; the harness then prints ``unavailable: <reason>`` for it.

Creation is idempotent: a stamp file in the venv records the spec it was built from, and a venv
whose stamp matches and whose imports work is reused as is. A failed build is removed, so the
next run tries again (a missing package is refused by pip within seconds).

torch is pinned: the only torch wheel that must be installed is the CPU build lying on this
machine's disk (pip's ``find-links`` folders). Any other torch version pulls a multi-GB CUDA
build, so torch is installed first, from that file, and every later ``pip install`` in the venv
gets a constraints file with the same pin.

Run ``python benchmarks/peers/_venvs.py [NAME ...]`` to build (or check) the venvs ahead of a
benchmark; it prints each peer's python or its reason.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

TORCH_VERSION = "2.13.0"


@dataclasses.dataclass(frozen=True)
class PeerSpec:
    """What a peer venv holds: a pinned torch (or none), the packages, and an import check."""

    packages: tuple[str, ...]
    check: str  # python code run in the venv; it must exit 0 once the install is complete
    torch: str | None = None  # the torch version installed first, from a local CPU wheel
    # later ``pip install`` calls, each its own argument list (e.g. ``--no-deps`` for a package whose
    # declared requirements would replace the pinned torch)
    more: tuple[tuple[str, ...], ...] = ()
    no_deps: bool = False  # install ``packages`` without their declared requirements

    def stamp(self) -> dict:
        stamp = {"packages": list(self.packages), "torch": self.torch, "check": self.check}
        if self.more or self.no_deps:  # absent otherwise, so venvs built before these fields stay valid
            stamp.update(more=[list(m) for m in self.more], no_deps=self.no_deps)
        return stamp


PEERS: dict[str, PeerSpec] = {
    # UniEnv's default non-image storage (HDF5Storage) needs h5py, an optional dependency of the package.
    "unienv": PeerSpec(
        packages=("unienv==0.0.1b16", "h5py"),
        check="import unienv_data.replay_buffer, unienv_data.storages, unienv_interface.space, h5py, PIL"),
    "torchrl": PeerSpec(
        packages=("torchrl==0.14.1", "tensordict<0.15"),
        torch=TORCH_VERSION,
        check=("import torch, torchrl, tensordict; assert torch.__version__.split('+')[0] == '%s', torch.__version__; "
               "assert torch.version.cuda is None, 'torch is a CUDA build'" % TORCH_VERSION)),
    # LeRobot 0.4.4 pins torch<2.11 (a CUDA build here): it goes in with --no-deps, then its runtime
    # requirements under the torch pin, then a torchvision whose compiled ops are never called
    # (see shared/reference/lerobot-offline.md; the scripts that import lerobot patch around them).
    "lerobot": PeerSpec(
        packages=("lerobot==0.4.4",),
        torch=TORCH_VERSION,
        more=(("datasets>=4.0.0,<5.0.0", "huggingface-hub>=0.34.2,<0.36.0", "av>=15.0.0,<16.0.0",
               "jsonlines>=4,<5", "packaging>=24.2,<26.0", "draccus==0.10.0", "gymnasium>=1.1.1,<2.0.0",
               "deepdiff>=7.0.1,<9.0.0", "imageio[ffmpeg]>=2.34.0,<3.0.0", "termcolor>=2.4.0,<4.0.0",
               "einops>=0.8.0,<0.9.0", "opencv-python-headless>=4.9.0,<4.13.0", "pyserial>=3.5,<4.0",
               "setuptools>=71.0.0,<81.0.0"),
              ("--no-deps", "torchvision==0.28.0"),
              ("accelerate>=1.10.0,<2.0.0",)),
        no_deps=True,
        check=("import torch, lerobot, datasets, av, pyarrow; "
               "assert torch.__version__.split('+')[0] == '%s', torch.__version__" % TORCH_VERSION)),
    # robomimic 0.3.0 declares a long list of requirements (egl_probe, tensorboard, torchvision, ...) that its
    # dataset reader never imports: it goes in with --no-deps, then only what robomimic.utils.dataset and
    # robomimic.utils.obs_utils import (h5py, numpy, tqdm, termcolor) under the torch pin. Used by
    # interop/robomimic_check.py to read trajstore's robomimic exports with robomimic's own SequenceDataset.
    "robomimic": PeerSpec(
        packages=("robomimic==0.3.0",),
        torch=TORCH_VERSION,
        more=(("h5py", "numpy", "tqdm", "termcolor"),),
        no_deps=True,
        check=("import torch, h5py, numpy, robomimic, robomimic.utils.obs_utils; "
               "from robomimic.utils.dataset import SequenceDataset; "
               "assert robomimic.__version__ == '0.3.0', robomimic.__version__; "
               "assert torch.__version__.split('+')[0] == '%s', torch.__version__" % TORCH_VERSION)),
    # tfrecord 1.14.6 (a pure-Python TFRecord / tf.train.Example reader over protobuf; its torch dataset classes
    # are not imported, so no torch): the format's reader a user would take without TensorFlow. Used by
    # benchmarks/format_imports.py against trajstore's own RLDS record reader; crc32c for its CRC checks.
    "tfrecord": PeerSpec(
        packages=("tfrecord==1.14.6", "protobuf", "crc32c", "numpy", "pillow"),
        check=("import tfrecord, tfrecord.reader, crc32c, numpy, PIL, google.protobuf, importlib.metadata as m; "
               "assert m.version('tfrecord') == '1.14.6', m.version('tfrecord')")),
    # lerobot-lancedb 0.3.1 (LanceDB's converter and LanceDBDataset loader) declares lerobot>=0.6, which
    # needs Python >= 3.12 and a torch < 2.12 (CUDA builds here): it goes in with --no-deps beside
    # LeRobot 0.4.4 installed as in the ``lerobot`` venv, plus lancedb with pylance. The modules the
    # package takes from lerobot 0.6, and torchcodec (no FFmpeg shared libraries here), are supplied by
    # benchmarks/training/_lancedb_compat.py when a script imports it.
    "lancedb": PeerSpec(
        packages=("lerobot-lancedb==0.3.1", "lerobot==0.4.4"),
        torch=TORCH_VERSION,
        more=(("datasets>=4.0.0,<5.0.0", "huggingface-hub>=0.34.2,<0.36.0", "av>=15.0.0,<16.0.0",
               "jsonlines>=4,<5", "packaging>=24.2,<26.0", "draccus==0.10.0", "gymnasium>=1.1.1,<2.0.0",
               "deepdiff>=7.0.1,<9.0.0", "imageio[ffmpeg]>=2.34.0,<3.0.0", "termcolor>=2.4.0,<4.0.0",
               "einops>=0.8.0,<0.9.0", "opencv-python-headless>=4.9.0,<4.13.0", "pyserial>=3.5,<4.0",
               "setuptools>=71.0.0,<81.0.0"),
              ("--no-deps", "torchvision==0.28.0"),
              ("accelerate>=1.10.0,<2.0.0",),
              ("lancedb[pylance]==0.40.0", "pyarrow>=17.0.0")),
        no_deps=True,
        check=("import torch, lerobot, lancedb, lance, av, pyarrow, importlib.metadata as m; "
               "from lancedb.permutation import Permutation; "
               "assert m.version('lerobot-lancedb') == '0.3.1', m.version('lerobot-lancedb'); "
               "assert torch.__version__.split('+')[0] == '%s', torch.__version__" % TORCH_VERSION)),
}

STAMP = ".trajstore-peer.json"


def peers_root() -> Path:
    return Path(os.environ.get("TRAJSTORE_PEERS_DIR", Path.home() / ".cache" / "trajstore-peers"))


def _base_python() -> str:
    """A python that can make venvs: the interpreter behind the running one (which may itself be a venv)."""
    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    return str(base) if base.exists() else sys.executable


def _find_links_dirs() -> list[Path]:
    """Folders pip searches for local wheels (``PIP_FIND_LINKS`` and pip's configured ``find-links``)."""
    values = os.environ.get("PIP_FIND_LINKS", "").split()
    try:
        out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                             timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    for line in out.splitlines():
        key, _, value = line.partition("=")
        if key.strip().endswith("find-links"):
            values += value.strip().strip("'\"").split()
    dirs = []
    for v in values:
        p = Path(v.removeprefix("file://"))
        if p.is_dir() and p not in dirs:
            dirs.append(p)
    return dirs


def _local_torch_wheel(version: str) -> Path | None:
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    for d in _find_links_dirs():
        for whl in sorted(d.glob(f"torch-{version}+cpu-{tag}-*.whl")):
            return whl
    return None


def _run(cmd: list[str], log: Path) -> str | None:
    """Run ``cmd``, appending its output to ``log``; the last lines of its output on failure, else None."""
    with open(log, "a") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        try:
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1800)
        except subprocess.TimeoutExpired:
            f.write("timed out\n")
            return f"`{' '.join(cmd[2:5])} ...` timed out after 30 min"
        f.write(proc.stdout)
    if proc.returncode != 0:
        lines = [ln for ln in proc.stdout.splitlines() if ln.strip() and not ln.startswith("WARNING")]
        errors = [ln for ln in lines if "ERROR" in ln or "Error" in ln]
        return "; ".join((errors or lines)[-2:])[:400] or f"exit code {proc.returncode}"
    return None


def _check(python: Path, spec: PeerSpec) -> str | None:
    proc = subprocess.run([str(python), "-c", spec.check], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        return (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1][:400]
    return None


def _build(venv: Path, spec: PeerSpec) -> str | None:
    """Create the venv and install the spec; the reason it failed, or None."""
    if venv.exists():
        shutil.rmtree(venv)
    venv.parent.mkdir(parents=True, exist_ok=True)
    log = venv.parent / f"{venv.name}.log"
    log.write_text("")
    err = _run([_base_python(), "-m", "venv", str(venv)], log)
    if err:
        return f"cannot create a venv: {err}"
    py = venv / "bin" / "python"
    pip = [str(py), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    if spec.torch is not None:
        wheel = _local_torch_wheel(spec.torch)
        if wheel is None:
            return (f"no local CPU wheel torch-{spec.torch}+cpu in pip's find-links folders "
                    f"({', '.join(map(str, _find_links_dirs())) or 'none configured'}); "
                    "any other torch would be a multi-GB CUDA build")
        err = _run(pip + [str(wheel)], log)
        if err:
            return f"installing {wheel.name}: {err}"
        constraints = venv / "constraints.txt"
        constraints.write_text(f"torch=={spec.torch}\n")
        pip += ["-c", str(constraints)]
    err = _run(pip + (["--no-deps"] if spec.no_deps else []) + list(spec.packages), log)
    if err:
        return f"pip install {' '.join(spec.packages)}: {err}"
    for args in spec.more:
        err = _run(pip + list(args), log)
        if err:
            return f"pip install {' '.join(args)}: {err}"
    err = _check(py, spec)
    if err:
        return f"installed, but the import check fails: {err}"
    (venv / STAMP).write_text(json.dumps(spec.stamp()))
    return None


def peer_python(name: str, *, create: bool = True) -> tuple[Path | None, str | None]:
    """``(python, None)`` for a ready venv of peer ``name``, else ``(None, reason)``.

    Builds the venv if it is missing or was built from another spec (``create=False`` only looks).
    """
    spec = PEERS.get(name)
    if spec is None:
        return None, f"unknown peer {name!r} (known: {', '.join(PEERS)})"
    venv = peers_root() / name
    py = venv / "bin" / "python"
    stamp = venv / STAMP
    if py.exists() and stamp.exists():
        try:
            same = json.loads(stamp.read_text()) == spec.stamp()
        except ValueError:
            same = False
        if same and _check(py, spec) is None:
            return py, None
    if not create:
        return None, f"no venv at {venv} (build it with benchmarks/peers/_venvs.py {name})"
    err = _build(venv, spec)
    if err is not None:
        shutil.rmtree(venv, ignore_errors=True)
        return None, err
    return py, None


def main() -> None:
    names = sys.argv[1:] or list(PEERS)
    for name in names:
        py, reason = peer_python(name)
        print(f"{name}: {py}" if py else f"{name}: unavailable: {reason}", flush=True)


if __name__ == "__main__":
    main()
