"""Atomic writes: a failure leaves nothing, its real error shows, and killed runs' leftovers go."""

import os
import socket
import subprocess
import sys

import pytest

from wanjax.adapters.media import atomic
from wanjax.adapters.media.atomic import atomic_path, remove_stale_partials


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_a_failed_write_leaves_nothing_and_raises_its_own_error(tmp_path):
    target = tmp_path / "video.npy"
    with pytest.raises(RuntimeError, match="encoder failed"):
        with atomic_path(target) as temporary:
            temporary.write_bytes(b"half a file")
            raise RuntimeError("encoder failed")
    assert list(tmp_path.iterdir()) == []


def test_an_error_removing_the_temporary_does_not_hide_the_write_error(tmp_path, monkeypatch):
    def unlink_refused(self, missing_ok=False):
        raise PermissionError(13, "Permission denied", str(self))

    with pytest.raises(OSError, match="No space left on device"):
        with atomic_path(tmp_path / "video.mp4"):
            monkeypatch.setattr(atomic.Path, "unlink", unlink_refused)
            raise OSError(28, "No space left on device")


def test_partial_files_of_ended_processes_on_this_host_are_removed(tmp_path):
    host, dead = socket.gethostname(), _dead_pid()
    stale = [tmp_path / f".a.mp4.partial-{host}-{dead}", tmp_path / f".b.npy.partial-{dead}"]
    kept = [
        tmp_path / f".a.mp4.partial-{host}-{os.getpid()}",  # a live process's
        tmp_path / f".a.mp4.partial-another-host-{dead}",  # maybe live on the other host
        tmp_path / "notes.partial-12",  # not ours: no leading dot
        tmp_path / "a.mp4",
    ]
    for path in (*stale, *kept):
        path.write_bytes(b"x")
    assert sorted(remove_stale_partials(tmp_path)) == sorted(stale)
    assert sorted(tmp_path.iterdir()) == sorted(kept)


def test_the_next_write_into_a_folder_removes_its_stale_partials(tmp_path):
    leftover = tmp_path / f".old.mp4.partial-{socket.gethostname()}-{_dead_pid()}"
    leftover.write_bytes(b"killed mid-write")
    with atomic_path(tmp_path / "new.npy") as temporary:
        temporary.write_bytes(b"done")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.npy"]


def test_threads_writing_one_target_at_once_each_finish_and_leave_a_whole_file(tmp_path):
    """Both writers are inside `atomic_path` at the same time, so a temporary name shared by the
    process (the pid alone) would be truncated by one and renamed away under the other."""
    import threading

    target, inside = tmp_path / "embeddings.npy", threading.Barrier(2)
    payloads, errors = {0: b"a" * 100_000, 1: b"b" * 50_000}, []

    def write(index: int) -> None:
        try:
            with atomic_path(target) as temporary, temporary.open("wb") as f:
                f.write(payloads[index][:10])
                inside.wait(timeout=10)
                f.write(payloads[index][10:])
        except OSError as error:
            errors.append(error)

    threads = [threading.Thread(target=write, args=(i,)) for i in payloads]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert target.read_bytes() in payloads.values()
    assert [p.name for p in tmp_path.iterdir()] == [target.name]


def test_files_written_together_are_renamed_only_if_committing_allows(tmp_path):
    from contextlib import contextmanager

    from wanjax.adapters.media.atomic import atomic_paths

    @contextmanager
    def refused():
        raise RuntimeError("stopped")
        yield

    targets = [tmp_path / "video-0.mp4", tmp_path / "video-1.mp4"]
    with pytest.raises(RuntimeError, match="stopped"):
        with atomic_paths(targets, committing=refused) as temporaries:
            for temporary in temporaries:
                temporary.write_bytes(b"whole")
    assert list(tmp_path.iterdir()) == []
    with atomic_paths(targets) as temporaries:
        for temporary in temporaries:
            temporary.write_bytes(b"whole")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["video-0.mp4", "video-1.mp4"]
