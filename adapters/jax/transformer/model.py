"""The Wan transformer in Flax NNX, numerically equal to diffusers' WanTransformer3DModel:
Wan 2.1 T2V / I2V / FLF2V and Wan 2.2 T2V / I2V / TI2V, as its `TransformerSpec` says.

Latents are channels-last, [B, F, H, W, C], as everywhere in wanjax. The cross-attention
keys and values depend on the prompt only, so `cross_attention_kv` computes them apart,
for a sampling loop to compute once (its KV cache) and pass to every step. A (pt, ph, pw)
patch becomes one token; tokens run in (frame, row, column) order, the order of
diffusers' `flatten(2)` after its Conv3d.

A variant that adds to the base model is a transformer extension (extension.py; the list in
extensions.py), held under its name: a VACE spec (diffusers' WanVACETransformer3DModel) has
`vace` (`vace/`: control latents in, one hint added after each of the base blocks `vace_layers`
names), an Animate spec (diffusers' WanAnimateTransformer3DModel) has `animate` (`animate/`: pose
tokens added to the video tokens, a face adapter after every `inject_face_latents_blocks`-th
base block), an S2V spec (the official WanModel_S2V) has `s2v` (`s2v/`: pose tokens added,
reference and motion tokens appended with their own RoPE positions, audio injectors after the
blocks `audio_inject_layers` names). The model calls their hooks; it names none of them.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx
from jax.typing import ArrayLike

from wanjax.adapters.jax.sharding.activations import ActivationSharding, constrain
from wanjax.adapters.jax.sharding.rules import TRANSFORMER_RULES, ParameterRules
from wanjax.adapters.jax.transformer.blocks import CrossAttentionKV, WanBlock, fp32_layer_norm
from wanjax.adapters.jax.transformer.embeddings import ConditionEmbedder, PatchEmbed
from wanjax.adapters.jax.transformer.extension import ExtensionModule, ExtraTokens
from wanjax.adapters.jax.transformer.extensions import transformer_extensions
from wanjax.adapters.jax.transformer.layer_range import at_layer, layers_of, scan_layer_range
from wanjax.adapters.jax.transformer.offload import scan_streamed
from wanjax.adapters.jax.transformer.rope import RopeTables, rope_tables
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.adapters.jax.transformer.stacking import block_stack, layer, stacked_key_values
from wanjax.domain.attention_call import SELF, AttentionCall
from wanjax.domain.extensions.registry import model_extension
from wanjax.domain.sharding import (
    ACTIVATION_BATCH,
    ACTIVATION_EMBED,
    ACTIVATION_HEADS,
    ACTIVATION_KV_LENGTH,
    ACTIVATION_LENGTH,
)
from wanjax.domain.specs import TransformerSpec


ALL_LAYERS = slice(None)
"""`run_blocks`' default range: every block."""


class TimeEmbedding(NamedTuple):
    """The time embedding temb [B, T, D] (read by the head) and the blocks' modulation temb6
    [B, T, 6, D]; T = 1, or S with one timestep per token (activation dtype)."""

    temb: jax.Array
    temb6: jax.Array


