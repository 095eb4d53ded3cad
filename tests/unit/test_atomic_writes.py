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
