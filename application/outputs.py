"""Where results go: the sink is chosen by the output file's suffix."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from wanjax.domain.caching.calibration import CalibratedCurve
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


def output_paths(path: Path, batch: int) -> list[Path]:
    """Where a batch of `batch` results goes: .npy holds the whole array; .mp4 one file per video,
    `path` itself for one, NAME-0.mp4, NAME-1.mp4, ... for several."""
    if path.suffix.lower() != ".mp4" or batch == 1:
        return [path]
    return [path.with_stem(f"{path.stem}-{i}") for i in range(batch)]


def write_output(array: np.ndarray, path: Path, fps: int) -> None:
    """Writes `array` ([B, ...]) to `output_paths(path, B)`, each file atomically."""
    from wanjax.adapters.media.video_files import Mp4Sink, NpySink

    if path.suffix.lower() != ".mp4":
        NpySink().write(array, path)
        return
    for video, target in zip(array, output_paths(path, len(array)), strict=True):
        Mp4Sink().write(video, target, fps)


def calibration_path(path: Path) -> Path:
    """Where a calibration run's MagCache curve goes: beside the output, NAME.magcache.yaml."""
    return path.with_name(f"{path.stem}.magcache.yaml")


def write_calibration(curve: CalibratedCurve, path: Path, title: str) -> None:
    """The curve as preset lines (`curve.preset_fragment`), written atomically to `path`."""
    from wanjax.adapters.media.atomic import atomic_path

    with atomic_path(path) as temporary:
        temporary.write_text(curve.preset_fragment(title))

