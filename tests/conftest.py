"""Fixtures shared by test folders."""

import os

import pytest

from tests.extras import extra_hint


def _add_extra_hint(report) -> None:
    """Append which extra brings the missing module to an importorskip's skip reason."""
    if not report.skipped or not isinstance(report.longrepr, tuple) or len(report.longrepr) != 3:
        return
    path, lineno, reason = report.longrepr
    hint = extra_hint(str(reason))
    if hint is not None:
        report.longrepr = (path, lineno, f"{reason} {hint}")


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _add_extra_hint(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _add_extra_hint(outcome.get_result())


@pytest.fixture(scope="session")
def local_ray():
    """One local Ray for the session (2 CPUs, no dashboard, no progress bars); shut down at its end."""
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install trajstore[ray]; CI installs it)")
    os.environ.setdefault("RAY_DISABLE_IMPORT_WARNING", "1")
    if not ray.is_initialized():  # a test that ran before (the README's example) may have started it
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    from ray.data import DataContext

    DataContext.get_current().enable_progress_bars = False
    yield ray
    ray.shutdown()
