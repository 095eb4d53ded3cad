"""Primitive layers of the Wan VAE (2.1 and 2.2), channels last.

Video activations are [B, T, H, W, C]; per-frame (2D) layers see [N, H, W, C] with
N = B * T. Parameter names (`weight`, `bias`, `gamma`) follow diffusers so that the
checkpoint mapping in `weights.py` stays mechanical; kernels are stored in JAX layout
([kt, kh, kw, in, out] / [kh, kw, in, out]); the per-frame form (`convolution="frames"`) stores a
3-D kernel as the list of its kt time taps, [kh, kw, in, out] each.

The video runs through the VAE in temporal chunks. A causal convolution carries a
cache: the last input frames of the previous chunk, prepended in place of the left
zero padding, so chunk-by-chunk output equals the whole-video output. Caches are
passed in and returned (None on the first chunk), never stored on the module, so the
chunk loop can become a `lax.scan` with the caches as carry.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp
from flax import nnx

from wanjax.adapters.jax.vae.runtime import VaeRuntime

# torch's default Conv init: uniform(+-1/sqrt(fan_in)) on the kernel.
_KERNEL_INIT = nnx.initializers.variance_scaling(1.0 / 3.0, "fan_in", "uniform")

# F.normalize's floor on the L2 norm.
_NORM_EPS = 1e-12


def _convolve(
    x: jax.Array,
    kernel: jax.Array,
    strides: tuple[int, ...],
    padding: tuple[tuple[int, int], ...],
    runtime: VaeRuntime,
    accumulation: jnp.dtype | None = None,
) -> jax.Array:
    spatial = "DHW"[-(x.ndim - 2) :]
    return jax.lax.conv_general_dilated(
        x,
        kernel,
        window_strides=strides,
        padding=padding,
        dimension_numbers=(f"N{spatial}C", f"{spatial}IO", f"N{spatial}C"),
        precision=runtime.precision,
        preferred_element_type=accumulation,
    )


def _convolve_frames(
    x: jax.Array,
    taps: Sequence[jax.Array],
    strides: tuple[int, int, int],
    padding: tuple[tuple[int, int], ...],
    runtime: VaeRuntime,
    leading_zeros: int = 0,
) -> jax.Array:
    """The 3-D convolution of `leading_zeros` zero frames followed by `x` [B, T, H, W, C] (no further
    time padding) with the kernel whose time taps are `taps` ([kh, kw, in, out] each) as, for each
    tap, the 2-D convolution of every frame that tap reads, summed in float32 (a half-precision run
    then rounds once, as the 3-D convolution does). Products of the zero frames are skipped."""
    stride = strides[0]
    b, frames = x.shape[:2]
    out_frames = (leading_zeros + frames - len(taps)) // stride + 1
    total = None
    for tap, kernel in enumerate(taps):
        first = max(0, -(-(leading_zeros - tap) // stride))  # the first output frame this tap reads x for
        if first >= out_frames:
            continue
        start = tap + stride * first - leading_zeros
        live = out_frames - first
        read = x[:, start : start + stride * (live - 1) + 1 : stride].reshape(b * live, *x.shape[2:])
        y = _convolve(read, kernel, strides[1:], padding[1:], runtime, accumulation=jnp.float32)
        y = y.reshape(b, live, *y.shape[1:])
        y = jnp.pad(y, [(0, 0), (first, 0)] + [(0, 0)] * (y.ndim - 2)) if first else y
        total = y if total is None else total + y
    return total.astype(x.dtype)


def _zero_frames(x: jax.Array, count: int) -> jax.Array:
    """`count` frames of zeros shaped as the frames of `x` [B, T, H, W, C]."""
    return jnp.zeros((x.shape[0], count, *x.shape[2:]), x.dtype)


def _kernel(weight: nnx.Param, runtime: VaeRuntime) -> jax.Array:
    return weight[...].astype(runtime.dtype)


def _add_bias(y: jax.Array, bias: nnx.Param, runtime: VaeRuntime) -> jax.Array:
    return y + bias[...].astype(runtime.dtype)


# Input padding of the two output phases of a nearest x2 upsample (even, odd rows or columns).
_PHASE_PADDING = ((1, 0), (0, 1))


def _phase_kernels(kernel: jax.Array, axis: int) -> tuple[jax.Array, jax.Array]:
    """A 3-tap `axis` of `kernel` as read by a nearest x2 upsampled input: an even output pixel
    reads input pixels (-1, 0) with taps (k0, k1 + k2), an odd one (0, +1) with (k0 + k1, k2)."""
    k0, k1, k2 = jnp.split(kernel, 3, axis=axis)
    return jnp.concatenate([k0, k1 + k2], axis), jnp.concatenate([k0 + k1, k2], axis)


class CausalConv3d(nnx.Module):
    """3D convolution whose output frame t sees input frames <= t only.

    `padding` is diffusers' (t, h, w) padding: space is zero padded on both sides,
    time by 2 * t frames on the left only (zeros on the first chunk, the cache after),
    so the convolution itself never pads time.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        kernel_size: tuple[int, int, int],
        runtime: VaeRuntime,
        *,
        stride: tuple[int, int, int] = (1, 1, 1),
        padding: tuple[int, int, int] = (0, 0, 0),
        rngs: nnx.Rngs,
    ) -> None:
        self.runtime = runtime
        self.stride = stride
        self.spatial_padding = ((0, 0), (padding[1],) * 2, (padding[2],) * 2)
        self.context_frames = 2 * padding[0]
        shape = (*kernel_size, in_features, out_features)
        kernel = _KERNEL_INIT(rngs.params(), shape, runtime.param_dtype)
        # The per-frame form keeps one kernel [kh, kw, in, out] per time tap. Taps sliced from one
        # stacked kernel in the program are copies, and XLA places the slices of every convolution
        # of a scanned or tiled body together, ahead of their convolutions (or hoists them out of
        # the loop): a second copy of the weights, all live at once.
        self.weight: nnx.Param | nnx.List = (
            nnx.List([nnx.Param(tap) for tap in kernel]) if runtime.convolution == "frames" else nnx.Param(kernel)
        )
        self.bias = nnx.Param(jnp.zeros((out_features,), runtime.param_dtype))

    def __call__(self, x: jax.Array, leading_zeros: int = 0) -> jax.Array:
        """Convolves `leading_zeros` zero frames followed by `x` [B, T, H, W, Cin], with no further time
        padding. The per-frame form skips the zero frames' products; the 3-D one convolves them."""
        x, runtime = x.astype(self.runtime.dtype), self.runtime
        if isinstance(self.weight, nnx.List):
            taps = [_kernel(tap, runtime) for tap in self.weight]
            y = _convolve_frames(x, taps, self.stride, self.spatial_padding, runtime, leading_zeros)
        else:
            x = jnp.concatenate([_zero_frames(x, leading_zeros), x], axis=1) if leading_zeros else x
            y = _convolve(x, _kernel(self.weight, runtime), self.stride, self.spatial_padding, runtime)
        return _add_bias(y, self.bias, runtime)

    def stream(self, x: jax.Array, cache: jax.Array | None) -> tuple[jax.Array, jax.Array]:
        """One chunk `x` [B, T, H, W, Cin] -> (output, cache [B, context_frames, H, W, Cin]).

        The first chunk (`cache` None) is preceded by zeros."""
        if cache is None:
            y = self(x, leading_zeros=self.context_frames)
            context = jnp.concatenate([_zero_frames(x, self.context_frames), x], axis=1)
        else:
            context = jnp.concatenate([cache.astype(x.dtype), x], axis=1)
            y = self(context)
        return y, context[:, context.shape[1] - self.context_frames :]


