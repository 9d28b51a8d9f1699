"""``trajstore record | info | verify``: each command parses, calls one library function, prints."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.table import Table

from trajstore.cli._output import (EXIT_CODES_HELP, EXIT_INTERRUPTED, QUICK_PROGRESS_HELP, console, fail, progress_option,
                                   show_own_warnings)
from trajstore.cli.interop import export_app, import_app
from trajstore.cli import _record_options, remote
from trajstore.cli.aloha import import_aloha_command
from trajstore.cli.formats import formats_command
from trajstore.cli.rlds import import_rlds_command
from trajstore.cli.robomimic import export_robomimic_command, import_robomimic_command
from trajstore.cli.rosbag import import_rosbag_command
from trajstore.cli.view import view_command
from trajstore.errors import StorageExistsError, TrajstoreError

app = typer.Typer(help="Record and inspect trajstore replay buffers. " + EXIT_CODES_HELP, no_args_is_help=True,
                  pretty_exceptions_enable=False)


@app.callback()
def _setup() -> None:
    show_own_warnings()


import_app.command("rosbag")(import_rosbag_command)
import_app.command("rlds")(import_rlds_command)
import_app.command("robomimic")(import_robomimic_command)
export_app.command("robomimic")(export_robomimic_command)
import_app.command("aloha")(import_aloha_command)
app.command("formats")(formats_command)
app.command("view")(view_command)
app.add_typer(import_app, name="import")
app.add_typer(export_app, name="export")


class CameraStorage(str, Enum):
    jpeg = "jpeg"
    png = "png"
    video = "video"


GYMNASIUM_PREFIX = "gymnasium:"


@app.command()
def record(
    env: str = typer.Option("pusht", help="'pusht' (a planning expert; most episodes succeed) or "
                                          "'gymnasium:<env id>' (random policy unless --policy), e.g. "
                                          "gymnasium:Pusher-v5; the env must render rgb_array."),
    episodes: int = typer.Option(10, min=1, help="Number of episodes."),
    out: Path = typer.Option(..., help="Buffer folder: a new one, or an existing one with --resume."),
    camera: Optional[CameraStorage] = typer.Option(None, help="How to store camera frames (default jpeg; "
                                                              "with --resume, the folder's)."),
    capacity: Optional[int] = typer.Option(None, min=1, help="Ring capacity in steps (default: unbounded)."),
    max_steps: Optional[int] = typer.Option(None, min=1, help="Cap on steps per episode."),
    seed: int = typer.Option(0, help="Episode k of the folder resets the env (and seeds the policy) with seed + k."),
    resume: bool = typer.Option(False, help="Add episodes to the existing folder --out (same env and layout)."),
    reference: Optional[Path] = typer.Option(None, help="Also save the raw steps to this .npz for `verify`."),
    progress: bool = progress_option(),
    env_kwargs: Optional[str] = typer.Option(None, "--env-kwargs", help=_record_options.ENV_KWARGS_HELP),
    policy: Optional[str] = typer.Option(None, help=_record_options.POLICY_HELP),
) -> None:
    """Record episodes into a routed replay buffer. Ctrl-C stops after the current step: the open
    episode is discarded, the finished ones are kept (exit status 130)."""
    from trajstore.recording.gymnasium import EnvSetupError, record_gymnasium, use_headless_gl
    from trajstore.recording.pusht_recording import RecordingInterrupted, record_pusht

    gymnasium_env = env.startswith(GYMNASIUM_PREFIX) and len(env) > len(GYMNASIUM_PREFIX)
    if env == "pusht":
        if env_kwargs is not None:
            raise typer.BadParameter("--env-kwargs works with gymnasium:ID envs; --env pusht is the 96x96 PushT "
                                     "task", param_hint="'--env-kwargs'")
    elif not gymnasium_env:
        raise fail(f"--env must be 'pusht' or 'gymnasium:<env id>', got {env!r}")
    make_kwargs = _record_options.parse_env_kwargs(env_kwargs)
    if gymnasium_env:
        use_headless_gl()  # before a policy module imports MuJoCo
    chosen = None if policy is None else _record_options.load_policy_option(policy)
    options = dict(camera=camera.value if camera else None, capacity=capacity, max_steps=max_steps, seed=seed,
                   resume=resume, reference=reference, progress=progress)
    try:
        if env == "pusht":
            summary = record_pusht(out, episodes, policy=_record_options.pusht_policy(chosen), **options)
        else:
            summary = record_gymnasium(env[len(GYMNASIUM_PREFIX):], out, episodes, policy=chosen,
                                       env_kwargs=make_kwargs, **options)
    except RecordingInterrupted as exc:
        console.print(escape(exc.summary.line()), soft_wrap=True)
        raise typer.Exit(EXIT_INTERRUPTED)
    except StorageExistsError as exc:
        raise fail(f"{exc} (to add episodes to it: --resume)")
    except (TrajstoreError, ImportError, ValueError, EnvSetupError) as exc:
        raise fail(exc)
    console.print(escape(summary.line()), soft_wrap=True)


@app.command()
def info(path: str = typer.Argument(..., help="Buffer folder, or the URL of a pushed buffer (s3://bucket/rb)."),
         as_json: bool = typer.Option(False, "--json", help="Print the same as one JSON document."),
         storage_option: Optional[list[str]] = typer.Option(None, "--storage-option", "-o",
                                                            help=remote.STORAGE_OPTION_HELP),
         progress: bool = progress_option(QUICK_PROGRESS_HELP)) -> None:
    """Print each leaf's storage, dtype and shape, steps, episodes and bytes on disk (in the bucket for a URL).
    For a stream buffer: each stream's leaves, storages, samples and measured rates (median period, jitter, gaps)."""
    import json

    from trajstore.ops.info import describe
    from trajstore.ops.stream_info import is_stream_folder

    if is_stream_folder(path):
        from trajstore.cli import streams

        return streams.info(path, as_json)
    if _is_dataset(path, storage_option):
        return _dataset_info(path, as_json, storage_option)
    try:
        d = describe(path, remote.parse_storage_options(storage_option))
    except (TrajstoreError, OSError, ValueError, ImportError, *remote.backend_errors()) as exc:
        raise remote.remote_failure(path, path, exc)
    if as_json:
        print(json.dumps(d.to_json(), indent=1))
        return
    console.print(f"[bold]{d.path}[/bold]: {d.steps} steps (capacity {d.capacity or 'unbounded'}, "
                  f"{d.total_steps} appended), {d.episodes} episodes ({d.complete_episodes} complete, "
                  f"{d.interrupted_episodes} interrupted)")
    leaves = Table("leaf", "storage", "dtype", "shape", "metadata", title="leaves")
    for leaf in d.leaves:
        meta = ", ".join(f"{k}={v}" for k, v in leaf.metadata.items())
        leaves.add_row(leaf.key, leaf.storage, leaf.dtype, str(leaf.shape), meta)
    console.print(leaves)
    storages = Table("key", "storage", "options", "bytes on disk", "bytes/step", title="storages")
    for s in d.storages:
        per_step = f"{s.nbytes / d.steps:,.0f}" if d.steps else "-"
        options = ", ".join(f"{k}={v}" for k, v in s.config.items() if v is not None)
        storages.add_row(s.key or "(root)", s.storage, options, f"{s.nbytes:,}", per_step)
    console.print(storages)
    if d.final_observation_storages:
        finals = sum(s.nbytes for s in d.final_observation_storages)
        console.print(f"final observations: {d.final_observations} held, {finals:,} bytes on disk")
    console.print(f"total: {d.nbytes:,} bytes")


