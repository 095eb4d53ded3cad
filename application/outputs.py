"""Where results go: the sink is chosen by the output file's suffix."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from wanjax.domain.errors import InvalidRequestError

VIDEO_SUFFIXES = (".mp4", ".npy")
LATENT_SUFFIXES = (".npy",)


def check_output_path(path: Path, output_type: str) -> None:
    """Fails before any work if the result could not be written to `path`."""
    allowed = LATENT_SUFFIXES if output_type == "latent" else VIDEO_SUFFIXES
    if path.suffix.lower() not in allowed:
        raise InvalidRequestError(f"output {path}: for {output_type} output the file must end in {' or '.join(allowed)}")
    if path.is_dir():
        raise InvalidRequestError(f"output {path} is a folder; give a file name such as {path / ('video' + allowed[0])}")


def write_output(array: np.ndarray, path: Path, fps: int) -> None:
    """.mp4 gets the first video of the batch; .npy gets the whole array. Written atomically."""
    from wanjax.adapters.media.video_files import Mp4Sink, NpySink

    if path.suffix.lower() == ".mp4":
        Mp4Sink().write(array[0], path, fps)
    else:
        NpySink().write(array, path)
