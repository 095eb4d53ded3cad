"""Input images: read from png/jpg (a client's bytes: png, jpg or webp, nothing else), and fitted
to the video size as diffusers' Wan pipelines do."""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import numpy as np

from wanjax.domain.errors import InvalidRequestError

T = TypeVar("T")
CLIENT_IMAGE_FORMATS = ("PNG", "JPEG", "WEBP")
"""The formats a client's bytes are opened as (PIL's names); no other decoder sees them."""


def read_image(path: Path, what: str = "image") -> np.ndarray:
    """RGB pixels [H, W, 3] uint8; an unreadable file is an InvalidRequestError naming it (`what`, e.g.
    the CLI's flag, then its path)."""
    return _decoded(path, f"{what} {path}")


def encode_image(pixels: np.ndarray, path: Path, suffix: str) -> None:
    """Writes RGB pixels [H, W, 3] uint8 at `path` itself in the format `suffix` names (.png, .jpg,
    .webp): callers that rename files together into place give a temporary path."""
    from PIL import Image

    Image.fromarray(pixels).save(path, format=Image.registered_extensions()[suffix.lower()])


def decode_image(data: bytes, what: str) -> np.ndarray:
    """`read_image` of a client's bytes (`what` names them in errors, e.g. the request field),
    opened only as one of CLIENT_IMAGE_FORMATS."""
    return _decoded(io.BytesIO(data), what, CLIENT_IMAGE_FORMATS)


def image_size(data: bytes, what: str) -> tuple[int, int]:
    """(width, height) of a client's image, read from its header: nothing is decoded (so PIL's
    warning of a large image, which the caller bounds itself, is not given)."""
    return _size(io.BytesIO(data), what, CLIENT_IMAGE_FORMATS)


def read_image_size(path: Path, what: str = "image") -> tuple[int, int]:
    """(width, height) of the image file at `path`, read as `image_size` reads a client's bytes
    (errors as `read_image`)."""
    return _size(path, f"{what} {path}", None)


def _size(source: Path | BinaryIO, what: str, formats: tuple[str, ...] | None) -> tuple[int, int]:
    from PIL import Image

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        return _opened(source, what, formats, lambda image: image.size)


def _decoded(source: Path | BinaryIO, what: str, formats: tuple[str, ...] | None = None) -> np.ndarray:
    return _opened(source, what, formats, lambda image: np.asarray(image.convert("RGB")))


def _opened(source: Path | BinaryIO, what: str, formats: tuple[str, ...] | None, read: Callable[[Any], T]) -> T:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(source, formats=formats) as image:
            return read(image)
    except FileNotFoundError:
        raise InvalidRequestError(f"{what} does not exist") from None
    except Image.DecompressionBombError as err:
        raise InvalidRequestError(f"{what} is too large to read safely ({err}); resize it first") from None
    except (UnidentifiedImageError, OSError) as err:
        kinds = "png/jpg" if formats is None else "/".join(name.lower() for name in formats)
        # PIL's own words for bytes it cannot identify name the object it read them from
        reason = "no image of those formats" if isinstance(err, UnidentifiedImageError) else err
        raise InvalidRequestError(f"{what} is not a readable {kinds} image ({reason})") from None


def covered(pixels: np.ndarray, height: int, width: int) -> np.ndarray:
    """uint8 [height, width, 3]: the short side resized to min(height, width) with PIL's bilinear
    filter, then the centre cropped (black where the resized image is smaller), as torchvision's
    Resize(min(height, width)) then CenterCrop((height, width)) fit an image (the official Wan S2V)."""
    from PIL import Image

    image = Image.fromarray(pixels)
    w, h = image.size
    short = min(height, width)
    long = int(short * max(w, h) / min(w, h))
    image = image.resize((short, long) if w <= h else (long, short), resample=Image.Resampling.BILINEAR)
    resized = np.asarray(image)
    rh, rw = resized.shape[:2]
    pad_h, pad_w = max(0, height - rh), max(0, width - rw)
    resized = np.pad(resized, ((pad_h // 2, (pad_h + 1) // 2), (pad_w // 2, (pad_w + 1) // 2), (0, 0)))
    rh, rw = resized.shape[:2]
    top, left = int(round((rh - height) / 2.0)), int(round((rw - width) / 2.0))
    return np.ascontiguousarray(resized[top : top + height, left : left + width])


def fit_image(pixels: np.ndarray, height: int, width: int) -> np.ndarray:
    """[height, width, 3] float32 in [-1, 1]: stretched with Lanczos, as diffusers' VideoProcessor does."""
    from PIL import Image

    resized = Image.fromarray(pixels).resize((width, height), resample=Image.Resampling.LANCZOS)
    return np.asarray(resized).astype(np.float32) / 255.0 * 2.0 - 1.0