#: Elements of one leaf shown by `trajstore stats` (all of them with --json).
STATS_ROWS = 8


@app.command()
def stats(path: str = typer.Argument(..., help="Buffer folder, or the URL of a pushed buffer (s3://bucket/rb)."),
          as_json: bool = typer.Option(False, "--json", help="Print JSON (every field, per element) instead."),
          storage_option: Optional[list[str]] = typer.Option(None, "--storage-option", "-o",
                                                             help=remote.STORAGE_OPTION_HELP),
          progress: bool = progress_option(QUICK_PROGRESS_HELP)) -> None:
    """Print each numeric leaf's normalisation statistics (min, max, mean, std, q01, q99). For a stream
    buffer: each stream's, over its samples at its own rate."""
    import json

    import numpy as np

    from trajstore.ops.stream_info import is_stream_folder
    from trajstore.replay_buffer.statistics import stats_of

    if is_stream_folder(path):
        from trajstore.cli import streams

        return streams.stats(path, as_json, STATS_ROWS)

    try:
        result = stats_of(path, storage_options=remote.parse_storage_options(storage_option))
    except (TrajstoreError, OSError, ValueError, ImportError, *remote.backend_errors()) as exc:
        raise remote.remote_failure(path, path, exc)
    if as_json:
        print(json.dumps({name: s.to_json() for name, s in result.items()}, indent=1))
        return
    table = Table("leaf", "shape", "element", "count", "min", "max", "mean", "std", "q01", "q99",
                  title=f"statistics of {path} (per channel for image leaves, per element for small leaves, "
                        "else of the whole leaf)")
    for name, s in result.items():
        flat = {k: np.asarray(getattr(s, k)).reshape(-1) for k in ("count", "min", "max", "mean", "std", "q01", "q99")}
        n = flat["count"].size
        for i in range(min(n, STATS_ROWS)):
            element = (f"channel {i}" if s.per_channel else str(tuple(int(j) for j in np.unravel_index(i, s.shape)))) if s.shape else "-"
            table.add_row(name if i == 0 else "", str(s.shape) if i == 0 else "", element, f"{flat['count'][i]:,}",
                          *(f"{flat[k][i]:.6g}" for k in ("min", "max", "mean", "std", "q01", "q99")))
        if n > STATS_ROWS:
            table.add_row("", "", f"... {n - STATS_ROWS} more (--json)", *[""] * 7)
    console.print(table)


