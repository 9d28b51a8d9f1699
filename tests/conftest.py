"""Fixtures shared by test folders."""

import os

import pytest


@pytest.fixture(scope="session")
def local_ray():
    """One local Ray for the session (2 CPUs, no dashboard, no progress bars); shut down at its end."""
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install trajstore[ray]; CI installs it)")
    os.environ.setdefault("RAY_DISABLE_IMPORT_WARNING", "1")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    from ray.data import DataContext

    DataContext.get_current().enable_progress_bars = False
    yield ray
    ray.shutdown()
