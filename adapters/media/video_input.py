"""Source videos for video-to-video: an mp4 (any container PyAV reads) or a folder of frames; a
client's bytes: mp4/mov or matroska/webm only, recognised by their first bytes before FFmpeg sees
them (a playlist such as ffconcat would have FFmpeg read files of the server's)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from wanjax.adapters.media.images import read_image, read_image_size
from wanjax.domain.errors import InvalidRequestError

FRAME_SUFFIXES = (".png", ".jpg", ".jpeg")
MP4_BOXES = (b"ftyp", b"moov", b"mdat", b"free", b"skip", b"wide")
MATROSKA_MAGIC = b"\x1a\x45\xdf\xa3"
CLIENT_VIDEO_OPTIONS = {"enable_drefs": "0", "protocol_whitelist": "none"}
"""Demuxer options for a client's bytes (read through PyAV's in-memory I/O, so no protocol opens
them): no external data references of an mp4, and no protocol (`none` names none) for anything
nested."""


def read_video(path: Path, num_frames: int, what: str = "video") -> np.ndarray:
    """The first `num_frames` frames of the video file or frame folder at `path`, RGB uint8
    [F, H, W, 3]; a folder's png/jpg files are its frames in name order. A missing or unreadable
    source, or one with fewer frames, is an InvalidRequestError naming it (`what`, e.g. the CLI's
    flag, then its path)."""
    return _read(Path(path), most=num_frames, least=num_frames, what=f"{what} {path}")


def read_whole_video(path: Path, most: int, what: str = "video") -> np.ndarray:
    """Every frame (up to `most`) of the video file or frame folder at `path`, RGB uint8 [F, H, W, 3];
    errors as `read_video`."""
    return _read(Path(path), most=most, least=1, what=f"{what} {path}")


def _read(path: Path, most: int, least: int, what: str) -> np.ndarray:
    if path.is_dir():
        frames = _folder_frames(path, most, what)
    elif not path.exists():
        raise InvalidRequestError(f"{what} does not exist")
    else:
        frames = _decoded_frames(str(path), most, what)
    return _stacked(frames, least, what)


def decode_video(data: bytes, num_frames: int, what: str) -> np.ndarray:
    """`read_video` of a client's video bytes (`what` names them in errors, e.g. the request
    field), opened only as mp4/mov or matroska/webm."""
    frames = _decoded_frames(io.BytesIO(data), num_frames, what, _client_format(data, what))
    return _stacked(frames, num_frames, what)


def decode_whole_video(data: bytes, most: int, what: str) -> np.ndarray:
    """`read_whole_video` of a client's video bytes, opened as `decode_video` opens them."""
    frames = _decoded_frames(io.BytesIO(data), most, what, _client_format(data, what))
    return _stacked(frames, 1, what)


def probe_video(source: Path | bytes, num_frames: int, what: str) -> tuple[int, int]:
    """(width, height) of what `read_video` (a path: a file or frame folder) or `decode_video` (a
    client's bytes) gives, once the source holds at least `num_frames` frames: read from headers,
    nothing decoded (`_probed`)."""
    width, height, frames = _probed(source, num_frames, what)
    if frames < num_frames:
        raise InvalidRequestError(
            f"{what} has {frames} frame(s); num_frames={num_frames} needs at least that many "
            "(give a longer video or lower num_frames, 4k+1)"
        )
    return width, height


def probe_whole_video(source: Path | bytes, most: int, what: str) -> tuple[int, int, int]:
    """(width, height, frames) of what `read_whole_video` or `decode_whole_video` gives (its frames
    counted up to `most`), sources as `probe_video`'s: read from headers, nothing decoded."""
    width, height, frames = _probed(source, most, what)
    if frames < 1:
        raise InvalidRequestError(f"{what} holds no frames; send a video of at least one")
    return width, height, frames


