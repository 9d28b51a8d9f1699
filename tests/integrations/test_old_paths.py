"""The import paths of the last release keep working for one more: each old module re-exports its new
home's names (the same objects) and warns DeprecationWarning when imported."""

import importlib
import os
import subprocess
import sys

import pytest

#: old module -> (new module, a public name both must hold)
MOVED = {
    "trajstore.integrations.torch": ("trajstore.training.torch", "ReplayBufferDataset"),
    "trajstore.integrations.normalizer": ("trajstore.training.normalizer", "Normalizer"),
    "trajstore.integrations.ray": ("trajstore.training.ray", "read_trajstore"),
    "trajstore.integrations.record_episodes": ("trajstore.recording.episodes", "RecordEpisodes"),
    "trajstore.integrations.record_vector_episodes": ("trajstore.recording.vector", "RecordVectorEpisodes"),
    "trajstore.integrations.record_gymnasium": ("trajstore.recording.gymnasium", "record_gymnasium"),
    "trajstore.integrations.record_loop": ("trajstore.recording.loop", "RecordingInterrupted"),
    "trajstore.integrations.recorded_step": ("trajstore.recording.step", "step_space"),
    "trajstore.integrations.pusht": ("trajstore.recording.pusht", "ScriptedPushPolicy"),
    "trajstore.integrations.recording": ("trajstore.recording.pusht_recording", "record_pusht"),
    "trajstore.integrations.reference": ("trajstore.recording.reference", "LeafCheck"),
    "trajstore.integrations.lerobot": ("trajstore.interop.lerobot", "export_lerobot"),
    "trajstore.integrations.lerobot_export": ("trajstore.interop.lerobot.export", "export_lerobot"),
    "trajstore.integrations.lerobot_import": ("trajstore.interop.lerobot.import_", "import_lerobot"),
    "trajstore.integrations.zarr_replay": ("trajstore.interop.zarr", "import_zarr"),
    "trajstore.integrations.zarr_export": ("trajstore.interop.zarr.export", "export_zarr"),
    "trajstore.integrations.zarr_import": ("trajstore.interop.zarr.import_", "import_zarr"),
    "trajstore.integrations.zarr_layout": ("trajstore.interop.zarr.layout", "DEFAULT_FPS"),
    "trajstore.integrations.zarr_codecs": ("trajstore.interop.zarr.codecs", "register_codecs"),
    "trajstore.integrations.summary": ("trajstore.interop.summary", "ImportSummary"),
    "trajstore.integrations.preview": ("trajstore.ops.preview", "write_preview"),
    "trajstore.replay_buffer.copying": ("trajstore.ops.copy", "copy_episodes"),
    "trajstore.replay_buffer.verify": ("trajstore.ops.verify", "verify_buffer"),
    "trajstore.replay_buffer.info": ("trajstore.ops.info", "describe"),
    "trajstore.replay_buffer.episode_summary": ("trajstore.ops.episodes", "summarize_episodes"),
}


def fresh_import(name):
    """Import ``name`` anew (its first import in the process is the one that warns)."""
    sys.modules.pop(name, None)
    return importlib.import_module(name)


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_module_warns_and_reexports_the_new_names(old):
    new, name = MOVED[old]
    try:
        target = importlib.import_module(new)
    except ImportError as exc:  # an optional dependency (torch, ray, gymnasium, zarr, pyarrow) is missing
        pytest.skip(str(exc))
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {new}"):
        module = fresh_import(old)
    assert getattr(module, name) is getattr(target, name)
    public = {n for n, v in vars(target).items() if not n.startswith("_") and not isinstance(v, type(sys))}
    assert public <= set(vars(module))


def test_renamed_names_keep_their_old_name():
    from trajstore.recording import compare_to_reference
    from trajstore.recording.step import step_space

    with pytest.warns(DeprecationWarning):
        assert fresh_import("trajstore.integrations.recording").verify_buffer is compare_to_reference
    with pytest.warns(DeprecationWarning):
        assert fresh_import("trajstore.integrations.reference").verify_buffer is compare_to_reference
    pytest.importorskip("pyarrow")
    from trajstore.interop.lerobot.import_ import source_space

    with pytest.warns(DeprecationWarning):
        assert fresh_import("trajstore.integrations.lerobot_import").step_space is source_space
    with pytest.warns(DeprecationWarning, match="trajstore.integrations.gymnasium moved"):
        old = fresh_import("trajstore.integrations.gymnasium")
    assert old.transition_space is step_space


def test_the_old_package_and_the_buffer_names_warn():
    from trajstore.ops import copy_episodes, merge_buffers, verify_buffer

    for name in [n for n in sys.modules if n == "trajstore.integrations" or n.startswith("trajstore.integrations.")]:
        sys.modules.pop(name)
    with pytest.warns(DeprecationWarning, match="trajstore.integrations moved"):
        importlib.import_module("trajstore.integrations")
    import trajstore.replay_buffer as rb_package

    for name, value in {"copy_episodes": copy_episodes, "merge_buffers": merge_buffers,
                        "verify_buffer": verify_buffer}.items():
        rb_package.__dict__.pop(name, None)
        with pytest.warns(DeprecationWarning, match=f"trajstore.replay_buffer.{name} moved to trajstore.ops"):
            assert getattr(rb_package, name) is value


def test_new_paths_import_without_a_warning():
    code = ("import warnings; warnings.simplefilter('error', DeprecationWarning); "
            "import trajstore.replay_buffer, trajstore.ops, trajstore.recording, trajstore.training, trajstore.interop, "
            "trajstore.recording.step, trajstore.ops.copy, trajstore.cli.main")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ.copy())
    assert done.returncode == 0, done.stderr
