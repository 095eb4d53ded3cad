"""SIGTERM and SIGINT stop a running `wanjax generate` with one line, the shell's exit status for
the signal, and no partial file; what a killed run leaves is removed by the next one."""

import os
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
SMALL = ["--height", "32", "--width", "48", "--num-frames", "5", "--steps", "3", "--quiet"]


@pytest.mark.parametrize(
    "phase, signum, status",
    [("denoise", signal.SIGTERM, 143), ("write", signal.SIGTERM, 143), ("denoise", signal.SIGINT, 130)],
)
def test_a_signal_stops_the_run_leaving_no_partial_file(tmp_path, demo_cache, phase, signum, status):
    out = tmp_path / "out" / "video.mp4"
    with _stopped_at(phase, signum, out, demo_cache.parent) as run:
        if phase == "write":  # the temporary file is there while the mp4 is being written
            assert [p.name.split(".")[1:3] for p in out.parent.iterdir()] == [["video", "mp4"]]
            assert ".partial-" in next(out.parent.iterdir()).name
    _assert_stopped(run, signum, status)
    assert not out.parent.exists() or list(out.parent.iterdir()) == []


def test_sigterm_while_the_demo_is_written_leaves_no_staging_folder(tmp_path):
    cache = tmp_path / "cache"
    with _stopped_at("demo", signal.SIGTERM, tmp_path / "video.mp4", cache) as run:
        assert [p.name.startswith(".demo-v1-") for p in cache.iterdir()] == [True]
    _assert_stopped(run, signal.SIGTERM, 143)
    assert list(cache.iterdir()) == []


@contextmanager
def _stopped_at(phase, signum, out, cache):
    """A `wanjax generate` run (`signal_run.py`) stopped by `signum` once it reaches `phase`,
    after the body (run while it waits there)."""
    run = subprocess.Popen(
        [sys.executable, str(TESTS / "signal_run.py"), phase, "generate", "--prompt", "a fox", *SMALL, "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "WANJAX_CACHE": str(cache)},
    )  # fmt: skip
    try:
        assert run.stdout.readline().strip() == f"reached {phase}", run.stderr.read()
        yield run
        run.send_signal(signum)
        run.stderr_text = run.communicate(timeout=120)[1]
    finally:
        run.kill()


def _assert_stopped(run, signum, status):
    err = run.stderr_text
    assert run.returncode == status, err
    assert err.strip().splitlines()[-1] == f"wanjax: stopped by {signal.Signals(signum).name}; no partial output was left"
    assert "Traceback" not in err


def test_a_staging_folder_of_a_killed_demo_writer_is_removed(tmp_path):
    from wanjax.adapters.demo.checkpoint import DEMO_NAME, remove_stale_staging
    from wanjax.adapters.processes import owner_tag

    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    host = owner_tag().rpartition("-")[0]
    killed = tmp_path / f".{DEMO_NAME}-{host}-{ended.stdout.strip()}-abc123"
    running = tmp_path / f".{DEMO_NAME}-{owner_tag()}-def456"
    for folder in (killed, running):
        (folder / "vae").mkdir(parents=True)
    assert remove_stale_staging(tmp_path) == [killed]
    assert sorted(p.name for p in tmp_path.iterdir()) == [running.name]
