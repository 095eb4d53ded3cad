"""How a generation spreads over devices: the mesh shape, and the logical axis rules that map
each named dimension of the models' parameters and activations to mesh axes.

Mesh axes, always in this order: "data" (independent rows: videos, CFG's conditional and
unconditional halves), "fsdp" (rows too, and the weights split so that each device holds
a slice, gathered as a layer needs them), "tensor" (attention heads and MLP columns split:
Megatron-style tensor parallelism), "context" (the token sequence split: sequence / context
parallel attention). All four at 1 is one device, exactly as without sharding.

Every check here is a clear error naming the numbers and the fix, before anything loads.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
import attrs

from wanjax.domain.errors import ConfigError, InvalidRequestError

MESH_AXES = ("data", "fsdp", "tensor", "context")
CONTEXT_PARALLEL = ("ulysses", "ring")

# Logical names of parameter dimensions.
LAYERS = "layers"  # the stacked leading axis of scanned blocks
EMBED = "embed"  # the model width D where a weight reads or writes the residual stream
HEADS = "heads"  # the width N * H of q, k, v and the attention output (split by head)
MLP = "mlp"  # the feed-forward hidden width, and the 6 D modulation projection
TEXT_EMBED = "text_embed"  # the text encoder's width (input of the text embedder)
IMAGE_EMBED = "image_embed"  # the CLIP image tokens' width (Wan 2.1 I2V)
NORM = "norm"  # 1-D scales, biases and modulation tables that write the residual stream
# Logical names of activation dimensions.
ACTIVATION_BATCH = "activation_batch"
ACTIVATION_LENGTH = "activation_length"  # the video tokens of the transformer
ACTIVATION_EMBED = "activation_embed"
ACTIVATION_HEADS = "activation_heads"
ACTIVATION_KV_LENGTH = "activation_kv_length"  # the text (and image) tokens of cross-attention

LOGICAL_AXES = (
    LAYERS, EMBED, HEADS, MLP, TEXT_EMBED, IMAGE_EMBED, NORM,
    ACTIVATION_BATCH, ACTIVATION_LENGTH, ACTIVATION_EMBED, ACTIVATION_HEADS, ACTIVATION_KV_LENGTH,
)  # fmt: skip

LogicalRules = tuple[tuple[str, tuple[str, ...]], ...]
"""(logical name, mesh axes it is split over) pairs; a name maps to no axes: replicated."""

DEFAULT_RULES: LogicalRules = (
    (LAYERS, ()),
    (EMBED, ("fsdp",)),
    (HEADS, ("tensor",)),
    (MLP, ("tensor",)),
    (TEXT_EMBED, ("fsdp",)),
    (IMAGE_EMBED, ("fsdp",)),
    (NORM, ()),
    (ACTIVATION_BATCH, ("data", "fsdp")),
    (ACTIVATION_LENGTH, ("context",)),
    (ACTIVATION_EMBED, ()),
    (ACTIVATION_HEADS, ("tensor",)),
    (ACTIVATION_KV_LENGTH, ()),
)
"""Tensor parallelism over heads and MLP columns, FSDP over the other big dimension of each
weight, rows over data and fsdp, tokens over context. The VAE's parameters stay replicated: they
are small; its activations split spatially (adapters/jax/vae/sharding.py)."""


def parse_rule_overrides(overrides: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """`logical=axis[+axis...]` texts (config `logical_axis_rules`) -> {logical: mesh axes};
    `logical=` (nothing after =) replicates that dimension."""
    parsed: dict[str, tuple[str, ...]] = {}
    for text in overrides:
        name, sep, axes_text = (part.strip() for part in text.partition("="))
        if not sep or name not in LOGICAL_AXES:
            raise ConfigError(
                f"logical_axis_rules: {text!r} must be LOGICAL=AXIS[+AXIS] with LOGICAL one of "
                f"{', '.join(LOGICAL_AXES)}"
            )
        axes = tuple(a.strip() for a in axes_text.split("+") if a.strip())
        unknown = [a for a in axes if a not in MESH_AXES]
        if unknown or len(set(axes)) != len(axes):
            raise ConfigError(
                f"logical_axis_rules: {text!r} names mesh axes {list(axes)}; use distinct axes from "
                f"{', '.join(MESH_AXES)} joined by '+', or nothing to replicate"
            )
        parsed[name] = axes
    return parsed


def logical_rules(overrides: Iterable[str] = ()) -> LogicalRules:
    """The default rules with `overrides` (see `parse_rule_overrides`) replacing their entries."""
    replaced = parse_rule_overrides(overrides)
    return tuple((name, replaced.get(name, axes)) for name, axes in DEFAULT_RULES)


def _positive(_: object, attribute: attrs.Attribute, value: int) -> None:
    if not isinstance(value, int) or value < 1:
        raise ConfigError(f"mesh_{attribute.name}={value!r}: must be a whole number >= 1")


@attrs.frozen(kw_only=True)
class MeshShape:
    """The device mesh's size along each of `MESH_AXES` (config mesh_data, mesh_fsdp, ...)."""

    data: int = attrs.field(default=1, validator=_positive)
    fsdp: int = attrs.field(default=1, validator=_positive)
    tensor: int = attrs.field(default=1, validator=_positive)
    context: int = attrs.field(default=1, validator=_positive)

    @property
    def sizes(self) -> tuple[int, int, int, int]:
        """Sizes in `MESH_AXES` order."""
        return (self.data, self.fsdp, self.tensor, self.context)

    @property
    def num_devices(self) -> int:
        return math.prod(self.sizes)

    @property
    def is_single_device(self) -> bool:
        return self.num_devices == 1

    @property
    def batch_ways(self) -> int:
        """How many slices the rows (batch) are split into: data x fsdp."""
        return self.data * self.fsdp

    def describe(self) -> str:
        return " x ".join(f"{name}={size}" for name, size in zip(MESH_AXES, self.sizes)) + f" = {self.num_devices}"

    def check_devices(self, available: int) -> None:
        """The mesh must use exactly the devices there are (all hosts' together)."""
        if self.num_devices != available:
            raise ConfigError(
                f"mesh {self.describe()} devices, but {available} are available; choose mesh_data, "
                f"mesh_fsdp, mesh_tensor and mesh_context whose product is {available} (or all 1 for one device)"
            )

    def check_heads(self, num_heads: int, context_parallel: str) -> None:
        """Heads split over tensor, and with Ulysses (which trades the sequence split for a head
        split inside attention) over tensor x context too."""
        if context_parallel not in CONTEXT_PARALLEL:
            raise ConfigError(f"context_parallel={context_parallel!r}: must be one of {', '.join(CONTEXT_PARALLEL)}")
        if num_heads % self.tensor:
            raise ConfigError(
                f"mesh_tensor={self.tensor} does not divide the model's {num_heads} attention heads; "
                f"use a divisor of {num_heads}"
            )
        ways = self.tensor * self.context
        if context_parallel == "ulysses" and self.context > 1 and num_heads % ways:
            raise ConfigError(
                f"Ulysses attention splits the {num_heads} heads over mesh_tensor x mesh_context = {ways}, "
                f"which does not divide them; use context_parallel=ring, or sizes whose product divides {num_heads}"
            )

    def check_generation(self, rows: int, latent_grid: tuple[int, int, int], patch_size: tuple[int, int, int]) -> None:
        """A generation's `rows` (CFG copies x videos) and the tokens of its latent (F', H', W')
        grid cut into `patch_size` patches must split over the mesh."""
        self.check_batch(rows)
        self.check_tokens(math.prod(n // p for n, p in zip(latent_grid, patch_size, strict=True)))

    def check_tokens(self, tokens: int) -> None:
        if tokens % self.context:
            raise InvalidRequestError(
                f"mesh_context={self.context} does not divide the {tokens} video tokens of this size and "
                f"frame count; change height, width or num_frames, or use a mesh_context dividing {tokens}"
            )

    def check_batch(self, rows: int) -> None:
        """`rows` = CFG copies x videos, the transformer's batch."""
        if rows % self.batch_ways:
            raise InvalidRequestError(
                f"mesh_data x mesh_fsdp = {self.batch_ways} does not divide the {rows} transformer rows "
                f"(videos x 2 with classifier-free guidance, else x 1); generate a number of videos that makes "
                f"the rows a multiple of {self.batch_ways}, or make mesh_data x mesh_fsdp divide {rows}"
            )
