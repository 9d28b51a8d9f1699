"""Bad input to push, pull and load_from: each is refused with a trajstore error naming the URL
(the CLI prints it on one line), before anything is made or sent."""

from __future__ import annotations

import pytest

from trajstore.errors import InvalidValueError, RemoteStoreError
from trajstore.remote import pull, push
from trajstore.remote.layout import MANIFEST
from trajstore.replay_buffer import ReplayBuffer

from tests.remote.conftest import make_buffer

#: An endpoint nothing listens on; one attempt, so the test does not wait for botocore's retries.
UNREACHABLE = {"key": "k", "secret": "s", "config_kwargs": {"retries": {"max_attempts": 1}},
               "client_kwargs": {"endpoint_url": "http://127.0.0.1:9", "region_name": "eu-west-1"}}


@pytest.fixture
def folder(tmp_path):
    with make_buffer(tmp_path / "rb", episodes=1):
        pass
    return tmp_path / "rb"


@pytest.mark.parametrize("options", ["key=test", ["key", "test"], 3])
def test_storage_options_of_the_wrong_type(tmp_path, folder, options):
    for call in (lambda: push(folder, "memory://bucket/x", options),
                 lambda: pull("memory://bucket/x", tmp_path / "copy", options),
                 lambda: ReplayBuffer.load_from("memory://bucket/x", storage_options=options)):
        with pytest.raises(InvalidValueError, match=f"memory://bucket/x: storage_options must be a dict.*"
                                                    f"got {type(options).__name__}"):
            call()
    assert not (tmp_path / "copy").exists()


def test_an_unknown_scheme(tmp_path, folder):
    with pytest.raises(InvalidValueError, match="nosuch://b/x: unknown URL scheme 'nosuch'"):
        push(folder, "nosuch://b/x")
    with pytest.raises(InvalidValueError, match="unknown URL scheme"):
        ReplayBuffer.load_from("nosuch://b/x")
    with pytest.raises(InvalidValueError, match="unknown URL scheme"):
        pull("nosuch://b/x", tmp_path / "copy")


def test_an_unreachable_endpoint_and_options_the_client_refuses(tmp_path, folder, storage_options):
    # botocore's EndpointConnectionError and s3fs's TypeError for an unknown option are no OSError:
    # they reached the caller (and the CLI, as a traceback) as they were.
    with pytest.raises(RemoteStoreError, match="s3://trajstore-tests/x: .*EndpointConnectionError"):
        ReplayBuffer.load_from("s3://trajstore-tests/x", storage_options=UNREACHABLE)
    with pytest.raises(RemoteStoreError, match="EndpointConnectionError"):
        push(folder, "s3://trajstore-tests/x", UNREACHABLE)
    with pytest.raises(RemoteStoreError, match="EndpointConnectionError"):
        pull("s3://trajstore-tests/x", tmp_path / "copy", UNREACHABLE)
    assert not (tmp_path / "copy").exists()
    with pytest.raises(RemoteStoreError, match="nonsense"):
        ReplayBuffer.load_from("s3://trajstore-tests/x", storage_options={**storage_options, "nonsense": 1})


def test_cli_says_so_on_one_line(tmp_path, folder):
    from typer.testing import CliRunner

    from trajstore.cli.main import app

    opts = ["-o", "key=k", "-o", "secret=s", "-o", "client_kwargs.endpoint_url=http://127.0.0.1:9",
            "-o", "config_kwargs.retries.max_attempts=1"]
    for args in (["push", str(folder), "s3://trajstore-tests/x", *opts],
                 ["pull", "s3://trajstore-tests/x", str(tmp_path / "copy"), *opts],
                 ["push", str(folder), "nosuch://b/x"]):
        out = CliRunner().invoke(app, args)
        assert out.exit_code == 2, out.output
        assert out.output.startswith("error:") and "Traceback" not in out.output and len(out.output.splitlines()) <= 3


def test_push_into_the_folder_itself_is_refused(folder):
    with pytest.raises(InvalidValueError, match="into itself"):
        push(folder, str(folder))
    with pytest.raises(InvalidValueError, match="into itself"):
        push(folder, (folder / "published").as_uri())
    assert not (folder / MANIFEST).exists() and not (folder / "objects").exists()


def test_urls_with_a_trailing_slash_spaces_and_unicode(tmp_path, folder, storage_options, s3):
    url = "s3://trajstore-tests/with space/ünïcode ✓/"
    push(folder, url, storage_options)
    with ReplayBuffer.load_from(url.rstrip("/"), storage_options=storage_options) as rb:
        assert len(rb) == 12 and float(rb[3]["reward"]) == 3.0
    report = pull(url, tmp_path / "copy ü", storage_options)
    assert report.files > 0 and (tmp_path / "copy ü" / "trajstore.json").is_file()
