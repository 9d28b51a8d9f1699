"""``trajstore view``: serves until Ctrl-C (a real process), prints its address, and says what is wrong
in command-line words before it listens."""

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request

from tests.cli.stream_buffers import make_stream_buffer, run
from tests.view.viewer_buffers import LENGTHS, make_buffer


def test_serves_the_buffer_until_ctrl_c(tmp_path):
    folder = make_buffer(tmp_path / "rb")
    env = dict(os.environ, COLUMNS="300")
    proc = subprocess.Popen([sys.executable, "-m", "trajstore.cli.main", "view", str(folder), "--port", "0",
                             "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()
        assert line.startswith(f"viewing {folder} at http://127.0.0.1:") and "(Ctrl-C stops)" in line, line
        url = line.split(" at ", 1)[1].split()[0]
        with urllib.request.urlopen(url + "api/episodes", timeout=30) as r:
            assert json.loads(r.read())["steps"] == list(LENGTHS)
        with urllib.request.urlopen(url, timeout=30) as r:
            assert r.headers["Content-Type"].startswith("text/html")
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "Traceback" not in err


def test_errors_before_listening(tmp_path):
    result = run("view", str(tmp_path / "none"))
    assert result.exit_code == 2 and "is not a trajstore buffer folder" in result.output
    result = run("view", str(make_buffer(tmp_path / "rb")), "--port", "70000")
    assert result.exit_code == 2 and "--port must be 0..65535, got 70000" in result.output


def test_a_taken_port_names_the_option(tmp_path):
    folder = make_buffer(tmp_path / "rb")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        result = run("view", str(folder), "--port", str(port))
    assert result.exit_code == 2 and f"port {port} on 127.0.0.1 is taken" in result.output
    assert "--port 0" in result.output


def test_a_stream_buffer_is_refused_with_what_to_run(tmp_path):
    sb = make_stream_buffer(tmp_path / "sb")
    result = run("view", str(sb))
    assert result.exit_code == 2 and "is a stream buffer" in result.output and "trajstore import zarr" in result.output
