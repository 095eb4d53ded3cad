"""mp4 writing: the same frames give the same bytes every time; colours as FFmpeg converts them."""

import ctypes
import hashlib

import av
import numpy as np

from wanjax.adapters.media.video_files import Mp4Sink
from wanjax.adapters.media.yuv import rgb_to_yuv420p


def _frames() -> np.ndarray:
    return np.random.default_rng(0).integers(0, 256, (5, 32, 48, 3), dtype=np.uint8)


def test_same_frames_same_bytes_over_many_writes(tmp_path):
    # once 1 write in ~8 differed (x264's uninitialised reads, most likely); 24 writes catch that
    digests = set()
    for i in range(24):
        Mp4Sink().write(_frames(), tmp_path / f"{i}.mp4", 16)
        digests.add(hashlib.md5((tmp_path / f"{i}.mp4").read_bytes()).hexdigest())
    assert len(digests) == 1


def _dirty_the_heap(fill: int) -> None:
    """Leaves freed heap blocks of many sizes filled with `fill`, where a later malloc (x264's)
    may find them."""
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    blocks = []
    for size in (64, 256, 1024, 4096, 16384, 65536, 100000) * 20:
        blocks.append(libc.malloc(size))
        ctypes.memset(blocks[-1], fill, size)
    for block in blocks:
        libc.free(block)


def test_same_frames_same_bytes_whatever_the_heap_held(tmp_path):
    # x264 with B-frames read memory it never initialised: then these five heap fillings gave
    # two different files (measured); X264_OPTIONS turns B-frames off
    digests = set()
    for fill in (0x00, 0xFF, 0x55, 0xAA, 0x01):
        _dirty_the_heap(fill)
        Mp4Sink().write(_frames(), tmp_path / "v.mp4", 16)
        digests.add(hashlib.md5((tmp_path / "v.mp4").read_bytes()).hexdigest())
    assert len(digests) == 1


def _ffmpeg_yuv(frame):
    return av.VideoFrame.from_ndarray(frame, format="rgb24").reformat(format="yuv420p").to_ndarray()


def test_luma_matches_ffmpeg_within_one_level():
    frame = _frames()[0]
    reference, ours = _ffmpeg_yuv(frame), rgb_to_yuv420p(frame)
    assert ours.shape == reference.shape == (48, 48)
    assert np.max(np.abs(ours[:32].astype(int) - reference[:32].astype(int))) <= 1


def test_chroma_matches_ffmpeg_on_smooth_pictures():
    # 2x2 box averaging here, FFmpeg's own subsampling filter there: equal up to rounding where
    # colour varies smoothly (on pixel noise the two filters legitimately differ)
    y, x = np.mgrid[0:32, 0:48]
    frame = np.stack([x * 4, y * 6, (x + y) * 2], axis=-1).astype(np.uint8)
    reference, ours = _ffmpeg_yuv(frame), rgb_to_yuv420p(frame)
    assert np.max(np.abs(ours[32:].astype(int) - reference[32:].astype(int))) <= 2


def test_written_video_decodes_to_the_frames():
    frames = np.full((3, 32, 48, 3), (200, 40, 90), dtype=np.uint8)  # a flat colour survives 4:2:0 and crf
    path = _write(frames)
    with av.open(str(path)) as container:
        decoded = np.stack([f.to_ndarray(format="rgb24") for f in container.decode(video=0)])
    assert decoded.shape == frames.shape
    assert np.max(np.abs(decoded.astype(int) - frames.astype(int))) <= 3  # limited-range rounding


def _write(frames, folder=None):
    import tempfile
    from pathlib import Path

    path = Path(folder or tempfile.mkdtemp()) / "v.mp4"
    Mp4Sink().write(frames, path, 16)
    return path


def test_frames_written_as_they_come_make_the_same_file_and_play_while_written(tmp_path):
    """An mp4 written part after part (a segment's frames at a time) is the file written at once, and
    while it is written its whole fragments are a playable video of its first frames."""
    import io

    from wanjax.adapters.media.video_files import whole_fragments

    frames = np.random.default_rng(1).integers(0, 256, (90, 32, 48, 3), dtype=np.uint8)
    Mp4Sink().write(frames, tmp_path / "whole.mp4", 16)
    with Mp4Sink().writer(tmp_path / "parts.mp4", 16) as writer:
        writer.append(frames[:60])
        partial = whole_fragments((tmp_path / "parts.mp4").read_bytes())
        writer.append(frames[60:])
    assert (tmp_path / "parts.mp4").read_bytes() == (tmp_path / "whole.mp4").read_bytes()
    played, whole = (_decoded(source) for source in (io.BytesIO(partial), tmp_path / "whole.mp4"))
    assert 0 < len(played) < 60 and len(whole) == 90  # x264's lookahead holds the latest back
    np.testing.assert_array_equal(played, whole[: len(played)])  # the video's first frames
    assert whole_fragments(b"") is None and whole_fragments(partial[: len(partial) - 1]) != partial


def _decoded(source) -> np.ndarray:
    with av.open(source) as container:
        return np.stack([frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)])