class Conv2d(nnx.Module):
    """Per-frame 2D convolution over [N, H, W, Cin]."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        kernel_size: int,
        runtime: VaeRuntime,
        *,
        stride: int = 1,
        padding: tuple[tuple[int, int], tuple[int, int]] = ((0, 0), (0, 0)),
        rngs: nnx.Rngs,
    ) -> None:
        self.runtime = runtime
        self.stride = (stride, stride)
        self.padding = padding
        shape = (kernel_size, kernel_size, in_features, out_features)
        self.weight = nnx.Param(_KERNEL_INIT(rngs.params(), shape, runtime.param_dtype))
        self.bias = nnx.Param(jnp.zeros((out_features,), runtime.param_dtype))

    def __call__(self, x: jax.Array) -> jax.Array:
        x, runtime = x.astype(self.runtime.dtype), self.runtime
        y = _convolve(x, _kernel(self.weight, runtime), self.stride, self.padding, runtime)
        return _add_bias(y, self.bias, runtime)

    def upsampled(self, x: jax.Array) -> jax.Array:
        """This 3x3 convolution (stride 1, padding 1) of `x` [N, H, W, Cin] upsampled x2 by nearest
        neighbour -> [N, 2H, 2W, Cout], without making the upsampled input (4x `x`'s size).

        Each of the four output pixels an input pixel becomes (its phase) is a 2x2 convolution of
        `x`: the 3x3 taps that read the same input pixel are summed (`_phase_kernels`). 16 instead of
        36 multiply-adds per input pixel and channel pair; the sums of taps round differently from
        the upsampled convolution's in the last bits.
        """
        x, runtime = x.astype(self.runtime.dtype), self.runtime
        rows = []
        for row_padding, row_kernel in zip(_PHASE_PADDING, _phase_kernels(self.weight[...], 0)):
            phases = [
                _convolve(x, kernel.astype(runtime.dtype), (1, 1), (row_padding, col_padding), runtime)
                for col_padding, kernel in zip(_PHASE_PADDING, _phase_kernels(row_kernel, 1))
            ]
            rows.append(jnp.stack(phases, axis=3))  # [N, H, W, 2, Cout]
        y = jnp.stack(rows, axis=2)  # [N, H, 2 (row phase), W, 2 (column phase), Cout]
        n, h, _, w, _, c = y.shape
        return _add_bias(y.reshape(n, 2 * h, 2 * w, c), self.bias, runtime)


class RMSNorm(nnx.Module):
    """Channel L2 normalisation times sqrt(C) times gamma (diffusers' WanRMS_norm).

    `images` picks gamma's shape as diffusers does: [1, 1, C] for per-frame inputs
    [N, H, W, C], [1, 1, 1, C] for video [B, T, H, W, C] (torch: [C, 1, 1] / [C, 1, 1, 1]).
    Both Wan VAEs build every norm without diffusers' optional bias, so there is none.
    """

    def __init__(self, dim: int, runtime: VaeRuntime, *, images: bool) -> None:
        self.runtime = runtime
        self.scale = math.sqrt(dim)
        shape = (1,) * (2 if images else 3) + (dim,)
        self.gamma = nnx.Param(jnp.ones(shape, runtime.param_dtype))

    def __call__(self, x: jax.Array) -> jax.Array:
        # The L2 norm runs in float32 (diffusers upcasts only half-precision inputs,
        # which gives the same result), then the product is taken in the compute dtype.
        x32 = x.astype(jnp.float32)
        norm = jnp.sqrt(jnp.sum(x32 * x32, axis=-1, keepdims=True))
        normalized = (x32 / jnp.maximum(norm, _NORM_EPS)).astype(self.runtime.dtype)
        return normalized * self.scale * self.gamma[...].astype(self.runtime.dtype)


class AttentionBlock(nnx.Module):
    """Single-head self-attention within each frame over its H*W positions, residual."""

    def __init__(self, dim: int, runtime: VaeRuntime, *, rngs: nnx.Rngs) -> None:
        self.runtime = runtime
        self.norm = RMSNorm(dim, runtime, images=True)
        self.to_qkv = Conv2d(dim, 3 * dim, 1, runtime, rngs=rngs)
        self.proj = Conv2d(dim, dim, 1, runtime, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        b, t, h, w, c = x.shape  # [B, T, H, W, C]
        qkv = self.to_qkv(self.norm(x.reshape(b * t, h, w, c)))  # [N, H, W, 3C]
        q, k, v = jnp.split(qkv.reshape(b * t, h * w, 3 * c), 3, axis=-1)  # [N, L, C] each
        # Logits and softmax in float32 (torch's SDPA is float32 throughout for f32 inputs).
        logits = jnp.einsum(
            "NQC,NKC->NQK", q, k, precision=self.runtime.precision, preferred_element_type=jnp.float32
        )
        probs = jax.nn.softmax(logits / math.sqrt(c), axis=-1).astype(v.dtype)
        out = jnp.einsum("NQK,NKC->NQC", probs, v, precision=self.runtime.precision)
        out = self.proj(out.reshape(b * t, h, w, c))
        return x + out.reshape(b, t, h, w, c)
