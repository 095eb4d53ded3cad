"""Input images: read from png/jpg, and fitted to the video size as diffusers' Wan pipelines do."""

from __future__ import annotations

import io
from pathlib import Path
from typing import BinaryIO

import numpy as np

from wanjax.domain.errors import InvalidRequestError


def read_image(path: Path) -> np.ndarray:
    """RGB pixels [H, W, 3] uint8; an unreadable file is an InvalidRequestError naming it."""
    return _decoded(path, f"image {path}")


def write_image(pixels: np.ndarray, path: Path) -> None:
    """RGB pixels [H, W, 3] uint8 to `path` (its suffix names the format: .png, .jpg, .webp),
    written atomically."""
    from PIL import Image

    from wanjax.adapters.media.atomic import atomic_path

    with atomic_path(path) as temporary:
        Image.fromarray(pixels).save(temporary, format=Image.registered_extensions()[path.suffix.lower()])


def decode_image(data: bytes, what: str) -> np.ndarray:
    """`read_image` of a file's bytes (`what` names them in errors, e.g. the request field)."""
    return _decoded(io.BytesIO(data), what)


def _decoded(source: Path | BinaryIO, what: str) -> np.ndarray:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(source) as image:
            return np.asarray(image.convert("RGB"))
    except FileNotFoundError:
        raise InvalidRequestError(f"{what} does not exist") from None
    except Image.DecompressionBombError as err:
        raise InvalidRequestError(f"{what} is too large to read safely ({err}); resize it first") from None
    except (UnidentifiedImageError, OSError) as err:
        raise InvalidRequestError(f"{what} is not a readable png/jpg image ({err})") from None


def fit_image(pixels: np.ndarray, height: int, width: int) -> np.ndarray:
    """[height, width, 3] float32 in [-1, 1]: stretched with Lanczos, as diffusers' VideoProcessor does."""
    from PIL import Image

    resized = Image.fromarray(pixels).resize((width, height), resample=Image.Resampling.LANCZOS)
    return np.asarray(resized).astype(np.float32) / 255.0 * 2.0 - 1.0
