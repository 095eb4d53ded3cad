"""Wan 2.2 S2V's model extension, the domain's half: a clip's speech features, pose latents,
reference latents and (after the first clip) motion latents in, and the parameter count of its
additions (audio encoder and injectors, frame packer, pose encoder, token-kind vectors)."""

from __future__ import annotations

from wanjax.domain.extensions.base import ExtensionCost, ModelExtension
from wanjax.domain.guidance import SHARED, blank_when_unconditional
from wanjax.domain.s2v_spec import FRAME_PACK_BUCKETS, FRAME_PACK_PATCHES, s2v_parameters
from wanjax.domain.specs import TransformerSpec


def _cost(spec: TransformerSpec) -> ExtensionCost:
    s2v, d = spec.s2v, spec.inner_dim
    assert s2v is not None
    per_injector = 4 * d * d + (2 * d * d if s2v.enable_adain else 0)  # q, k, v, o (and the AdaLN linear)
    return ExtensionCost(s2v_parameters(spec, s2v), kernels=s2v.injector_count(spec.num_layers) * per_injector)


def _appended_tokens(spec: TransformerSpec, size: tuple[int, int]) -> int:
    """The reference image's tokens, then the frame packer's (a clip after the first): one latent
    frame at the video's patch, and the motion latents at 1x, 2x and 4x compression."""
    (h, w), (_, ph, pw) = size, spec.patch_size
    reference = (h // ph) * (w // pw)
    motion = sum(
        (bucket // pt) * (h // patch_h) * (w // patch_w)
        for bucket, (pt, patch_h, patch_w) in zip(FRAME_PACK_BUCKETS, FRAME_PACK_PATCHES, strict=True)
    )
    return reference + motion


S2V_EXTENSION = ModelExtension(
    name="s2v",
    inputs={
        "audio": blank_when_unconditional(0.0),  # [B, T, 25, C_a] the clip's wav2vec2 features; zeros unconditionally
        "pose": SHARED,  # [B, F', H', W', 16] the clip's pose latents (zeros without a pose video)
        "reference": SHARED,  # [B, 1, H', W', 16] the reference image's latents
        "motion": SHARED,  # [B, T_m, H', W', 16] the previous clips' motion latents; absent: no motion tokens
    },
    present=lambda spec: spec.s2v is not None,
    cost=_cost,
    appended_tokens=_appended_tokens,
)
