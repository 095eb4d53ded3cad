"""The name table of an Animate transformer's additions (diffusers' WanAnimateTransformer3DModel
names -> `AnimateBranch` parameters): `pose_patch_embedding`, `motion_encoder.*`,
`face_encoder.*` and `face_adapter.{a}.*`. A motion conv followed by an activation keeps its
bias in the activation (`act_fn.bias`); here every conv owns its bias."""

from __future__ import annotations

import math

from wanjax.adapters.jax.transformer.weight_names import (
    LINEAR,
    Entry,
    Slot,
    linear_entries,
    patch_embedding_entries,
    stack_slots,
)
from wanjax.adapters.jax.transformer.animate.motion_encoder import LAYERS
from wanjax.domain.specs import TransformerSpec

CONV2D = (2, 3, 1, 0)  # torch Conv2d [O, I, kh, kw] -> [kh, kw, I, O]
CONV1D = (2, 1, 0)  # torch Conv1d [O, I, k] -> [k, I, O]
BRANCH = ("animate",)


def _motion_conv(name: str, path: tuple, *, bias: str | None) -> list[Entry]:
    entries = [Entry(f"{name}.weight", (*path, "kernel"), CONV2D)]
    if bias is not None:
        entries.append(Entry(f"{name}.{bias}", (*path, "bias")))
    return entries


def _motion_encoder_entries(spec: TransformerSpec) -> list[Entry]:
    name, path = "motion_encoder", (*BRANCH, "motion_encoder")
    entries = _motion_conv(f"{name}.conv_in", (*path, "conv_in"), bias="act_fn.bias")
    for i in range(int(math.log2(spec.animate.motion_encoder_size)) - 2):
        block, where = f"{name}.res_blocks.{i}", (*path, "res_blocks", i)
        entries += _motion_conv(f"{block}.conv1", (*where, "conv1"), bias="act_fn.bias")
        entries += _motion_conv(f"{block}.conv2", (*where, "conv2"), bias="act_fn.bias")
        entries += _motion_conv(f"{block}.conv_skip", (*where, "conv_skip"), bias=None)
    entries += _motion_conv(f"{name}.conv_out", (*path, "conv_out"), bias=None)
    for j in range(LAYERS):
        entries += [
            Entry(f"{name}.motion_network.{j}.weight", (*path, "motion_network", j, "kernel"), LINEAR),
            Entry(f"{name}.motion_network.{j}.bias", (*path, "motion_network", j, "bias")),
        ]
    entries.append(Entry(f"{name}.motion_synthesis_weight", (*path, "motion_synthesis_weight")))
    return entries


def _face_encoder_entries() -> list[Entry]:
    name, path = "face_encoder", (*BRANCH, "face_encoder")
    entries = []
    for conv in ("conv1_local", "conv2", "conv3"):
        entries += [
            Entry(f"{name}.{conv}.weight", (*path, conv, "kernel"), CONV1D),
            Entry(f"{name}.{conv}.bias", (*path, conv, "bias")),
        ]
    return [
        *entries,
        *linear_entries(f"{name}.out_proj", (*path, "out_proj")),
        Entry(f"{name}.padding_tokens", (*path, "padding_tokens")),
    ]


def _face_adapter_entries() -> tuple[Entry, ...]:
    entries: list[Entry] = []
    for proj in ("to_q", "to_k", "to_v", "to_out"):
        entries += linear_entries(proj, (proj,))
    return (*entries, *(Entry(f"{norm}.weight", (norm, "scale")) for norm in ("norm_q", "norm_k")))


def animate_slots(spec: TransformerSpec, scan_layers: bool) -> list[Slot]:
    """The Animate branch's slots."""
    top = [
        *patch_embedding_entries("pose_patch_embedding", (*BRANCH, "pose_patch_embedding")),
        *_motion_encoder_entries(spec),
        *_face_encoder_entries(),
    ]
    slots = [Slot(e.name, e.path, None, e.to_jax) for e in top]
    return slots + stack_slots(
        "face_adapter", (*BRANCH, "face_adapter"), _face_adapter_entries(), spec.face_adapter_count,
        scan_layers=scan_layers,
    )  # fmt: skip
