"""Which extra of pyproject.toml brings each optional module the tests import, for skip messages.

A test that needs an optional library skips with pytest.importorskip; conftest.py adds
"(needs the X extra: pip install -e '.[X]')" to the reason, so a core-only run (make test-quick)
says what to install for the tests it left out.
"""

from __future__ import annotations

import re

EXTRA_OF_MODULE = {
    "av": "video",
    "torch": "torch",
    "pyarrow": "lerobot",
    "zarr": "zarr",
    "numcodecs": "zarr",
    "imagecodecs": "zarr",
    "ray": "ray",
    "fsspec": "remote",
    "s3fs": "remote",
    "moto": "dev",
    "rosbags": "ros",
    "gymnasium": "sim",
    "mujoco": "sim",
    "gym_pusht": "sim",
    "pygame": "sim",
    "google_crc32c": "rlds",
    "matplotlib": "preview",
    "playwright": "dev",
}

_MODULE_IN_REASON = re.compile(r"could not import '([\w.]+)'|No module named '([\w.]+)'")


def extra_hint(reason: str) -> str | None:
    """The hint to add to a skip ``reason`` naming a missing module, or None when it names none we know."""
    if "extra:" in reason:
        return None
    match = _MODULE_IN_REASON.search(reason)
    if match is None:
        return None
    module = (match.group(1) or match.group(2)).split(".")[0]
    extra = EXTRA_OF_MODULE.get(module)
    if extra is None:
        return None
    return f"(needs the {extra} extra: pip install -e '.[{extra}]'; make test installs every extra)"
