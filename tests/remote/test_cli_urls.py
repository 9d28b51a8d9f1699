"""What a new user meets when pointing trajstore at a pushed buffer's URL: `info`, `episodes` and
`stats` read it, folder-only commands say to pull first, missing credentials and a missing bucket
are one line that says what to do, push and pull report progress, and the torch dataset takes
storage options."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from tests.remote.conftest import make_buffer
from trajstore.cli.main import app
from trajstore.remote import push
from trajstore.ops.info import describe


def _options(storage_options: dict) -> list[str]:
    endpoint = storage_options["client_kwargs"]["endpoint_url"]
    return ["-o", "key=test", "-o", "secret=test", "-o", f"client_kwargs.endpoint_url={endpoint}",
            "-o", "client_kwargs.region_name=eu-west-1"]


def test_info_of_a_url_counts_the_bytes_in_the_bucket(tmp_path, bucket_url, storage_options):
    with make_buffer(tmp_path / "rb", episodes=3):
        pass
    push(tmp_path / "rb", bucket_url, storage_options)
    local, remote = describe(tmp_path / "rb"), describe(bucket_url, storage_options)
    assert (remote.steps, remote.episodes, remote.final_observations) == (36, 3, 3)
    # the mirror holds only small files: the frames' bytes must come from the manifest
    assert [(s.key, s.nbytes) for s in remote.storages] == [(s.key, s.nbytes) for s in local.storages]
    assert remote.nbytes == local.nbytes and remote.nbytes > 36 * 100
    assert [s.nbytes for s in remote.final_observation_storages] == [
        s.nbytes for s in local.final_observation_storages]

    out = CliRunner().invoke(app, ["info", bucket_url, *_options(storage_options)])
    assert out.exit_code == 0, out.output
    assert f"total: {local.nbytes:,} bytes" in out.output and bucket_url in out.output


def test_verify_of_a_url_says_to_pull_first(bucket_url):
    out = CliRunner().invoke(app, ["verify", bucket_url])
    assert out.exit_code == 2
    assert out.output.startswith(f"error: {bucket_url}: verify checks a local folder")
    assert f"trajstore pull {bucket_url} FOLDER" in out.output and "Traceback" not in out.output


@pytest.mark.parametrize("command", ["push", "info"])
def test_missing_credentials_are_one_line_that_says_where_to_put_them(tmp_path, bucket_url, storage_options,
                                                                      monkeypatch, command):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance-metadata probe
    with make_buffer(tmp_path / "rb", episodes=1):
        pass
    endpoint = storage_options["client_kwargs"]["endpoint_url"]
    args = [str(tmp_path / "rb"), bucket_url] if command == "push" else [bucket_url]
    out = CliRunner().invoke(app, [command, *args, "-o", f"client_kwargs.endpoint_url={endpoint}"])
    assert out.exit_code == 2, out.output
    assert out.output.startswith(f"error: {bucket_url}: Unable to locate credentials")
    assert "-o key=" in out.output and "AWS_ACCESS_KEY_ID" in out.output
    assert "Traceback" not in out.output and out.output.count("\n") == 1


def test_torch_dataset_opens_a_url_with_storage_options(tmp_path, bucket_url, storage_options):
    pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    from trajstore.training.torch import ReplayBufferDataset
    from trajstore.replay_buffer import ReplayBuffer

    with make_buffer(tmp_path / "rb", episodes=2):
        pass
    push(tmp_path / "rb", bucket_url, storage_options)
    windows = ReplayBufferDataset(bucket_url, storage_options=storage_options, delta_indices={"action": range(4)})
    assert len(windows) == 24
    actions = np.concatenate([b["action"].numpy() for b in DataLoader(windows, batch_size=8, num_workers=2)])
    with ReplayBuffer.load_from(tmp_path / "rb") as local:
        expected, _ = local.windows_at(np.arange(24), delta_indices={"action": range(4)})
    assert actions.shape == (24, 4, 2) and np.array_equal(actions, expected["action"])
    with pytest.raises(TypeError, match="already open"):
        ReplayBufferDataset(windows.buffer, storage_options=storage_options)


def test_push_to_a_missing_bucket_says_to_make_it(tmp_path, storage_options, s3):
    with make_buffer(tmp_path / "rb", episodes=1):
        pass
    url = "s3://bucket-nobody-made/rb"
    # No progress bar: on a loaded machine a push may pass its first second before it fails.
    out = CliRunner().invoke(app, ["push", str(tmp_path / "rb"), url, "--no-progress", *_options(storage_options)])
    assert out.exit_code == 2, out.output
    assert out.output.startswith(f"error: {url}: ") and "create 'bucket-nobody-made' first" in out.output
    assert not s3.exists("bucket-nobody-made")


def test_push_and_pull_report_progress_in_bytes(tmp_path, bucket_url, storage_options, monkeypatch):
    from trajstore.remote import publish, pull

    monkeypatch.setattr(publish, "UPLOAD_BATCH_BYTES", 4096)  # several batches, so several reports
    with make_buffer(tmp_path / "rb", episodes=3):
        pass
    pushed: list[tuple[int, int]] = []
    report = push(tmp_path / "rb", bucket_url, storage_options, progress=lambda done, total: pushed.append((done, total)))
    assert pushed[0] == (0, report.uploaded_bytes) and pushed[-1] == (report.uploaded_bytes, report.uploaded_bytes)
    assert len(pushed) > 2 and all(a[0] <= b[0] for a, b in zip(pushed, pushed[1:]))

    pulled: list[tuple[int, int]] = []
    got = pull(bucket_url, tmp_path / "copy", storage_options, progress=lambda done, total: pulled.append((done, total)))
    assert {total for _, total in pulled} == {got.bytes}
    assert pulled[-1] == (got.bytes, got.bytes) and all(a[0] <= b[0] for a, b in zip(pulled, pulled[1:]))
    assert len(pulled) > 2  # the frames' chunks report their bytes as they arrive, not only at the end

    out = CliRunner().invoke(app, ["pull", bucket_url, str(tmp_path / "copy2"), "--no-progress",
                                   *_options(storage_options)])
    assert out.exit_code == 0 and out.output.startswith(f"pulled {bucket_url}")


def test_episodes_and_stats_of_a_url_equal_the_folder(tmp_path, bucket_url, storage_options):
    import json

    with make_buffer(tmp_path / "rb", episodes=3):
        pass
    push(tmp_path / "rb", bucket_url, storage_options)
    runner = CliRunner()
    for command in ("episodes", "stats"):
        local = runner.invoke(app, [command, str(tmp_path / "rb"), "--json"])
        remote = runner.invoke(app, [command, bucket_url, "--json", *_options(storage_options)])
        assert remote.exit_code == 0, remote.output
        local_doc, remote_doc = json.loads(local.output), json.loads(remote.output)
        if command == "episodes":  # the summary names where it read from
            assert (local_doc.pop("path"), remote_doc.pop("path")) == (str(tmp_path / "rb"), bucket_url)
        assert remote_doc == local_doc
    rows = json.loads(runner.invoke(
        app, ["episodes", bucket_url, "--json", *_options(storage_options)]).output)["rows"]
    assert [(r["id"], r["steps"], r["task"]) for r in rows] == [(0, 12, "task 0"), (1, 12, "task 1"), (2, 12, "task 2")]


@pytest.mark.parametrize("command", [["copy", "{url}", "{tmp}/copy", "--episodes", "0"],
                                     ["preview", "{url}", "--episode", "0", "--out", "{tmp}/p.png"]])
def test_folder_commands_given_a_url_say_to_pull_it(tmp_path, command):
    url = "s3://some-bucket/rb"
    args = [a.format(url=url, tmp=tmp_path) for a in command]
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 2, out.output
    assert f"({url} is a URL:" in out.output and f"`trajstore pull {url} FOLDER`" in out.output
    assert not (tmp_path / "copy").exists() and not (tmp_path / "p.png").exists()
