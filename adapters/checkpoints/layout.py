"""Which layout a checkpoint folder has: diffusers format or the official Wan repos'."""

from __future__ import annotations

from pathlib import Path

from wanjax.adapters.checkpoints.checkpoint import Checkpoint, ReplacedFiles
from wanjax.adapters.checkpoints.diffusers_folder import DiffusersCheckpoint
from wanjax.adapters.checkpoints.official_folder import OfficialCheckpoint, is_official_folder
from wanjax.domain.errors import CheckpointError, UnsupportedModelError


def open_checkpoint_folder(root: Path, replaced: ReplacedFiles = ReplacedFiles()) -> Checkpoint:
    """`root` as a diffusers-format folder (it has model_index.json) or an official one (a
    WanModel config.json at the top or in high_noise_model/); anything else is an error
    naming what each layout holds."""
    root = Path(root)
    if not root.is_dir():
        raise CheckpointError(f"checkpoint folder not found: {root}")
    if (root / "model_index.json").is_file():
        return DiffusersCheckpoint(root, replaced)
    if is_official_folder(root):
        return OfficialCheckpoint(root, replaced)
    if (root / "modular_model_index.json").is_file():
        raise UnsupportedModelError(
            f"{root} is a diffusers modular pipeline folder (modular_model_index.json, saved by a "
            "ModularPipeline such as WanModularPipeline), which wanjax does not read: its guiders and defaults "
            "live in the pipeline's blocks. Save the same components with a WanPipeline (or "
            "WanImageToVideoPipeline, WanVACEPipeline) and point --model at that folder"
        )
    raise CheckpointError(
        f"{root} is not a Wan checkpoint: model_index.json is missing (a diffusers-format folder, "
        "e.g. Wan-AI/Wan2.1-T2V-1.3B-Diffusers, has it) and so is config.json (an official-format "
        "folder, e.g. Wan-AI/Wan2.1-T2V-1.3B, has it beside Wan2.1_VAE.pth; Wan 2.2 A14B in "
        "high_noise_model/); point --model at the downloaded repo's folder"
    )
