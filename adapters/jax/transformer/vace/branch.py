"""The VACE branch of a Wan 2.1 VACE transformer (diffusers' WanVACETransformer3DModel).

The control latents (the VACE conditioning, `vace_in_channels` wide) are patch-embedded
into control tokens, projected (`proj_in`) and added to the video tokens the blocks start
from; then V = len(vace_layers) VACE blocks, each a base block plus an output projection,
run one after the other and each projects one hint. Hint k, times its conditioning scale,
is added to the residual stream after base block vace_layers[k]. The hints depend on the
tokens the blocks start from, not on what the base blocks make of them, so the branch runs
before the base blocks (`before_blocks`), and the base blocks stay one stack (scanned or not)
that adds a hint where its index says (`layer_slots`, `after_block`): the hooks of a
transformer extension (../extension.py).

Layout: the VACE blocks are one stack like the base blocks (stacked [V, ...] with
`scan_layers`, else a list); diffusers keeps `proj_in` in VACE block 0 only, here it is the
branch's own so that all VACE blocks are alike.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from wanjax.adapters.jax.sharding.activations import constrain
from wanjax.adapters.jax.transformer.blocks import CrossAttentionKV, WanBlock
from wanjax.adapters.jax.transformer.embeddings import PatchEmbed
from wanjax.adapters.jax.transformer.extension import NoExtensionHooks
from wanjax.adapters.jax.transformer.rope import RopeTables
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.adapters.jax.transformer.stacking import block_stack, layer, stacked_key_values
from wanjax.domain.attention_call import AttentionCall
from wanjax.domain.sharding import ACTIVATION_BATCH, ACTIVATION_EMBED, ACTIVATION_LENGTH
from wanjax.domain.specs import TransformerSpec


class VaceControl(NamedTuple):
    """What the VACE blocks read besides the video tokens: the control latents [B, Fc <= F, H, W,
    vace_in_channels] (checked) and one conditioning scale per hint [V] float32."""

    latents: jax.Array
    scale: jax.Array


class VaceBlock(WanBlock):
    """A base block whose output also goes through `proj_out` into a hint."""

    def __init__(self, spec: TransformerSpec, runtime: TransformerRuntime, *, rngs: nnx.Rngs):
        super().__init__(spec, runtime, rngs=rngs)
        dim = spec.inner_dim
        self.proj_out = nnx.Linear(dim, dim, dtype=runtime.dtype, param_dtype=runtime.param_dtype, rngs=rngs)

    def with_hint(
        self, c: jax.Array, kv: CrossAttentionKV, temb6: jax.Array, rope: RopeTables, attention: AttentionCall
    ) -> tuple[jax.Array, jax.Array]:
        """c [B, S, D] -> (c after this block, its hint), both [B, S, D]."""
        c = self(c, kv, temb6, rope, attention)
        return c, self.proj_out(c)


class VaceBranch(NoExtensionHooks, nnx.Module):
    """Control latents -> the hints of a VACE transformer (see the module docstring)."""

    def __init__(self, spec: TransformerSpec, runtime: TransformerRuntime, *, rngs: nnx.Rngs):
        dim = spec.inner_dim
        self.patch_embedding = PatchEmbed(spec, runtime, spec.vace_in_channels, rngs=rngs)
        self.proj_in = nnx.Linear(dim, dim, dtype=runtime.dtype, param_dtype=runtime.param_dtype, rngs=rngs)
        build = functools.partial(VaceBlock, spec, runtime)
        self.blocks = block_stack(
            lambda rngs: build(rngs=rngs), len(spec.vace_layers), scan_layers=runtime.scan_layers, rngs=rngs
        )
        self.spec = spec
        self.dtype = runtime.dtype
        self.activation_sharding = runtime.activation_sharding

    def prepare(self, inputs: Mapping[str, jax.Array], latent_shape: tuple[int, ...]) -> VaceControl:
        """inputs["control"]: control latents [B, Fc, H, W, vace_in_channels] with Fc <= F of the
        latents [B, F, H, W, C]; inputs["scale"] (optional): one number or one per hint [V] (default 1)."""
        if "control" not in inputs:
            raise ValueError("this VACE transformer needs control latents")
        control_latents, scale = inputs["control"], inputs.get("scale")
        spec, hints = self.spec, len(self.spec.vace_layers)
        b, f, h, w = latent_shape[:4]
        shape = tuple(control_latents.shape)
        if len(shape) != 5 or (shape[0], *shape[2:]) != (b, h, w, spec.vace_in_channels) or shape[1] > f:
            raise ValueError(
                f"this VACE transformer needs control latents [B={b}, Fc<={f}, H={h}, W={w}, "
                f"C={spec.vace_in_channels}] beside latents {tuple(latent_shape)}, got shape {shape}"
            )
        if shape[1] % spec.patch_size[0]:
            raise ValueError(f"control latent frames {shape[1]} are not divisible by patch_size={spec.patch_size}")
        scale = jnp.ones((), jnp.float32) if scale is None else jnp.asarray(scale, jnp.float32)
        if scale.shape not in ((), (hints,)):
            raise ValueError(f"the control scale is one number or one per VACE layer ({hints}), got {scale.shape}")
        return VaceControl(control_latents, jnp.broadcast_to(scale, (hints,)))

    def key_values(self, text: jax.Array, image: jax.Array | None) -> CrossAttentionKV:
        """The VACE blocks' cross-attention K/V, stacked [V, B, L, N, H] ..."""
        return stacked_key_values(self.blocks, text, image)

    def before_blocks(
        self,
        x: jax.Array,
        control: VaceControl,
        kv: CrossAttentionKV | None,
        temb6: jax.Array,
        rope: RopeTables,
        attention: AttentionCall,
    ) -> jax.Array:
        """x [B, S, D], the tokens the base blocks start from; kv the VACE blocks' stacked K/V
        -> the hints times their scales [V, B, S, D] (activation dtype). `attention`: the blocks'
        self-attention call, as `run_blocks` gets it (without a layer)."""
        if kv is None:
            raise ValueError("a VACE transformer's blocks need the VACE blocks' K/V")
        tokens = self.patch_embedding(control.latents)  # [B, Fc', H', W', D]
        tokens = tokens.reshape(x.shape[0], -1, tokens.shape[-1])
        tokens = self._pin(jnp.pad(tokens, ((0, 0), (0, x.shape[1] - tokens.shape[1]), (0, 0))))  # zeros after Fc'
        c = self._pin(self.proj_in(tokens) + x)
        if isinstance(self.blocks, nnx.List):
            hints = []
            for k, block in enumerate(self.blocks):
                c, hint = block.with_hint(c, layer(kv, k), temb6, rope, attention)
                hints.append(hint)
            stacked = jnp.stack(hints)
        else:

            @nnx.scan(in_axes=(nnx.Carry, 0, 0, None, None), out_axes=(nnx.Carry, 0))
            def step(c: jax.Array, block: VaceBlock, kv: CrossAttentionKV, temb6, rope) -> tuple[jax.Array, jax.Array]:
                c, hint = block.with_hint(c, kv, temb6, rope, attention)
                return self._pin(c), hint

            _, stacked = step(c, self.blocks, kv, temb6, rope)
        # diffusers multiplies each hint by a 0-dim fp32 scale: the product rounds to the hint's dtype.
        scaled = (stacked.astype(jnp.float32) * control.scale[:, None, None, None]).astype(self.dtype)
        names = (None, ACTIVATION_BATCH, ACTIVATION_LENGTH, ACTIVATION_EMBED)
        return constrain(self.activation_sharding, scaled, *names)

    def layer_slots(self) -> np.ndarray:
        """[num_layers] int32: after base block i add hint slots[i]; -1 where none."""
        slots = np.full(self.spec.num_layers, -1, np.int32)
        slots[list(self.spec.vace_layers)] = np.arange(len(self.spec.vace_layers))
        return slots

    def after_block(self, x: jax.Array, hints: jax.Array, slot: jax.Array | int) -> jax.Array:
        """x [B, S, D] plus hints[slot] ([V, B, S, D], scaled), or x itself where slot < 0."""
        return jnp.where(slot >= 0, x + hints[jnp.maximum(slot, 0)], x)

    def _pin(self, x: jax.Array) -> jax.Array:
        return constrain(self.activation_sharding, x, ACTIVATION_BATCH, ACTIVATION_LENGTH, ACTIVATION_EMBED)