class WanTransformer(nnx.Module):
    """Velocity prediction of a Wan transformer (diffusers' WanTransformer3DModel)."""

    def __init__(self, spec: TransformerSpec, runtime: TransformerRuntime, *, rngs: nnx.Rngs):
        dim = spec.inner_dim
        self.patch_embedding = PatchEmbed(spec, runtime, spec.in_channels, rngs=rngs)
        self.condition_embedder = ConditionEmbedder(spec, runtime, rngs=rngs)
        self.blocks = block_stack(
            lambda rngs: WanBlock(spec, runtime, rngs=rngs), spec.num_layers, scan_layers=runtime.scan_layers, rngs=rngs
        )
        self.norm_out = fp32_layer_norm(dim, spec.eps, affine=False, rngs=rngs)
        self.proj_out = nnx.Linear(
            dim,
            spec.out_channels * math.prod(spec.patch_size),
            dtype=runtime.dtype,
            param_dtype=runtime.param_dtype,
            rngs=rngs,
        )
        self.scale_shift_table = nnx.Param(
            jax.random.normal(rngs.params(), (1, 2, dim), jnp.float32) / dim**0.5
        )
        extensions = transformer_extensions(spec)
        rules = ParameterRules()
        for extension in extensions:
            if extension.build is not None:
                setattr(self, extension.name, extension.build(spec, runtime, rngs))
            rules += extension.rules
        self.extension_names = tuple(e.name for e in extensions if e.build is not None)
        self.parameter_rules = rules + TRANSFORMER_RULES  # the extensions' first: theirs match first
        self.spec = spec
        self.scan_layers = runtime.scan_layers
        self.dtype = runtime.dtype
        self.activation_sharding = runtime.activation_sharding

    def token_grid(self, latent_shape: tuple[int, ...]) -> tuple[int, int, int]:
        """(F', H', W') token grid of latents [B, F, H, W, C]; checks the shape fits the spec."""
        if len(latent_shape) != 5 or latent_shape[-1] != self.spec.in_channels:
            raise ValueError(
                f"latents must be [B, F, H, W, C={self.spec.in_channels}], got shape {tuple(latent_shape)}"
            )
        f, h, w = latent_shape[1:4]
        if any(n % p for n, p in zip((f, h, w), self.spec.patch_size, strict=True)):
            raise ValueError(
                f"latent (F, H, W)={(f, h, w)} is not divisible by patch_size={self.spec.patch_size}"
            )
        return f // self.spec.patch_size[0], h // self.spec.patch_size[1], w // self.spec.patch_size[2]

    def rope_tables(self, latent_shape: tuple[int, ...]) -> RopeTables:
        """RoPE tables for latents of this shape: a per-shape invariant to hoist out of a sampling loop."""
        grid = self.token_grid(latent_shape)
        return rope_tables(self.spec.attention_head_dim, grid, self.spec.rope_max_seq_len)

    def cross_attention_kv(
        self, context: jax.Array, image_context: jax.Array | None = None, *, stream: bool = False
    ) -> CrossAttentionKV:
        """The cross-attention K/V of every block, stacked [layers, B, L, N, H] (and [layers, B, M, N, H]
        for the image tokens): context [B, L, text_dim], image_context [B, M, image_dim] as in `__call__`.

        They depend on the prompt (and image), never on the latents or the timestep: a sampling
        loop computes them once and passes them as `cache=` to every step (the KV cache).
        An extension with blocks of its own adds theirs under its name (`extensions`: a VACE model's
        VACE blocks' [V, B, L, N, H] ...). `stream`: the blocks' weights are in host memory
        (`offload.scan_streamed`).
        """
        batch = context.shape[0]
        self._check_image_context(batch, image_context)
        text = self.condition_embedder.text(context)  # [B, L, D]
        image = None if image_context is None else self.condition_embedder.image(image_context)  # [B, M, D]
        kv = stacked_key_values(self.blocks, text, image, stream=stream)
        own = {name: module.key_values(text, image) for name, module in self.extension_modules()}
        own = {name: blocks_kv for name, blocks_kv in own.items() if blocks_kv is not None}
        return self._pin_kv(kv._replace(extensions=own or None))

    def _pin_kv(self, kv: CrossAttentionKV) -> CrossAttentionKV:
        """[layers, B, L, N, H]: rows as the activations, heads over tensor, whole over context."""
        names = (None, ACTIVATION_BATCH, ACTIVATION_KV_LENGTH, ACTIVATION_HEADS, None)
        return jax.tree.map(lambda a: constrain(self.activation_sharding, a, *names), kv)

    def _pin_tokens(self, x: jax.Array) -> jax.Array:
        return _pinned_tokens(self.activation_sharding, x)

    def __call__(
        self,
        latents: jax.Array,
        timestep: jax.Array,
        context: jax.Array | None = None,
        *,
        image_context: jax.Array | None = None,
        rope: RopeTables | None = None,
        cache: CrossAttentionKV | None = None,
        extensions: Mapping[str, Mapping[str, ArrayLike]] | None = None,
    ) -> jax.Array:
        """latents [B, F, H, W, C_in]; timestep [B] (e.g. 999.0), or [B, S] one per token
        in token order (S = F' * H' * W', Wan 2.2 TI2V); context [B, L, text_dim];
        image_context [B, M, image_dim], CLIP image embeddings, given exactly when the spec
        uses them (Wan 2.1 I2V: M = 257; FLF2V: M = pos_embed_seq_len, first frame's tokens
        then last frame's) -> velocity [B, F, H, W, C_out] float32.
        Instead of context and image_context, `cache` may give their `cross_attention_kv`.
        `rope` defaults to `self.rope_tables(latents.shape)`. `extensions`: the inputs of the
        model's extensions by name (`prepare_extensions`): a VACE model's {"vace": {"control":
        [B, Fc <= F, H, W, vace_in_channels], "scale": one number or one per VACE layer
        (default 1)}}, an Animate model's {"animate": {"pose": [B, F - 1, H, W, C_out], "face":
        [B, T, S, S, 3] in [-1, 1]}}."""
        b = latents.shape[0]
        grid = self.token_grid(latents.shape)
        self._check_timestep(b, math.prod(grid), timestep)
        if (cache is None) == (context is None) or (cache is not None and image_context is not None):
            raise ValueError(
                "give either context (with image_context where the model uses one) or their cross_attention_kv cache"
            )
        if cache is None:
            self._check_image_context(b, image_context)
        elif (cache.image_k is not None) != self.spec.uses_image_embeddings or cache.text_k.shape[1] != b:
            raise ValueError(f"the cross-attention cache does not fit this model and batch {b}")
        prepared = self.prepare_extensions(extensions, latents.shape)
        rope = self.rope_tables(latents.shape) if rope is None else rope

        if cache is None:
            cache = self.cross_attention_kv(context, image_context)  # [layers, B, L, N, H] ...
        x, time = self.embed(latents, timestep, prepared)
        x = self.run_blocks(x, cache, time.temb6, rope, prepared, attention=AttentionCall(kind=SELF, grid=grid))
        return self.head(x, time, grid)

    def extension_modules(self) -> tuple[tuple[str, ExtensionModule], ...]:
        """(name, module) of each extension with a module of its own, in the registry's order."""
        return tuple((name, getattr(self, name)) for name in self.extension_names)

    def prepare_extensions(
        self, inputs: Mapping[str, Mapping[str, ArrayLike]] | None, latent_shape: tuple[int, ...]
    ) -> dict[str, Any]:
        """The extensions' inputs by name (`Conditioning.extensions`' rows), each checked and made
        into what `embed` and `run_blocks` read (its `prepare`), beside latents of `latent_shape`
        [B, F, H, W, C_in]. Every extension of the model needs its own; no other may be given."""
        inputs = {} if inputs is None else inputs
        unknown = sorted(set(inputs) - set(self.extension_names))
        if unknown:
            has = ", ".join(self.extension_names) or "none"
            raise ValueError(f"inputs were given for {unknown}, but this transformer's extensions are: {has}")
        return {name: module.prepare(inputs.get(name, {}), latent_shape) for name, module in self.extension_modules()}

    def embed(
        self, latents: jax.Array, timestep: jax.Array, prepared: Mapping[str, Any] | None = None
    ) -> tuple[jax.Array, TimeEmbedding]:
        """The stage before the blocks: latents [B, F, H, W, C_in] -> tokens x [B, S, D] (as each
        extension embeds its `prepared` inputs: an Animate model adds its pose tokens), and the
        time embedding of `timestep` ([B] or [B, S]). Split out so a sampling loop can skip the
        blocks alone (a cache policy reusing their residual) and still run this and `head`."""
        x = self.patch_embedding(latents)  # [B, F', H', W', D]
        x = x.reshape(x.shape[0], -1, x.shape[-1])  # [B, S, D]
        prepared = self._prepared(prepared)
        for name, module in self.extension_modules():
            x = module.embed(x, prepared[name])
        extras = self._extra_tokens(prepared)
        if extras:  # [video | each extension's extra tokens], one timestep per token
            timestep = _extra_timesteps(timestep, x.shape[1], extras)
            x = jnp.concatenate([x, *(extra.tokens.astype(x.dtype) for extra in extras)], axis=1)
        x = self._pin_tokens(x)
        temb, temb6 = self.condition_embedder.time(timestep)
        for name, module in self.extension_modules():
            temb6 = module.modulation(temb6, prepared[name])
        return x, TimeEmbedding(temb, temb6)

    def _extra_tokens(self, prepared: Mapping[str, Any]) -> list[ExtraTokens]:
        """The tokens the extensions append after the video tokens, in the registry's order."""
        modules = self.extension_modules()
        extras = (module.extra_tokens(prepared[name], self.patch_embedding) for name, module in modules)
        return [extra for extra in extras if extra is not None]

    def _with_extra_rope(self, rope: RopeTables, prepared: Mapping[str, Any]) -> RopeTables:
        """The video tokens' RoPE tables followed by the extensions' extra tokens' (as `embed` orders them)."""
        extras = self._extra_tokens(prepared)
        if not extras:
            return rope
        tables = [rope, *(extra.rope for extra in extras)]
        return RopeTables(*(jnp.concatenate([jnp.asarray(t[i]) for t in tables]) for i in range(len(rope))))

    def head(self, x: jax.Array, time: TimeEmbedding, grid: tuple[int, int, int]) -> jax.Array:
        """The stage after the blocks: x [B, S, D] -> velocity [B, F, H, W, C_out] float32,
        `grid` the (F', H', W') token grid (`token_grid`)."""
        video = math.prod(grid)  # the tokens extensions append (`extra_tokens`) have no output
        x = self._pin_tokens(x[:, :video])
        temb = time.temb if time.temb.shape[1] == 1 else time.temb[:, :video]
        modulation = self.scale_shift_table[...][None] + temb[:, :, None, :].astype(jnp.float32)  # [B, T, 2, D]
        shift, scale = jnp.unstack(modulation, axis=2)  # [B, T, D] each
        x = (self.norm_out(x) * (1 + scale) + shift).astype(self.dtype)
        x = self.proj_out(x)  # [B, S, pt * ph * pw * C_out]
        return self._unpatchify(x, grid).astype(jnp.float32)

    @staticmethod
    def _check_timestep(batch: int, tokens: int, timestep: jax.Array) -> None:
        if tuple(timestep.shape) not in ((batch,), (batch, tokens)):
            raise ValueError(
                f"timestep must be [B={batch}] or per token [B={batch}, S={tokens}], "
                f"got shape {tuple(timestep.shape)}"
            )

    def _check_image_context(self, batch: int, image_context: jax.Array | None) -> None:
        spec = self.spec
        if not spec.uses_image_embeddings:
            if image_context is not None:
                raise ValueError("image_context was given, but this transformer has no image embedder (image_dim None)")
            return
        shape = None if image_context is None else tuple(image_context.shape)
        if (
            shape is None
            or len(shape) != 3
            or (shape[0], shape[2]) != (batch, spec.image_dim)
            or spec.pos_embed_seq_len not in (None, shape[1])
        ):
            m = "M" if spec.pos_embed_seq_len is None else f"M={spec.pos_embed_seq_len}"
            raise ValueError(
                f"this image-to-video transformer needs image_context [B={batch}, {m}, "
                f"image_dim={spec.image_dim}] (CLIP image embeddings), got shape {shape}"
            )

    def _prepared(self, prepared: Mapping[str, Any] | None) -> Mapping[str, Any]:
        prepared = {} if prepared is None else prepared
        if set(prepared) != set(self.extension_names):
            raise ValueError(
                f"the blocks need what prepare_extensions made for each of this transformer's extensions "
                f"({', '.join(self.extension_names) or 'none'}), got {sorted(prepared)}"
            )
        return prepared

    def run_blocks(
        self,
        x: jax.Array,
        cache: CrossAttentionKV,
        temb6: jax.Array,
        rope: RopeTables,
        prepared: Mapping[str, Any] | None = None,
        *,
        attention: AttentionCall,
        stream: bool = False,
        layers: slice = ALL_LAYERS,
    ) -> jax.Array:
        """x [B, S, D] through every block, block i reading layer i of the stacked `cache`
        ([layers, B, L, N, H] ...), modulated by temb6 [B, T, 6, D] -> [B, S, D]. Each extension
        first makes what the blocks read of it from x and its `prepared` inputs (a VACE model runs
        its VACE blocks into hints), then acts after the blocks its slots name (adds a hint, runs a
        face adapter). `stream`: the scanned blocks' weights are in host memory and reach the
        device block by block (`offload.scan_streamed`). `attention` describes the blocks'
        self-attention (its token grid and structure; the listed blocks add their index).
        `layers`: only the blocks of this contiguous range (a Python slice of the blocks; x the
        tokens entering its first), run in place (`layer_range`); refused for a model with an
        extension that runs its blocks whole (VACE: its hints read the tokens entering block 0)."""
        start, stop = layers_of(layers, self.spec.num_layers)
        whole = (start, stop) == (0, self.spec.num_layers)
        prepared, modules = self._prepared(prepared), self.extension_modules()
        rope = self._with_extra_rope(rope, prepared)
        whole_only = [name for name in self.extension_names if model_extension(name).whole_blocks_only]
        if not whole and whole_only:
            raise ValueError(f"this transformer runs its blocks whole ({', '.join(whole_only)}): no range of them alone")
        own = cache.extensions or {}
        held = tuple(module.before_blocks(x, prepared[name], own.get(name), temb6, rope, attention) for name, module in modules)
        per_layer = (cache._replace(extensions=None), tuple(module.layer_slots() for _, module in modules))
        shared = (tuple(module for _, module in modules), held, temb6, rope)
        body = functools.partial(_layer, self.activation_sharding)
        if self.scan_layers and not whole:
            ranged = lambda block, x, i: body(block, x, at_layer(per_layer, i), shared, attention)  # noqa: E731
            return x if start == stop else scan_layer_range(self.blocks, ranged, x, start, stop, stream=stream)
        if stream:
            streamed = lambda block, x, inputs: (body(block, x, inputs, shared, attention), None)  # noqa: E731
            return scan_streamed(self.blocks, streamed, x, per_layer)[0]
        if self.scan_layers:
            carry_first = lambda x, block, inputs, shared: body(block, x, inputs, shared, attention)  # noqa: E731
            scanned = nnx.scan(carry_first, in_axes=(nnx.Carry, 0, 0, None), out_axes=nnx.Carry)
            return scanned(x, self.blocks, per_layer, shared)
        kv, slots = per_layer
        for i in range(start, stop):
            x = body(self.blocks[i], x, (layer(kv, i), tuple(int(at[i]) for at in slots)), shared, attention.at_layer(i))
        return x

    def _unpatchify(self, x: jax.Array, grid: tuple[int, int, int]) -> jax.Array:
        """[B, S, pt * ph * pw * C] (channels fastest, as diffusers' proj_out) -> [B, F, H, W, C]."""
        (f, h, w), (pt, ph, pw) = grid, self.spec.patch_size
        x = x.reshape(x.shape[0], f, h, w, pt, ph, pw, -1)
        x = x.transpose(0, 1, 4, 2, 5, 3, 6, 7)  # [B, F', pt, H', ph, W', pw, C]
        return x.reshape(x.shape[0], f * pt, h * ph, w * pw, -1)


