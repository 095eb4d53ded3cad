"""Turns `--model` (a folder or a Hugging Face repo id) into a local checkpoint folder."""

from __future__ import annotations

import os
import re
from pathlib import Path

from wanjax.domain.errors import CheckpointError

REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def locate_checkpoint(model: str) -> Path:
    """A local folder as given, or the snapshot of a repo id in the Hugging Face cache.

    The cache is tried first with no network; the hub is asked only when that misses and
    HF_HUB_OFFLINE is not set.
    """
    path = Path(model).expanduser()
    if path.is_dir():
        return path
    if not REPO_ID.match(model):
        raise CheckpointError(f"checkpoint folder not found: {path}; pass an existing folder, a repo id like Wan-AI/Wan2.1-T2V-1.3B-Diffusers, or a preset name (see `wanjax presets`)")
    return _from_hub(model)


def local_checkpoint(model: str) -> Path | None:
    """`model`'s folder on this machine (the folder itself, or a repo id's snapshot in the Hugging
    Face cache), None where it would have to be downloaded; never asks the hub."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    path = Path(model).expanduser()
    if path.is_dir():
        return path
    if not REPO_ID.match(model):
        return None
    try:
        return Path(snapshot_download(model, local_files_only=True))
    except (LocalEntryNotFoundError, HFValidationError):
        return None


def _from_hub(repo_id: str) -> Path:
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    try:
        return Path(snapshot_download(repo_id, local_files_only=True))
    except LocalEntryNotFoundError:
        pass
    except HFValidationError as err:
        raise CheckpointError(
            f"{repo_id!r} is not a local folder and not a valid Hugging Face repo id ({err}); pass an existing "
            "folder, a repo id like Wan-AI/Wan2.1-T2V-1.3B-Diffusers, or a preset name (see `wanjax presets`)"
        ) from None
    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
    where = f"not a local folder and not in the Hugging Face cache ({constants.HF_HUB_CACHE})"
    if offline:
        raise CheckpointError(
            f"{repo_id!r} is {where}, and HF_HUB_OFFLINE is set; download it first "
            f"(`hf download {repo_id}`) or pass a local folder"
        )
    try:
        return Path(snapshot_download(repo_id))
    except Exception as err:  # network, auth, missing repo: all end the same way for the user
        raise CheckpointError(
            f"{repo_id!r} is {where}, and downloading it failed ({type(err).__name__}: {err}); "
            "check the id and your network, or pass a local folder"
        ) from None
