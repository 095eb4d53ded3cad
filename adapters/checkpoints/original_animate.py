"""Wan 2.2 Animate's own tensors in the official checkpoint (`WanAnimateModel` of the Wan code,
Wan-AI/Wan2.2-Animate-14B) seen under diffusers' `WanAnimateTransformer3DModel` names, and the
Animate architecture read from their shapes.

The blocks, embeddings and head are Wan 2.1 I2V's and keep the usual original names
(`wan_names.py`). The additions:

    motion_encoder.enc.net_app.convs.0.{0.weight,1.bias}         -> motion_encoder.conv_in.{weight,act_fn.bias}
    motion_encoder.enc.net_app.convs.{i}.conv1.{0.weight,1.bias}  -> motion_encoder.res_blocks.{i-1}.conv1.*
    motion_encoder.enc.net_app.convs.{i}.conv2.{1.weight,2.bias}  -> motion_encoder.res_blocks.{i-1}.conv2.*
    motion_encoder.enc.net_app.convs.{i}.skip.1.weight            -> motion_encoder.res_blocks.{i-1}.conv_skip.weight
    motion_encoder.enc.net_app.convs.{last}.weight                -> motion_encoder.conv_out.weight
    motion_encoder.enc.fc.{j}.*                                   -> motion_encoder.motion_network.{j}.*
    motion_encoder.dec.direction.weight                           -> motion_encoder.motion_synthesis_weight
    face_encoder.{conv1_local,conv2,conv3}.conv.*                 -> face_encoder.{conv1_local,conv2,conv3}.*
    face_adapter.fuser_blocks.{a}.linear1_kv.*                    -> face_adapter.{a}.to_k.* and .to_v.* (halves)
    face_adapter.fuser_blocks.{a}.{linear1_q,linear2,q_norm,k_norm}.* -> face_adapter.{a}.{to_q,to_out,norm_q,norm_k}.*

The activations' biases are stored [1, C, 1, 1] and read as [C]; the blurs' fixed [1, 3, 3, 1]
kernels (`*.kernel` buffers) are dropped (wanjax builds them). `pose_patch_embedding`,
`face_encoder.out_proj` and `face_encoder.padding_tokens` keep their names. Facts from the
official `wan/modules/animate/` (motion_encoder.py, face_blocks.py, model_animate.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

import numpy as np

from wanjax.adapters.checkpoints.weights import View
from wanjax.domain.errors import CheckpointError
from wanjax.domain.specs import ANIMATE_MOTION_CHANNEL_SIZES, AnimateSpec

MODEL_CLASS = "WanAnimateModel"
FACE_ADAPTER_EVERY = 5  # WanAnimateModel: a face adapter after blocks 0, 5, 10, ... (num_layers // 5 of them)

_MOTION = "motion_encoder."
_APP = r"motion_encoder\.enc\.net_app\.convs\."
_RULES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), target)
    for pattern, target in (
        (_APP + r"0\.0\.weight", "motion_encoder.conv_in.weight"),
        (_APP + r"0\.1\.bias", "motion_encoder.conv_in.act_fn.bias"),
        (_APP + r"(\d+)\.conv1\.0\.weight", "motion_encoder.res_blocks.{block}.conv1.weight"),
        (_APP + r"(\d+)\.conv1\.1\.bias", "motion_encoder.res_blocks.{block}.conv1.act_fn.bias"),
        (_APP + r"(\d+)\.conv2\.1\.weight", "motion_encoder.res_blocks.{block}.conv2.weight"),
        (_APP + r"(\d+)\.conv2\.2\.bias", "motion_encoder.res_blocks.{block}.conv2.act_fn.bias"),
        (_APP + r"(\d+)\.skip\.1\.weight", "motion_encoder.res_blocks.{block}.conv_skip.weight"),
        (_APP + r"(\d+)\.weight", "motion_encoder.conv_out.weight"),
        (r"motion_encoder\.enc\.fc\.(\d+)\.(weight|bias)", "motion_encoder.motion_network.{0}.{1}"),
        (r"motion_encoder\.dec\.direction\.weight", "motion_encoder.motion_synthesis_weight"),
        (r"face_encoder\.(conv1_local|conv2|conv3)\.conv\.(weight|bias)", "face_encoder.{0}.{1}"),
        (r"face_adapter\.fuser_blocks\.(\d+)\.linear1_q\.(weight|bias)", "face_adapter.{0}.to_q.{1}"),
        (r"face_adapter\.fuser_blocks\.(\d+)\.linear2\.(weight|bias)", "face_adapter.{0}.to_out.{1}"),
        (r"face_adapter\.fuser_blocks\.(\d+)\.q_norm\.weight", "face_adapter.{0}.norm_q.weight"),
        (r"face_adapter\.fuser_blocks\.(\d+)\.k_norm\.weight", "face_adapter.{0}.norm_k.weight"),
    )
)
_FUSED_KV = re.compile(r"face_adapter\.fuser_blocks\.(\d+)\.linear1_kv\.(weight|bias)")
_BLUR_KERNEL = re.compile(_APP + r"\d+\.(conv2|skip)\.0\.kernel")


def is_animate_name(name: str) -> bool:
    """Whether `name` is one of the Animate additions this module renames (or drops)."""
    return name.startswith((_MOTION, "face_encoder.", "face_adapter.fuser_blocks."))


def animate_names(names: Iterable[str]) -> tuple[dict[str, str], dict[str, tuple[str, View]]]:
    """(renamed, views) for the Animate additions among `names`: official name -> diffusers
    name, and diffusers name -> (official name, view) for the tensors read reshaped or split.
    Unknown Animate names are kept as they are, for the loader to report as unexpected."""
    renamed: dict[str, str] = {}
    views: dict[str, tuple[str, View]] = {}
    for name in names:
        if not is_animate_name(name) or _BLUR_KERNEL.fullmatch(name):
            continue
        fused = _FUSED_KV.fullmatch(name)
        if fused:
            adapter, leaf = fused.groups()
            views[f"face_adapter.{adapter}.to_k.{leaf}"] = (name, _first_half)
            views[f"face_adapter.{adapter}.to_v.{leaf}"] = (name, _second_half)
            continue
        target = _diffusers_name(name)
        if target.endswith("act_fn.bias"):
            views[target] = (name, _flat)
        else:
            renamed[name] = target
    return renamed, views


def _diffusers_name(name: str) -> str:
    for pattern, target in _RULES:
        match = pattern.fullmatch(name)
        if match:
            groups = match.groups()
            block = int(groups[0]) - 1 if "{block}" in target else None
            return target.format(*groups, block=block)
    return name


def _flat(tensor: np.ndarray) -> np.ndarray:
    return tensor.reshape(-1)


def _first_half(tensor: np.ndarray) -> np.ndarray:
    return tensor[: tensor.shape[0] // 2]


def _second_half(tensor: np.ndarray) -> np.ndarray:
    return tensor[tensor.shape[0] // 2 :]


def animate_spec_of(tensors: Mapping[str, np.ndarray], where: str) -> AnimateSpec:
    """The Animate architecture of a transformer's tensors under diffusers names: the motion
    encoder's face size from its residual blocks (one per halving, down to 4x4), its widths
    (those of sizes it does not reach stay EncoderApp's), style and motion sizes, the face
    encoder's streams; a face adapter every 5 blocks, as WanAnimateModel builds them."""
    shape = {name: tuple(tensors[name].shape) for name in tensors if name.startswith((_MOTION, "face_encoder."))}
    needed = (
        "motion_encoder.conv_in.weight", "motion_encoder.motion_network.0.weight",
        "motion_encoder.motion_synthesis_weight", "face_encoder.conv1_local.weight", "face_encoder.conv2.weight",
    )  # fmt: skip
    missing = [name for name in needed if name not in shape]
    if missing:
        raise CheckpointError(f"{where}: an Animate transformer without {missing}; re-download the checkpoint")
    blocks = sum(1 for name in shape if re.fullmatch(r"motion_encoder\.res_blocks\.\d+\.conv2\.weight", name))
    size = 2 ** (blocks + 2)
    widths = dict(ANIMATE_MOTION_CHANNEL_SIZES)  # EncoderApp's table; the file shows the widths it uses
    widths[size] = shape["motion_encoder.conv_in.weight"][0]
    for i in range(blocks):
        widths[size >> (i + 1)] = shape[f"motion_encoder.res_blocks.{i}.conv2.weight"][0]
    hidden = shape["face_encoder.conv2.weight"][0]
    return AnimateSpec(
        motion_encoder_channel_sizes={str(k): v for k, v in widths.items()}, motion_encoder_size=size,
        motion_style_dim=shape["motion_encoder.motion_network.0.weight"][0],
        motion_dim=shape["motion_encoder.motion_synthesis_weight"][1],
        motion_encoder_dim=shape["motion_encoder.motion_synthesis_weight"][0], face_encoder_hidden_dim=hidden,
        face_encoder_num_heads=shape["face_encoder.conv1_local.weight"][0] // hidden,
        inject_face_latents_blocks=FACE_ADAPTER_EVERY,
    )  # fmt: skip
