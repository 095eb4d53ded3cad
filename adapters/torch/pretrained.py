"""Loading transformers components, offline, from a diffusers-format checkpoint folder or from
tensors (one weights file), with errors that name the folder or file and the fix.

Loads run one at a time in the process: transformers' `from_pretrained` patches functions that
every thread shares (weight initialisation, the default device) while it builds a model, and
concurrent loads left them patched: `Cannot copy out of meta tensor` then, and in every later
load in the process. No load runs code shipped with a checkpoint (`trust_remote_code=False`)."""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import ml_dtypes
import numpy as np
import torch

from wanjax.domain.errors import CheckpointError, ConfigError

TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
"""Dtypes the encoders run in (float16 overflows in T5-family encoders)."""

Component = TypeVar("Component")

_LOADING = threading.Lock()  # see the module docstring


def torch_dtype(name: str, what: str) -> torch.dtype:
    if name not in TORCH_DTYPES:
        raise ConfigError(f"{what} dtype {name!r} is not supported; use one of {sorted(TORCH_DTYPES)}")
    return TORCH_DTYPES[name]


def require_folders(folders: dict[str, Path]) -> None:
    """Each `what -> folder` exists; checked together, before anything slow loads."""
    for what, folder in folders.items():
        _require_folder(Path(folder), what)


def load_pretrained(loader: Callable[..., Component], folder: Path, what: str, **kwargs: Any) -> Component:
    """`loader(folder, local_files_only=True, trust_remote_code=False, **kwargs)`, one load at a time
    in the process: a missing or unloadable folder is a CheckpointError."""
    folder = Path(folder)
    _require_folder(folder, what)
    try:
        with _LOADING:
            return loader(folder, local_files_only=True, trust_remote_code=False, **kwargs)
    except (OSError, ValueError) as error:
        raise CheckpointError(f"cannot load the {what} from {folder}: {error}") from error


def _require_folder(folder: Path, what: str) -> None:
    if not folder.is_dir():
        raise CheckpointError(
            f"{what} folder not found: {folder}. A diffusers-format Wan checkpoint holds it beside "
            "transformer/ and vae/; point the model path at that checkpoint root "
            "(e.g. a download of Wan-AI/Wan2.1-T2V-1.3B-Diffusers)."
        )


def model_from_tensors(
    model_class: Any, config: Any, tensors: Mapping[str, np.ndarray], what: str, where: Path, dtype: torch.dtype
) -> Any:
    """A transformers `model_class` of `config` holding `tensors` (numpy, named as the model
    names them) in `dtype`, built without random initialisation. A missing, unexpected or
    misshapen tensor is a CheckpointError naming it."""
    state = {name: _torch_view(array) for name, array in tensors.items()}
    try:
        with _LOADING:
            model, loading = model_class.from_pretrained(
                None, config=config, state_dict=state, dtype=dtype, output_loading_info=True, trust_remote_code=False
            )
    except (RuntimeError, ValueError) as error:
        raise CheckpointError(f"{where}: cannot load the {what}: {error}") from error
    problems = {kind: sorted(map(str, names)) for kind, names in loading.items() if kind != "error_msgs" and names}
    if problems:
        listed = "; ".join(f"{kind.replace('_', ' ')} {names[:5]}" for kind, names in problems.items())
        raise CheckpointError(f"{where}: the weights do not fit the {what} their shapes describe: {listed}")
    return model.eval()


def _torch_view(array: np.ndarray) -> torch.Tensor:
    """A torch tensor over `array`'s memory (bfloat16 through its 16-bit pattern). Read-only arrays
    (memory-mapped files) are fine: the loader copies them into the model, never writes them."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        if array.dtype == ml_dtypes.bfloat16:
            return torch.from_numpy(np.ascontiguousarray(array).view(np.int16)).view(torch.bfloat16)
        return torch.from_numpy(np.ascontiguousarray(array))