def _probed(source: Path | bytes, most: int, what: str) -> tuple[int, int, int]:
    """(width, height, frames up to `most`) of a video file, frame folder or client's bytes. A
    file's frames are its stream header's count where its container records one (mp4, mov: the
    sample table), else its video packets, demuxed and counted (matroska, webm); a folder's are its
    png/jpg files, their sizes read from their headers. Nothing is decoded."""
    if isinstance(source, Path) and source.is_dir():
        return _folder_shape(source, most, what)
    if isinstance(source, Path) and not source.exists():
        raise InvalidRequestError(f"{what} does not exist")
    import av

    if isinstance(source, Path):
        opened, form, options = str(source), None, None
    else:
        opened, form, options = io.BytesIO(source), _client_format(source, what), CLIENT_VIDEO_OPTIONS
    try:
        with av.open(opened, format=form, options=options) as container:
            if not container.streams.video:
                raise InvalidRequestError(f"{what} holds no video stream")
            stream = container.streams.video[0]
            frames = stream.frames or _packets(container, stream, most)
            return stream.codec_context.width, stream.codec_context.height, min(frames, most)
    except InvalidRequestError:
        raise
    except (av.FFmpegError, OSError, ValueError) as err:
        raise InvalidRequestError(f"{what} is not a readable video file ({_reason(err)})") from None


def _packets(container: Any, stream: Any, most: int) -> int:
    """The stream's video packets (frames) up to `most`, demuxed, none decoded."""
    packets = 0
    for packet in container.demux(stream):
        packets += packet.size > 0
        if packets == most:
            break
    return packets


def _folder_shape(folder: Path, most: int, what: str) -> tuple[int, int, int]:
    """(width, height, frames up to `most`) of a frame folder, from its files' headers."""
    files = _frame_files(folder, what)[:most]
    sizes = {read_image_size(path) for path in files}
    if len(sizes) > 1:
        shapes = sorted((height, width, 3) for width, height in sizes)
        raise InvalidRequestError(f"{what}: its frames differ in size ({', '.join(map(str, shapes))})")
    (width, height), = sizes
    return width, height, len(files)


def _client_format(data: bytes, what: str) -> str:
    """FFmpeg's demuxer for a client's bytes, by their first bytes: mp4/mov or matroska/webm."""
    if data[4:8] in MP4_BOXES:
        return "mp4"
    if data[:4] == MATROSKA_MAGIC:
        return "matroska"
    raise InvalidRequestError(f"{what} is not an mp4, mov, mkv or webm file; send the video as one of those")


def _folder_frames(folder: Path, num_frames: int, what: str) -> list[np.ndarray]:
    return [read_image(f) for f in _frame_files(folder, what)[:num_frames]]


def _frame_files(folder: Path, what: str) -> list[Path]:
    """A frame folder's png/jpg files in name order (at least one)."""
    files = sorted(f for f in folder.iterdir() if f.suffix.lower() in FRAME_SUFFIXES)
    if not files:
        raise InvalidRequestError(f"{what} is a folder without png/jpg frames; give an mp4 or a folder of frames")
    return files


def _decoded_frames(source: str | BinaryIO, num_frames: int, what: str, form: str | None = None) -> list[np.ndarray]:
    import av

    frames: list[np.ndarray] = []
    options = None if form is None else CLIENT_VIDEO_OPTIONS
    try:
        with av.open(source, format=form, options=options) as container:
            if not container.streams.video:
                raise InvalidRequestError(f"{what} holds no video stream")
            for frame in container.decode(video=0):
                frames.append(frame.to_ndarray(format="rgb24"))
                if len(frames) == num_frames:
                    break
    except InvalidRequestError:
        raise
    except (av.FFmpegError, OSError, ValueError) as err:
        raise InvalidRequestError(f"{what} is not a readable video file ({_reason(err)})") from None
    return frames


def _stacked(frames: list[np.ndarray], num_frames: int, what: str) -> np.ndarray:
    if len(frames) < num_frames:
        raise InvalidRequestError(
            f"{what} has {len(frames)} frame(s); num_frames={num_frames} needs at least that many "
            "(give a longer video or lower --num-frames, 4k+1)"
        )
    shapes = {frame.shape for frame in frames}
    if len(shapes) > 1:
        raise InvalidRequestError(f"{what}: its frames differ in size ({', '.join(map(str, sorted(shapes)))})")
    return np.stack(frames)


def _reason(err: Exception) -> str:
    """FFmpeg's words for an error, without the error number and the stand-in name of the bytes it
    read (`[Errno 1094995529] Invalid data found when processing input: '<none>'`)."""
    return getattr(err, "strerror", None) or str(err)
