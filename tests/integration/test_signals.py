"""SIGTERM and SIGINT stop a running `wanjax generate` with one line, the shell's exit status for
the signal, and no partial file; what a killed run leaves is removed by the next one."""

import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from wanjax.adapters.demo.checkpoint import DEMO_NAME

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
        assert [p.name.startswith(f".{DEMO_NAME}-") for p in cache.iterdir()] == [True]
    _assert_stopped(run, signal.SIGTERM, 143)
    assert list(cache.iterdir()) == []


@pytest.mark.parametrize("phase", ["swallowed-denoise", "swallowed-write"])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_whose_exception_is_swallowed_still_stops_the_run(tmp_path, demo_cache, phase, signum):
    out = tmp_path / "out" / "video.mp4"
    with _stopped_at(phase, signum, out, demo_cache.parent) as run:
        pass  # the signal is sent as the block ends; the run swallows its exception and goes on
    _assert_stopped(run, signum, 128 + signum)
    assert not out.parent.exists() or list(out.parent.iterdir()) == []


def test_a_signal_while_the_output_is_renamed_into_place_waits_and_the_run_ends_whole(tmp_path, demo_cache):
    out = tmp_path / "out" / "video.mp4"
    with _stopped_at("rename", signal.SIGINT, out, demo_cache.parent) as run:
        pass
    assert run.returncode == 0, run.stderr_text
    assert [p.name for p in out.parent.iterdir()] == ["video.mp4"]


# A signal at any moment of a run, cold (nothing compiled or cached) and warm: while it loads,
# compiles and denoises (while it starts: test_a_signal_while_the_cli_still_imports_ends_it_cleanly). 1000 steps at this size keep each run going well past the latest
# delay (a warm run takes about 23 s on a 2-core machine).
LONG = ["--height", "128", "--width", "192", "--num-frames", "17", "--steps", "1000", "--quiet"]


@pytest.fixture(scope="module")
def warm_cache(demo_cache, tmp_path_factory):
    """Compilation and prompt caches filled by a run of `LONG` cut to 2 steps (one compiled step
    serves any step count)."""
    caches = tmp_path_factory.mktemp("warm")
    out = caches / "video.mp4"
    short = [*LONG[:-2], "2", "--quiet"]
    subprocess.run(
        [sys.executable, "-m", "wanjax.entrypoints.cli", "generate", "--prompt", "a fox", *short, "--out", str(out),
         *_caches_in(caches)],
        check=True, capture_output=True, env={**os.environ, "WANJAX_CACHE": str(demo_cache.parent)},
    )  # fmt: skip
    out.unlink()
    return caches


@pytest.mark.parametrize(
    "start, delay, signum",
    [("cold", 4.0, signal.SIGTERM), ("cold", 8.0, signal.SIGINT), ("warm", 3.0, signal.SIGTERM),
     ("warm", 6.0, signal.SIGINT)],
)  # fmt: skip
def test_a_signal_at_any_moment_stops_the_run(tmp_path, demo_cache, request, start, delay, signum):
    caches = request.getfixturevalue("warm_cache") if start == "warm" else tmp_path / "cold"
    out = tmp_path / "out" / "video.mp4"
    run = subprocess.Popen(
        [sys.executable, "-m", "wanjax.entrypoints.cli", "generate", "--prompt", "a fox", *LONG, "--out", str(out),
         *_caches_in(caches)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "WANJAX_CACHE": str(demo_cache.parent)},
    )  # fmt: skip
    try:
        time.sleep(delay)
        assert run.poll() is None, "the run ended before the signal: give it more steps"
        run.send_signal(signum)
        run.stderr_text = run.communicate(timeout=120)[1]
    finally:
        run.kill()
    _assert_stopped(run, signum, 128 + signum)
    assert not out.parent.exists() or list(out.parent.iterdir()) == []


LAUNCHERS = {"python -m": [sys.executable, "-m", "wanjax.entrypoints.cli"], "script": [str(Path(sys.executable).with_name("wanjax"))]}


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_a_signal_while_the_cli_still_imports_ends_it_cleanly(tmp_path, launcher):
    """SIGTERM once numpy's library is mapped into the process, so while the CLI's modules load:
    the run ends with its line and status, no traceback (before the fix: killed by SIGTERM)."""
    out = tmp_path / "out" / "video.mp4"
    run = subprocess.Popen(
        [*LAUNCHERS[launcher], "generate", "--prompt", "a fox", *SMALL, "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        while run.poll() is None and "_multiarray_umath" not in Path(f"/proc/{run.pid}/maps").read_text():
            time.sleep(0.001)
        assert run.poll() is None, "the run ended before it loaded numpy"
        run.send_signal(signal.SIGTERM)
        run.stderr_text = run.communicate(timeout=60)[1]
    finally:
        run.kill()
    _assert_stopped(run, signal.SIGTERM, 143)
    assert not out.parent.exists()


def _caches_in(folder):
    return ["--set", f"compilation_cache_dir={folder / 'xla'}", "--set", f"text_embeddings_cache_dir={folder / 'text'}"]


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
    from wanjax.adapters.demo.checkpoint import remove_stale_staging
    from wanjax.adapters.processes import owner_tag

    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    host = owner_tag().rpartition("-")[0]
    killed = tmp_path / f".{DEMO_NAME}-{host}-{ended.stdout.strip()}-abc123"
    running = tmp_path / f".{DEMO_NAME}-{owner_tag()}-def456"
    for folder in (killed, running):
        (folder / "vae").mkdir(parents=True)
    assert remove_stale_staging(tmp_path, DEMO_NAME) == [killed]
    assert sorted(p.name for p in tmp_path.iterdir()) == [running.name]
