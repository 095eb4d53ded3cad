"""Loading transformers components from a diffusers-format checkpoint folder, offline, with errors
that name the folder and the fix."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import torch

from wanjax.domain.errors import CheckpointError, ConfigError

TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
"""Dtypes the encoders run in (float16 overflows in T5-family encoders)."""

Component = TypeVar("Component")


def torch_dtype(name: str, what: str) -> torch.dtype:
    if name not in TORCH_DTYPES:
        raise ConfigError(f"{what} dtype {name!r} is not supported; use one of {sorted(TORCH_DTYPES)}")
    return TORCH_DTYPES[name]


def require_folders(folders: dict[str, Path]) -> None:
    """Each `what -> folder` exists; checked together, before anything slow loads."""
    for what, folder in folders.items():
        _require_folder(Path(folder), what)


def load_pretrained(loader: Callable[..., Component], folder: Path, what: str, **kwargs: Any) -> Component:
    """`loader(folder, local_files_only=True, **kwargs)`: a missing or unloadable folder is a CheckpointError."""
    folder = Path(folder)
    _require_folder(folder, what)
    try:
        return loader(folder, local_files_only=True, **kwargs)
    except (OSError, ValueError) as error:
        raise CheckpointError(f"cannot load the {what} from {folder}: {error}") from error


def _require_folder(folder: Path, what: str) -> None:
    if not folder.is_dir():
        raise CheckpointError(
            f"{what} folder not found: {folder}. A diffusers-format Wan checkpoint holds it beside "
            "transformer/ and vae/; point the model path at that checkpoint root "
            "(e.g. a download of Wan-AI/Wan2.1-T2V-1.3B-Diffusers)."
        )
