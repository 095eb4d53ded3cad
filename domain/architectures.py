"""The published Wan architectures, by Hugging Face repo id.

A preset names a repo id, not an architecture; these are the numbers of each repo's
transformer/config.json and vae/config.json (and model_index.json's boundary_ratio), so
that sizes, FLOPs and benchmarks need no download. The transformer and VAE tests check
them against diffusers' own classes (parameter counts, tensor names and shapes).
"""

from __future__ import annotations

import attrs

from wanjax.domain.conditioning import ImageConditioning
from wanjax.domain.errors import UnsupportedModelError
from wanjax.domain.s2v_spec import S2VSpec
from wanjax.domain.specs import AnimateSpec, TransformerSpec, VaeSpec

WAN21_T2V_1_3B = TransformerSpec(
    patch_size=(1, 2, 2), num_attention_heads=12, attention_head_dim=128, in_channels=16,
    out_channels=16, text_dim=4096, freq_dim=256, ffn_dim=8960, num_layers=30, cross_attn_norm=True,
    qk_norm="rms_norm_across_heads", eps=1e-6, rope_max_seq_len=1024,
)  # fmt: skip
WAN21_T2V_14B = attrs.evolve(WAN21_T2V_1_3B, num_attention_heads=40, ffn_dim=13824, num_layers=40)
# 480p and 720p share this transformer; CLIP ViT-H/14 image tokens are 1280 wide.
WAN21_I2V_14B = attrs.evolve(WAN21_T2V_14B, in_channels=36, image_dim=1280, added_kv_proj_dim=5120)
WAN21_FLF2V_14B = attrs.evolve(WAN21_I2V_14B, pos_embed_seq_len=2 * 257)
WAN22_T2V_A14B = WAN21_T2V_14B  # each of the two experts
WAN22_I2V_A14B = attrs.evolve(WAN21_T2V_14B, in_channels=36)  # image latent channels only, no CLIP tokens
WAN22_TI2V_5B = attrs.evolve(
    WAN21_T2V_1_3B, num_attention_heads=24, in_channels=48, out_channels=48, ffn_dim=14336, num_layers=30
)

# Wan 2.1 VACE: the T2V transformers plus VACE blocks (diffusers' scripts/convert_wan_to_diffusers.py,
# the Wan-AI/Wan2.1-VACE-*-diffusers transformer configs): after every 2nd block of 1.3B, every 5th of 14B;
# 96 control channels = 16 + 16 latent channels (inactive, reactive frames) + 64 (the mask, 8 x 8 pixels).
WAN21_VACE_1_3B = attrs.evolve(WAN21_T2V_1_3B, vace_layers=tuple(range(0, 30, 2)), vace_in_channels=96)
WAN21_VACE_14B = attrs.evolve(WAN21_T2V_14B, vace_layers=tuple(range(0, 40, 5)), vace_in_channels=96)

# Wan 2.2 Animate: the Wan 2.1 I2V transformer plus pose embedding, motion and face encoders and a face
# adapter after every 5th block; Wan-AI/Wan2.2-Animate-14B-Diffusers' config is diffusers' defaults
# of WanAnimateTransformer3DModel (the official wan_animate_14B config: dim 5120, 40 heads and layers).
WAN22_ANIMATE_14B = attrs.evolve(WAN21_I2V_14B, animate=AnimateSpec())

# SkyReels-V2 Diffusion Forcing: the Wan 2.1 T2V transformers (diffusers' SkyReelsV2Transformer3DModel,
# its default num_frame_per_block 1); the 1.3B has the fps embedding, the 14B ones not (diffusers'
# scripts/convert_skyreelsv2_to_diffusers.py, inject_sample_info).
SKYREELS_V2_DF_1_3B = attrs.evolve(WAN21_T2V_1_3B, num_frame_per_block=1, inject_sample_info=True)
SKYREELS_V2_DF_14B = attrs.evolve(WAN21_T2V_14B, num_frame_per_block=1)

