"""Wan Animate's motion encoder (diffusers' WanAnimateMotionEncoder): face frames [N, S, S, 3]
-> one motion vector per frame [N, motion_encoder_dim].

A StyleGAN2-like discriminator trunk turns each face into a style vector: a 1x1 conv, then
residual blocks that halve the resolution down to 4x4 (each an anti-aliasing blur before its
strided convs), then a 4x4 conv to 1x1. Five linear layers (no activations between them,
as in the original) map the style to `motion_dim` coefficients, and the motion vector is
their combination of an orthonormal basis: the Q of a QR decomposition of the learnt
`motion_synthesis_weight`, computed in fp32.

Weights keep the "equalised learning rate" form: every conv and linear multiplies its
weight by 1/sqrt(fan_in) as it uses it. Where an activation follows, the bias belongs to
it (diffusers' `act_fn.bias`, a fused leaky ReLU times sqrt(2)); the math is the same as a
conv bias followed by the activation. Layout is channels-last: kernels [kh, kw, C_in, C_out].
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.domain.specs import AnimateSpec

BLUR_TAPS = (1.0, 3.0, 3.0, 1.0)
"""The anti-aliasing filter before each downsampling conv (an outer product, normalised to sum 1)."""
LEAKY_SLOPE = 0.2
LAYERS = 5
"""Linear layers from the style vector to the motion coefficients (diffusers' motion_blocks)."""
CONV_DIMENSIONS = ("NHWC", "HWIO", "NHWC")


def fused_leaky_relu(x: jax.Array) -> jax.Array:
    """leaky_relu(x, 0.2) * sqrt(2), the gain-preserving activation of StyleGAN2."""
    return jax.nn.leaky_relu(x, LEAKY_SLOPE) * math.sqrt(2.0)


def blur(x: jax.Array, padding: int) -> jax.Array:
    """x [N, H, W, C] through the depthwise 4x4 blur filter, `padding` zeros on each side
    (diffusers pads (p + 1) // 2 rows and p // 2 columns; p is even in every layer)."""
    taps = np.asarray(BLUR_TAPS, np.float32)
    kernel = np.outer(taps, taps) / np.outer(taps, taps).sum()  # [4, 4]
    channels = x.shape[-1]
    kernel = jnp.asarray(np.tile(kernel[:, :, None, None], (1, 1, 1, channels)), x.dtype)  # [4, 4, 1, C]
    return jax.lax.conv_general_dilated(
        x, kernel, (1, 1), [(padding, padding)] * 2, dimension_numbers=CONV_DIMENSIONS, feature_group_count=channels
    )


class MotionConv(nnx.Module):
    """A scaled conv (diffusers' MotionConv2d): optional blur, conv with weight / sqrt(fan_in),
    then bias and optionally the fused leaky ReLU."""

    def __init__(
        self,
        c_in: int,
        c_out: int,
        kernel_size: int,
        runtime: TransformerRuntime,
        *,
        stride: int = 1,
        padding: int = 0,
        blurred: bool = False,
        bias: bool = True,
        activation: bool = True,
        rngs: nnx.Rngs,
    ):
        shape = (kernel_size, kernel_size, c_in, c_out)
        self.kernel = nnx.Param(jax.random.normal(rngs.params(), shape, runtime.param_dtype))
        self.bias = nnx.Param(jnp.zeros((c_out,), runtime.param_dtype)) if bias or activation else None
        self.scale = 1.0 / math.sqrt(c_in * kernel_size**2)
        self.stride, self.padding, self.activation = stride, padding, activation
        self.blur_padding = (len(BLUR_TAPS) - stride + kernel_size - 1) // 2 if blurred else None
        self.dtype = runtime.dtype

    def __call__(self, x: jax.Array) -> jax.Array:
        """[N, H, W, C_in] -> [N, H', W', C_out]."""
        if self.blur_padding is not None:
            x = blur(x, self.blur_padding)
        kernel = (self.kernel[...] * self.scale).astype(self.dtype)
        pad = [(self.padding, self.padding)] * 2
        x = jax.lax.conv_general_dilated(x, kernel, (self.stride,) * 2, pad, dimension_numbers=CONV_DIMENSIONS)
        if self.bias is not None:
            x = x + self.bias[...].astype(self.dtype)
        return fused_leaky_relu(x) if self.activation else x


class MotionLinear(nnx.Module):
    """A scaled linear layer with bias (diffusers' MotionLinear without activation)."""

    def __init__(self, d_in: int, d_out: int, runtime: TransformerRuntime, *, rngs: nnx.Rngs):
        self.kernel = nnx.Param(jax.random.normal(rngs.params(), (d_in, d_out), runtime.param_dtype))
        self.bias = nnx.Param(jnp.zeros((d_out,), runtime.param_dtype))
        self.scale = 1.0 / math.sqrt(d_in)
        self.dtype = runtime.dtype

    def __call__(self, x: jax.Array) -> jax.Array:
        kernel = (self.kernel[...] * self.scale).astype(self.dtype)
        return x @ kernel + self.bias[...].astype(self.dtype)


class DownBlock(nnx.Module):
    """3x3 conv, blurred 3x3 conv with stride 2, plus a blurred strided 1x1 skip; the sum / sqrt(2)."""

    def __init__(self, c_in: int, c_out: int, runtime: TransformerRuntime, *, rngs: nnx.Rngs):
        self.conv1 = MotionConv(c_in, c_in, 3, runtime, padding=1, rngs=rngs)
        self.conv2 = MotionConv(c_in, c_out, 3, runtime, stride=2, blurred=True, rngs=rngs)
        self.conv_skip = MotionConv(
            c_in, c_out, 1, runtime, stride=2, blurred=True, bias=False, activation=False, rngs=rngs
        )

    def __call__(self, x: jax.Array) -> jax.Array:
        return (self.conv2(self.conv1(x)) + self.conv_skip(x)) / math.sqrt(2.0)


class MotionEncoder(nnx.Module):
    """Face frames -> motion vectors (see the module docstring)."""

    def __init__(self, spec: AnimateSpec, runtime: TransformerRuntime, *, rngs: nnx.Rngs):
        size, style = spec.motion_encoder_size, spec.motion_style_dim
        self.conv_in = MotionConv(3, spec.channels(size), 1, runtime, rngs=rngs)
        widths = [spec.channels(2**k) for k in range(int(math.log2(size)), 1, -1)]  # size, size/2, ..., 4
        self.res_blocks = nnx.List(
            [DownBlock(c_in, c_out, runtime, rngs=rngs) for c_in, c_out in zip(widths, widths[1:])]
        )
        self.conv_out = MotionConv(widths[-1], style, 4, runtime, bias=False, activation=False, rngs=rngs)
        dims = [style] * LAYERS + [spec.motion_dim]
        self.motion_network = nnx.List(
            [MotionLinear(d_in, d_out, runtime, rngs=rngs) for d_in, d_out in zip(dims, dims[1:])]
        )
        self.motion_synthesis_weight = nnx.Param(
            jax.random.normal(rngs.params(), (spec.motion_encoder_dim, spec.motion_dim), jnp.float32)
        )
        self.size = size
        self.dtype = runtime.dtype

    def __call__(self, faces: jax.Array) -> jax.Array:
        """faces [N, S, S, 3] in [-1, 1] (S = motion_encoder_size) -> [N, motion_encoder_dim]."""
        x = self.conv_in(faces.astype(self.dtype))
        for block in self.res_blocks:
            x = block(x)
        x = self.conv_out(x).reshape(x.shape[0], -1)  # [N, style]
        for linear in self.motion_network:
            x = linear(x)  # [N, motion_dim] after the last
        # diffusers adds 1e-8 to the basis weight before its QR, in fp32.
        basis, _ = jnp.linalg.qr(self.motion_synthesis_weight[...] + 1e-8)  # [motion_encoder_dim, motion_dim]
        return (x.astype(jnp.float32) @ basis.T).astype(self.dtype)
