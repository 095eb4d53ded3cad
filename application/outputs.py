"""Where results go: the sink is chosen by the output file's suffix."""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from pathlib import Path

import numpy as np

from wanjax.domain.caching.calibration import CalibratedCurve
from wanjax.domain.errors import InvalidRequestError, OutputError

VIDEO_SUFFIXES = (".mp4", ".npy")
LATENT_SUFFIXES = (".npy",)


def check_output_path(path: Path, output_type: str, shape: Sequence[int] = ()) -> None:
    """Fails before any work if the result could not be written to `path`: a wrong suffix, a
    folder in its place, a parent that is a file or where no file can be created, or (with the
    result's `shape`) too little free space for it."""
    allowed = LATENT_SUFFIXES if output_type == "latent" else VIDEO_SUFFIXES
    if path.suffix.lower() not in allowed:
        raise InvalidRequestError(f"output {path}: for {output_type} output the file must end in {' or '.join(allowed)}")
    if path.is_dir():
        raise InvalidRequestError(f"output {path} is a folder; give a file name such as {path / ('video' + allowed[0])}")
    folder = _existing_ancestor(path)
    if not folder.is_dir():
        raise OutputError(f"output {path}: {folder} is a file, not a folder; choose another --out")
    try:
        descriptor, probe = tempfile.mkstemp(prefix=f".{path.name}.probe-", dir=folder)
        os.close(descriptor)
        os.unlink(probe)
    except OSError as err:
        raise OutputError(f"output {path}: cannot create files in {folder} ({err.strerror}); choose a writable folder") from None
    needed = output_bytes(path, output_type, shape) if shape else 0
    free = shutil.disk_usage(folder).free
    if needed > free:
        raise OutputError(
            f"output {path}: needs up to {needed / 2**20:.1f} MiB, {folder} has {free / 2**20:.1f} MiB free; "
            "free some space or choose another folder"
        )


def _existing_ancestor(path: Path) -> Path:
    """The nearest folder (or file) above `path` that exists: where its missing folders would go."""
    parent = path.absolute().parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    return parent


def output_bytes(path: Path, output_type: str, shape: Sequence[int]) -> int:
    """At most how many bytes a result of `shape` takes at `path`: .npy holds it raw (uint8 frames
    [B, F, H, W, 3], float32 latents), an mp4 no more than its raw yuv420p frames (1.5 bytes a pixel)."""
    if path.suffix.lower() == ".mp4":
        batch, frames, height, width = shape[:4]
        return batch * frames * height * width * 3 // 2
    return math.prod(shape) * (4 if output_type == "latent" else 1) + 128  # + the .npy header


def output_paths(path: Path, batch: int) -> list[Path]:
    """Where a batch of `batch` results goes: .npy holds the whole array; .mp4 one file per video,
    `path` itself for one, NAME-0.mp4, NAME-1.mp4, ... for several."""
    if path.suffix.lower() != ".mp4" or batch == 1:
        return [path]
    return [path.with_stem(f"{path.stem}-{i}") for i in range(batch)]


def write_output(
    array: np.ndarray, path: Path, fps: int, *, committing: Callable[[], AbstractContextManager[object]] = nullcontext
) -> None:
    """Writes `array` ([B, ...]) to `output_paths(path, B)` at once (`streamed_output`'s one part)."""
    with streamed_output(path, len(array), fps, committing=committing) as append:
        append(array)


@contextmanager
def streamed_output(
    path: Path, batch: int, fps: int, *, committing: Callable[[], AbstractContextManager[object]] = nullcontext
) -> Iterator[Callable[[np.ndarray], None]]:
    """Yields `append(part)`, which takes a result of `batch` rows part after part ([B, f, ...]: a
    segment's frames) and writes it at once into every mp4 of `output_paths(path, B)` (a .npy, one
    array with its shape up front, gathers the parts and is written at the end). Every file stays
    under its temporary name until the block ends; then all are renamed into place together inside
    `committing()` (the CLI's refuses once a stop was asked for), so a failed or stopped run leaves
    none of them, not even part of a video; an OutputError naming the file when the system refuses
    (a full disk, a folder made read-only meanwhile)."""
    from wanjax.adapters.media.atomic import atomic_paths
    from wanjax.adapters.media.video_files import Mp4Sink, NpySink

    targets = output_paths(path, batch)
    with _refusal_named(path), atomic_paths(targets, committing=committing) as temporaries, ExitStack() as open_files:
        if path.suffix.lower() == ".mp4":
            writers = [open_files.enter_context(Mp4Sink().writer(temporary, fps)) for temporary in temporaries]

            def append(part: np.ndarray) -> None:
                for writer, rows in zip(writers, part, strict=True):
                    writer.append(rows)

            yield append
        else:
            parts: list[np.ndarray] = []
            yield parts.append
            NpySink().encode(np.concatenate(parts, axis=1) if len(parts) > 1 else parts[0], temporaries[0], fps)


@contextmanager
def _refusal_named(target: Path) -> Iterator[None]:
    try:
        yield
    except OSError as err:
        raise OutputError(
            f"cannot write {target}: {err.strerror or err}; it was not written. Free some space or choose another --out"
        ) from None


def calibration_path(path: Path) -> Path:
    """Where a calibration run's MagCache curve goes: beside the output, NAME.magcache.yaml."""
    return path.with_name(f"{path.stem}.magcache.yaml")


def write_calibration(curve: CalibratedCurve, path: Path, title: str) -> None:
    """The curve as preset lines (`curve.preset_fragment`), written atomically to `path`."""
    from wanjax.adapters.media.atomic import atomic_path

    with _refusal_named(path), atomic_path(path) as temporary:
        temporary.write_text(curve.preset_fragment(title))