WAN21_VAE = VaeSpec()  # Wan-AI/Wan2.1-T2V-*-Diffusers vae/config.json: diffusers' defaults
WAN22_VAE = VaeSpec.wan22()  # Wan-AI/Wan2.2-TI2V-5B-Diffusers vae/config.json

# Wan 2.2 S2V: the Wan 2.1 T2V 14B transformer plus audio encoder and injectors, frame packer and pose
# encoder (wan/configs/wan_s2v_14B.py; num_audio_token is WanModel_S2V's default, 4).
WAN22_S2V_14B = attrs.evolve(WAN21_T2V_14B, s2v=S2VSpec(
    cond_dim=16, audio_dim=1024, enable_adain=True, audio_inject_layers=(0, 4, 8, 12, 16, 20, 24, 27, 30, 33, 36, 39),
    zero_timestep=True, enable_motioner=False, enable_framepack=True, framepack_drop_mode="padd",
))  # fmt: skip
CLIP_IMAGE_TOKENS = 257  # CLIP ViT-H/14 at 224 px: 16 x 16 patches + the class token
# Every published Wan model's text encoder, umt5-xxl's encoder (d_model 4096, 64 heads of 64, gated
# FFN of 10240, 24 layers with their own relative-position tables of 32 buckets, 256384 tokens), as
# transformers' UMT5Config arguments (its text_encoder/config.json)
UMT5_XXL_ENCODER = {
    "vocab_size": 256384, "d_model": 4096, "d_kv": 64, "d_ff": 10240, "num_layers": 24, "num_heads": 64,
    "relative_attention_num_buckets": 32, "relative_attention_max_distance": 128,
}  # fmt: skip
# Its parameters: embedding + per layer (q, k, v, o; wi_0, wi_1, wo; 2 norms; the table) + the final norm.
UMT5_XXL_ENCODER_PARAMETERS = 256384 * 4096 + 24 * (4 * 4096**2 + 3 * 4096 * 10240 + 2 * 4096 + 32 * 64) + 4096
# Wan 2.2 S2V's speech encoder, wav2vec2-large-xlsr-53-english as transformers' Wav2Vec2Model loads it (no
# CTC head): the conv feature encoder (7 convs of 512 with biases, kernels 10, 3, 3, 3, 3, 2, 2, each with a
# LayerNorm), the feature projection (LayerNorm, 512 -> 1024), the masked-time vector, the positional conv
# (1024 x 64 x 128 weight-normed, its g of 128, a bias), the encoder's LayerNorm and 24 layers (q, k, v, o;
# 1024 -> 4096 -> 1024; 2 LayerNorms).
WAV2VEC2_LARGE_PARAMETERS = (
    (512 * 10 + 512) + sum(512 * 512 * k + 512 for k in (3, 3, 3, 3, 2, 2)) + 7 * 2 * 512
    + (2 * 512 + 512 * 1024 + 1024) + 1024 + (1024 * 64 * 128 + 128 + 1024) + 2 * 1024
    + 24 * (4 * (1024 * 1024 + 1024) + (1024 * 4096 + 4096) + (4096 * 1024 + 1024) + 2 * 2 * 1024)
)  # fmt: skip


@attrs.frozen(kw_only=True)
class Architecture:
    """One published model: its transformer (each expert's, for Wan 2.2 A14B), its VAE, how
    many experts, where the second takes over, and how many CLIP image tokens its
    cross-attention reads (Wan 2.1 I2V: one image, FLF2V: two)."""

    transformer: TransformerSpec
    vae: VaeSpec
    num_experts: int = 1
    boundary_ratio: float | None = None
    image_tokens: int = 0
    first_frame: bool = False
    """Wan 2.2 TI2V: an input image replaces the first latent frame."""

    @property
    def extra_channels(self) -> int:
        """Input channels beyond the latents: I2V's mask and first-frame latents."""
        return self.transformer.in_channels - self.vae.z_dim

    @property
    def image_conditioning(self) -> ImageConditioning:
        """What the model does with an input image (as a checkpoint's files tell it)."""
        if self.extra_channels:
            return ImageConditioning.CHANNELS
        return ImageConditioning.FIRST_FRAME if self.first_frame else ImageConditioning.NONE


