"""Is a storage's ``data.h5`` shorter than HDF5's own record of it? A check for ``trajstore verify``
(:mod:`~trajstore.ops.verify`), which the buffer's SWMR readers cannot make themselves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["chunks_past_end", "hdf5_truncated"]


def hdf5_truncated(folder: Path) -> str | None:
    """Why ``data.h5`` is shorter than HDF5's own record of its end, or ``None``.

    trajstore's readers open in SWMR mode, which skips HDF5's end-of-file check: a read past the end
    then returns zeros or retries for minutes. A plain (non-SWMR) read-only open makes that check; a
    file a writer has open (or died with open) refuses such an open, and then the stored chunks are
    compared with the file size instead.
    """
    import h5py

    from trajstore.storages.hdf5 import DATA_FILE

    path = folder / DATA_FILE
    if not path.is_file():
        return None  # the storage's own open names the missing file
    try:
        h5py.File(path, "r", libver=("earliest", "v110"), locking=False).close()
        return None
    except OSError as exc:
        if "truncated file" in str(exc):
            return f"{DATA_FILE} is truncated: {' '.join(str(exc).split())}"
    return chunks_past_end(path)


def chunks_past_end(path: Path) -> str | None:
    """Why a ``data.h5`` open by a writer (or left by one) is truncated: a chunk past its end, or ``None``."""
    import h5py

    size = path.stat().st_size
    found: list[str] = []

    def visit(name: str, obj: Any) -> None:
        if found or not isinstance(obj, h5py.Dataset) or obj.chunks is None:
            return
        ds = obj.id
        for i in range(ds.get_num_chunks()):
            c = ds.get_chunk_info(i)
            if c.byte_offset + c.size > size:
                found.append(f"{path.name} is truncated ({size:,} bytes): dataset {name!r} has a chunk at byte "
                             f"{c.byte_offset:,} past its end")
                return

    try:
        with h5py.File(path, "r", swmr=True, libver=("v110", "v110"), locking=False) as f:
            f.visititems(visit)
    except OSError:
        return None  # the storage's own open reports it
    return found[0] if found else None
