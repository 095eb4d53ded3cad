"""Faults during a run of the demo model: each ends with one `wanjax: error:` line, a non-zero
exit and nothing written."""

import errno

import pytest

from wanjax.entrypoints.cli import main

SMALL = ["--height", "32", "--width", "48", "--num-frames", "5", "--steps", "2", "--quiet"]


@pytest.fixture(autouse=True)
def demo_in_session_cache(demo_cache, monkeypatch):
    monkeypatch.setenv("WANJAX_CACHE", str(demo_cache.parent))


def _fails(tmp_path, capsys, args, *expected):
    assert main(["generate", "--prompt", "a fox", *SMALL, "--out", str(tmp_path / "v.mp4"), *args]) == 2
    err = capsys.readouterr().err
    message = err.splitlines()[-1]  # after transformers' own "Loading weights" bar
    assert message.startswith("wanjax: error: ") and "Traceback" not in err, err
    for text in expected:
        assert text in message, message
    assert list(tmp_path.iterdir()) == []
    return message


def test_a_disk_that_fills_during_the_write_ends_in_an_error_naming_the_file(tmp_path, capsys, monkeypatch):
    import wanjax.adapters.media.video_files as video_files

    real = video_files.rgb_to_yuv420p
    frames = []

    def disk_full_after_two_frames(frame):
        frames.append(frame)
        if len(frames) > 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(frame)

    monkeypatch.setattr(video_files, "rgb_to_yuv420p", disk_full_after_two_frames)
    _fails(tmp_path, capsys, [], f"cannot write {tmp_path / 'v.mp4'}: No space left on device", "it was not written")
    assert len(frames) == 3  # the mp4 was being written when the disk filled