# Commands kept in their own modules (trajstore.cli.<name>).
from trajstore.cli import copy_merge, episodes, preview, verify  # noqa: E402

app.command()(episodes.episodes)
app.command()(preview.preview)
app.command()(verify.verify)
app.command()(copy_merge.copy)
app.command()(copy_merge.merge)
app.command()(remote.push)
app.command()(remote.pull)


if __name__ == "__main__":
    app()


def _is_dataset(path: str, storage_option: Optional[list[str]]) -> bool:
    from trajstore._urls import local_path
    from trajstore.replay_buffer.remote_open import is_url
    from trajstore.shards import is_dataset

    if not is_url(path):
        return is_dataset(local_path(path))
    try:
        from trajstore.shards.remote import is_remote_dataset

        return is_remote_dataset(path, remote.parse_storage_options(storage_option))
    except (TrajstoreError, OSError, ValueError, ImportError, *remote.backend_errors()):
        return False  # the buffer's own open reports what is wrong with the URL


def _dataset_info(path: str, as_json: bool, storage_option: Optional[list[str]]) -> None:
    """``trajstore info`` of a sharded dataset: its shards, then its leaves (from the template)."""
    import json

    from trajstore.ops.dataset_info import describe_dataset

    try:
        d = describe_dataset(path, remote.parse_storage_options(storage_option))
    except (TrajstoreError, OSError, ValueError, ImportError, *remote.backend_errors()) as exc:
        raise remote.remote_failure(path, path, exc)
    if as_json:
        print(json.dumps(d.to_json(), indent=1))
        return
    keyed = sum(s.keyed for s in d.shards)
    console.print(f"[bold]{escape(d.path)}[/bold]: sharded dataset, {len(d.shards)} shards, {d.steps} steps, "
                  f"{d.episodes} episodes ({keyed} with an episode_key)", soft_wrap=True)
    shards = Table("shard", "steps", "episodes", "keyed", "open episode", title="shards")
    for s in d.shards:
        shards.add_row(s.name, str(s.steps), str(s.episodes), str(s.keyed), "yes" if s.open else "-")
    console.print(shards)
    leaves = Table("leaf", "storage", "dtype", "shape", "metadata", title="leaves (every shard)")
    for leaf in d.template.leaves:
        leaves.add_row(leaf.key, leaf.storage, leaf.dtype, str(leaf.shape),
                       ", ".join(f"{k}={v}" for k, v in leaf.metadata.items()))
    console.print(leaves)
    console.print(f"one shard's folder is {escape(d.path.rstrip('/'))}/shards/<name>: the other commands "
                  "(episodes, stats, verify, view, copy) take it", soft_wrap=True)