def _i2v(transformer: TransformerSpec, images: int) -> Architecture:
    return Architecture(transformer=transformer, vae=WAN21_VAE, image_tokens=images * CLIP_IMAGE_TOKENS)


ARCHITECTURES: dict[str, Architecture] = {
    "Wan-AI/Wan2.1-T2V-1.3B-Diffusers": Architecture(transformer=WAN21_T2V_1_3B, vae=WAN21_VAE),
    "Wan-AI/Wan2.1-T2V-14B-Diffusers": Architecture(transformer=WAN21_T2V_14B, vae=WAN21_VAE),
    "Wan-AI/Wan2.1-I2V-14B-480P-Diffusers": _i2v(WAN21_I2V_14B, 1),
    "Wan-AI/Wan2.1-I2V-14B-720P-Diffusers": _i2v(WAN21_I2V_14B, 1),
    "Wan-AI/Wan2.1-FLF2V-14B-720P-diffusers": _i2v(WAN21_FLF2V_14B, 2),  # sic: this repo's suffix is lower case
    "Wan-AI/Wan2.1-VACE-1.3B-diffusers": Architecture(transformer=WAN21_VACE_1_3B, vae=WAN21_VAE),
    "Wan-AI/Wan2.1-VACE-14B-diffusers": Architecture(transformer=WAN21_VACE_14B, vae=WAN21_VAE),
    "Wan-AI/Wan2.2-T2V-A14B-Diffusers": Architecture(
        transformer=WAN22_T2V_A14B, vae=WAN21_VAE, num_experts=2, boundary_ratio=0.875
    ),
    "Wan-AI/Wan2.2-I2V-A14B-Diffusers": Architecture(
        transformer=WAN22_I2V_A14B, vae=WAN21_VAE, num_experts=2, boundary_ratio=0.9
    ),
    "Wan-AI/Wan2.2-TI2V-5B-Diffusers": Architecture(transformer=WAN22_TI2V_5B, vae=WAN22_VAE, first_frame=True),
    "Wan-AI/Wan2.2-Animate-14B-Diffusers": _i2v(WAN22_ANIMATE_14B, 1),
    "Skywork/SkyReels-V2-DF-1.3B-540P-Diffusers": Architecture(transformer=SKYREELS_V2_DF_1_3B, vae=WAN21_VAE),
    "Skywork/SkyReels-V2-DF-14B-540P-Diffusers": Architecture(transformer=SKYREELS_V2_DF_14B, vae=WAN21_VAE),
    "Skywork/SkyReels-V2-DF-14B-720P-Diffusers": Architecture(transformer=SKYREELS_V2_DF_14B, vae=WAN21_VAE),
    "Wan-AI/Wan2.2-S2V-14B": Architecture(transformer=WAN22_S2V_14B, vae=WAN21_VAE),  # official format only
}


def without_diffusers_suffix(repo_id: str) -> str:
    """The official-layout repo of a diffusers-format repo id: the id without "-Diffusers"
    (Wan2.1-FLF2V's "-diffusers")."""
    for suffix in ("-Diffusers", "-diffusers"):
        if repo_id.endswith(suffix):
            return repo_id.removesuffix(suffix)
    return repo_id


def published_architecture(repo_id: str) -> Architecture:
    """The architecture of a published Wan repo; anything else names the known ones."""
    if repo_id not in ARCHITECTURES:
        raise UnsupportedModelError(
            f"no published architecture is known for {repo_id!r}; known: {', '.join(ARCHITECTURES)}"
        )
    return ARCHITECTURES[repo_id]
