"""Which published Wan model a lone transformer file is, from its tensors' shapes.

`--model FILE` (a GGUF, a scaled fp8 or a plain safetensors transformer, as people download them
without a diffusers folder) runs the preset of the published model whose transformer has exactly the
file's architecture, with the file as its `transformer_file`. The architecture is read from a few
shapes (the patch embedding's width and channels, the FFN's width, the number of blocks, the text
and image embedders, VACE blocks, Animate's additions); heads are not in any shape, so two published
models that differ only there could not be told apart (none do). Wan 2.1 T2V 14B and each Wan 2.2
A14B expert share one architecture: a lone file is the one-expert model, and a two-expert run names
its preset and both files. SkyReels-V2's 14B Diffusion Forcing models share it too (their causal
blocks are in no tensor): a file is one of them when its name says so (`repo_named_by`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from wanjax.adapters.checkpoints.original_names import transformer_weights
from wanjax.domain.architectures import ARCHITECTURES
from wanjax.domain.errors import UnsupportedModelError
from wanjax.domain.specs import TransformerSpec

Signature = tuple[tuple[str, object], ...]


def spec_signature(spec: TransformerSpec) -> Signature:
    """What of a transformer's architecture its tensor shapes show."""
    return (
        ("width", spec.inner_dim), ("in_channels", spec.in_channels),
        ("out_channels", spec.out_channels * math.prod(spec.patch_size)), ("ffn_dim", spec.ffn_dim),
        ("blocks", spec.num_layers), ("text_dim", spec.text_dim), ("image_dim", spec.image_dim),
        ("image_positions", spec.pos_embed_seq_len), ("vace_blocks", len(spec.vace_layers or ())),
        ("animate", spec.animate is not None), ("fps_embedding", spec.inject_sample_info),
        ("s2v", spec.s2v is not None),
    )  # fmt: skip


def _shape(weights: Mapping[str, np.ndarray], name: str) -> tuple[int, ...] | None:
    if name not in weights:
        return None
    return tuple(weights.shape(name)) if hasattr(weights, "shape") else tuple(weights[name].shape)


def file_signature(weights: Mapping[str, np.ndarray], where: object) -> Signature:
    """The signature of diffusers-named transformer tensors (`transformer_weights` of a file)."""
    patch = _shape(weights, "patch_embedding.weight")
    text = _shape(weights, "condition_embedder.text_embedder.linear_1.weight")
    ffn, out = _shape(weights, "blocks.0.ffn.net.0.proj.weight"), _shape(weights, "proj_out.weight")
    if patch is None or text is None or ffn is None or out is None:
        raise UnsupportedModelError(
            f"{where}: no patch embedding, text embedding, first FFN or output projection; not a Wan transformer"
        )
    image = _shape(weights, "condition_embedder.image_embedder.norm1.weight")
    positions = _shape(weights, "condition_embedder.image_embedder.pos_embed")
    blocks = {int(m[1]) for name in weights if (m := re.match(r"blocks\.(\d+)\.", name))}
    vace = {int(m[1]) for name in weights if (m := re.match(r"vace_blocks\.(\d+)\.", name))}
    return (
        ("width", patch[0]), ("in_channels", patch[1]), ("out_channels", out[0]), ("ffn_dim", ffn[0]),
        ("blocks", len(blocks)), ("text_dim", text[1]), ("image_dim", image[0] if image else None),
        ("image_positions", positions[1] if positions else None), ("vace_blocks", len(vace)),
        ("animate", any(name.startswith(("face_adapter.", "motion_encoder.")) for name in weights)),
        ("fps_embedding", "fps_embedding.weight" in weights),
        ("s2v", any(name.startswith(("casual_audio_encoder.", "audio_injector.")) for name in weights)),
    )  # fmt: skip


def recognised_repo(file: Path) -> str:
    """The published diffusers repo whose one transformer has `file`'s architecture (ties broken by the
    file's name, as the 480P / 720P I2V releases share one); an UnsupportedModelError naming the shapes
    found otherwise."""
    signature = file_signature(transformer_weights(file), file)
    found = [
        repo for repo, published in ARCHITECTURES.items()
        if published.num_experts == 1 and spec_signature(published.transformer) == signature
    ]  # fmt: skip
    if not found:
        shown = ", ".join(f"{key}={value}" for key, value in signature)
        raise UnsupportedModelError(
            f"{file}: no published Wan model has this transformer ({shown}); pass a checkpoint folder of its "
            "architecture with --model FOLDER --set transformer_file=FILE, or add a preset for it in configs/"
        )
    return repo_named_by(file.name.lower(), found)


def repo_named_by(name: str, repos: list[str]) -> str:
    """Of `repos` (one architecture), the one the file's name points to: a resolution (480p, 720p;
    the I2V releases share one transformer) or SkyReels' name (its 14B Diffusion Forcing models
    have Wan 2.1 T2V 14B's shapes: only `num_frame_per_block`, in no tensor, differs); else the first."""
    skyreels = "skyreels" in name or re.search(r"(^|[^a-z])df([^a-z]|$)", name) is not None
    family = [repo for repo in repos if ("skyreels" in repo.lower()) == skyreels] or repos
    named = [repo for repo in family if any(part in name for part in re.findall(r"\d+p", repo.lower()))]
    return (named or family)[0]