def _extra_timesteps(timestep: jax.Array, video_tokens: int, extras: list[ExtraTokens]) -> jax.Array:
    """timestep [B] or [B, S] -> [B, S + E]: the step's over the video tokens, then each extension's
    extra tokens at 0 (`at_time_zero`) or at the step's (a per-sample timestep; per token: its first)."""
    per_sample = timestep if timestep.ndim == 1 else timestep[:, 0]
    parts = [jnp.broadcast_to(timestep[:, None] if timestep.ndim == 1 else timestep, (timestep.shape[0], video_tokens))]
    for extra in extras:
        at = jnp.zeros_like(per_sample) if extra.at_time_zero else per_sample
        parts.append(jnp.broadcast_to(at[:, None], (timestep.shape[0], extra.tokens.shape[1])))
    return jnp.concatenate(parts, axis=1)


def _pinned_tokens(sharding: ActivationSharding, x: jax.Array) -> jax.Array:
    """x [B, S, D]: rows over data x fsdp, tokens over context (see `ActivationSharding`)."""
    return constrain(sharding, x, ACTIVATION_BATCH, ACTIVATION_LENGTH, ACTIVATION_EMBED)


def _layer(
    sharding: ActivationSharding,
    block: WanBlock,
    x: jax.Array,
    layer_inputs: tuple,
    shared: tuple,
    attention: AttentionCall,
) -> jax.Array:
    """The block loop's one body, for its scanned, streamed and listed forms: base block i on x
    [B, S, D], then each extension's action after it. `layer_inputs`: block i's cross-attention
    K/V and each extension's slot (-1: none); `shared`: the extensions' modules, what each holds
    for the blocks (`before_blocks`), temb6 and the RoPE tables; `attention`: block i's
    self-attention call."""
    kv, slots = layer_inputs
    modules, held, temb6, rope = shared
    x = block(x, kv, temb6, rope, attention)
    for module, state, slot in zip(modules, held, slots, strict=True):
        x = module.after_block(x, state, slot)
    return _pinned_tokens(sharding, x)
