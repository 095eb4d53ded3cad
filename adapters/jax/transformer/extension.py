"""A transformer extension, the JAX half: one object per Wan variant that adds to the base
transformer (VACE's hint blocks, Animate's pose and face branch, Wan 2.1 I2V's image
cross-attention). Its domain half (`ModelExtension`, domain/extensions/) names it and says what
it reads and costs; this half says how the model runs it and how its weights load and shard:

- `build`: its module, held by the model under the extension's name (its parameters are
  `<name>/...`), whose hooks (`ExtensionModule`) the model calls: what it embeds, the K/V of its
  own blocks, the tokens it appends after the video's (`extra_tokens`: S2V's reference and motion
  tokens, with their own RoPE positions, dropped before the head), what it computes before the
  base blocks, its slot in each base block (scanned with the blocks) and what it does after a
  block (none for I2V: its image K/V projections are part of every block's cross-attention, and
  their K/V of every block's `CrossAttentionKV`);
- `weights`: the diffusers names of its tensors (official names arrive renamed to them,
  adapters/checkpoints/);
- `rules`: its sharding rules, the sub-modules every device keeps whole, and its layer stacks
  (fp8 storage stores their matmul kernels; the memory plan counts them as its `ExtensionCost`).

A new variant is its own folder holding its module, its name table and this object, and one
line in `extensions.EXTENSIONS` (and its domain half's in domain/extensions/registry.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Protocol

import attrs
import jax
import numpy as np
from flax import nnx

from wanjax.adapters.jax.sharding.rules import ParameterRules
from wanjax.adapters.jax.transformer.blocks import CrossAttentionKV
from wanjax.adapters.jax.transformer.rope import RopeTables
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.adapters.jax.transformer.weight_names import Slot
from wanjax.domain.attention_call import AttentionCall
from wanjax.domain.extensions.base import ModelExtension
from wanjax.domain.specs import TransformerSpec


class ExtraTokens(NamedTuple):
    """Tokens an extension appends after the video tokens: tokens [B, E, D] (activation dtype),
    their RoPE tables [E, H/2] (`rope.position_tables` of their own positions), and whether the
    blocks modulate them by timestep 0 (S2V's `zero_timestep`) instead of the step's. The blocks
    attend over them like the video tokens; the head reads the video tokens only."""

    tokens: jax.Array
    rope: RopeTables
    at_time_zero: bool


class ExtensionModule(Protocol):
    """The hooks of an extension's module, in the order a forward pass calls them. `prepared` is
    what `prepare` made of its inputs, `held` what `before_blocks` made for the base blocks."""

    def key_values(self, text: jax.Array, image: jax.Array | None) -> CrossAttentionKV | None:
        """The cross-attention K/V of its own blocks (stacked [V, B, L, N, H] ...), of the embedded
        text [B, L, D] (and image tokens [B, M, D]); None: it has none."""
        ...

    def prepare(self, inputs: Mapping[str, jax.Array], latent_shape: tuple[int, ...]) -> Any:
        """Its conditioning inputs (its rows of `Conditioning.extensions[name]`), checked against
        latents of `latent_shape` [B, F, H, W, C_in], as the pass reads them (a pytree)."""
        ...

    def embed(self, x: jax.Array, prepared: Any) -> jax.Array:
        """The video tokens x [B, S, D] as the blocks start from them (Animate adds its pose tokens)."""
        ...

    def modulation(self, temb6: jax.Array, prepared: Any) -> jax.Array:
        """The blocks' modulation temb6 [B, T, 6, D] as they read it (SkyReels-V2 adds its fps embedding)."""
        ...

    def extra_tokens(self, prepared: Any, patch_embed: Callable[[jax.Array], jax.Array]) -> ExtraTokens | None:
        """The tokens it appends after the video tokens (see `ExtraTokens`); None: it appends none.
        `patch_embed`: the model's own patch embedding (latents [B, F, H, W, C_in] -> [B, F', H', W', D]),
        for tokens of latents like the video's (S2V's reference image)."""
        ...

    def before_blocks(
        self,
        x: jax.Array,
        prepared: Any,
        kv: CrossAttentionKV | None,
        temb6: jax.Array,
        rope: RopeTables,
        attention: AttentionCall,
    ) -> Any:
        """What the base blocks read of it (VACE: its hints, run on x [B, S, D] and `kv`, its K/V,
        its blocks' self-attention as `attention`, the base blocks' call, describes it)."""
        ...

    def layer_slots(self) -> np.ndarray:
        """[num_layers] int32: its slot after base block i; -1 where it does nothing."""
        ...

    def after_block(self, x: jax.Array, held: Any, slot: jax.Array | int) -> jax.Array:
        """x [B, S, D] after a base block whose slot is `slot` (traced in the scanned forms)."""
        ...


class NoExtensionHooks:
    """The hooks that do nothing, for an extension that needs only some of them."""

    def key_values(self, text: jax.Array, image: jax.Array | None) -> CrossAttentionKV | None:
        return None

    def prepare(self, inputs: Mapping[str, jax.Array], latent_shape: tuple[int, ...]) -> Any:
        return None

    def embed(self, x: jax.Array, prepared: Any) -> jax.Array:
        return x

    def modulation(self, temb6: jax.Array, prepared: Any) -> jax.Array:
        return temb6

    def extra_tokens(self, prepared: Any, patch_embed: Callable[[jax.Array], jax.Array]) -> ExtraTokens | None:
        return None

    def before_blocks(
        self,
        x: jax.Array,
        prepared: Any,
        kv: CrossAttentionKV | None,
        temb6: jax.Array,
        rope: RopeTables,
        attention: AttentionCall,
    ) -> Any:
        return None

    def after_block(self, x: jax.Array, held: Any, slot: jax.Array | int) -> jax.Array:
        return x


Build = Callable[[TransformerSpec, TransformerRuntime, nnx.Rngs], nnx.Module]
Weights = Callable[[TransformerSpec, bool], list[Slot]]


@attrs.frozen
class TransformerExtension:
    """One variant's model side (see the module docstring).

    model: its domain half (name, inputs, presence, cost).
    build: (spec, runtime, rngs) -> its module (an `ExtensionModule`); None: it has no module of
      its own (its parameters live in the base model, as I2V's image embedder).
    weights: (spec, scan_layers) -> the slots of its tensors.
    rules: its `ParameterRules`.
    """

    model: ModelExtension
    build: Build | None = None
    weights: Weights = lambda spec, scan_layers: []
    rules: ParameterRules = ParameterRules()

    @property
    def name(self) -> str:
        return self.model.name
