"""Wan 2.2 Animate's model extension, the domain's half: pose latents and a face video in, and
the parameter count of its additions (pose patch embedding, motion and face encoders, face adapters)."""

from __future__ import annotations

import math

from wanjax.domain.extensions.base import ExtensionCost, ModelExtension
from wanjax.domain.guidance import SHARED, blank_when_unconditional
from wanjax.domain.specs import TransformerSpec


def animate_parameters(spec: TransformerSpec) -> int:
    """The parameters an Animate transformer adds to its Wan 2.1 I2V base, as diffusers counts them:
    the pose patch embedding, the motion encoder, the face encoder and the face adapters."""
    animate = spec.animate
    assert animate is not None
    d, style, motion = spec.inner_dim, animate.motion_style_dim, animate.motion_dim
    hidden, heads, encoded = animate.face_encoder_hidden_dim, animate.face_encoder_num_heads, animate.motion_encoder_dim
    pose = math.prod(spec.patch_size) * spec.out_channels * d + d
    sizes = [2**k for k in range(int(math.log2(animate.motion_encoder_size)), 1, -1)]
    widths = [animate.channels(size) for size in sizes]
    motion_encoder = 3 * widths[0] + widths[0]  # conv_in and its bias
    for c_in, c_out in zip(widths, widths[1:]):  # conv1, conv2 (each with its bias), the 1x1 skip
        motion_encoder += 9 * c_in * c_in + c_in + 9 * c_in * c_out + c_out + c_in * c_out
    motion_encoder += 16 * widths[-1] * style + 4 * (style * style + style) + style * motion + motion
    motion_encoder += encoded * motion  # the basis
    face_encoder = 3 * encoded * hidden * heads + hidden * heads + 2 * (3 * hidden * hidden + hidden)
    face_encoder += hidden * d + d + d  # out_proj, the padding token
    adapters = spec.face_adapter_count * (4 * (d * d + d) + 2 * spec.attention_head_dim)
    return pose + motion_encoder + face_encoder + adapters


def _cost(spec: TransformerSpec) -> ExtensionCost:
    d = spec.inner_dim
    return ExtensionCost(animate_parameters(spec), kernels=spec.face_adapter_count * 4 * d * d)  # q, k, v, out


ANIMATE_EXTENSION = ModelExtension(
    name="animate",
    inputs={
        "pose": SHARED,  # [B, F' - 1, H', W', C] one segment's pose latents, every frame after the reference
        "face": blank_when_unconditional(-1.0),  # [B, T, S, S, 3] the face video in [-1, 1]; blank unconditionally
    },
    present=lambda spec: spec.animate is not None,
    cost=_cost,
)
