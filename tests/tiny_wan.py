"""Tiny random Wan 2.1 T2V pipelines written by diffusers' own `save_pretrained`.

The loader under test then reads exactly the files and layout a real download has.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from tokenizer_kinds import write_tokenizer
from wanjax.adapters.demo.random_checkpoint import demo_umt5_sizes, write_random_text_encoder
from wanjax.domain.specs import WAN22_LATENTS_MEAN, WAN22_LATENTS_STD

TEXT_DIM = 32
TINY_TRANSFORMER = dict(
    patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=16, out_channels=16,
    text_dim=TEXT_DIM, freq_dim=32, ffn_dim=32, num_layers=2, cross_attn_norm=True,
    qk_norm="rms_norm_across_heads", rope_max_seq_len=32,
)  # fmt: skip
TINY_VAE = dict(base_dim=8, z_dim=16, dim_mult=[1, 1, 1, 1], num_res_blocks=1, temperal_downsample=[False, True, True])
# The Wan 2.2 VAE layout (residual blocks, 2x2 patchify, a wider decoder, z_dim 48 with the
# released statistics), shrunk in width and depth.
TINY_VAE22 = dict(
    base_dim=4, decoder_base_dim=8, z_dim=48, dim_mult=[1, 2, 4, 4], num_res_blocks=1,
    temperal_downsample=[False, True, True], is_residual=True, patch_size=2, in_channels=12,
    out_channels=12, scale_factor_spatial=16, scale_factor_temporal=4,
    latents_mean=list(WAN22_LATENTS_MEAN), latents_std=list(WAN22_LATENTS_STD),
)  # fmt: skip
FLOW_SHIFT = 5.0
"""Saved in each tiny folder's scheduler config, away from wanjax's generic 3.0: runs that
compare with diffusers take it from the folder, as diffusers does."""
IMAGE_DIM = 32  # the demo CLIP's hidden size


def tiny_wan_pipeline(
    seed: int = 0, *, boundary_ratio: float | None = None, tokenizer_kind: str = "tokenizer.json", num_layers: int = 2
):
    """A diffusers WanPipeline with seeded random weights (UniPC flow scheduler, as Wan ships).

    With `boundary_ratio`, a Wan 2.2 A14B-style pipeline: a second expert `transformer_2`
    of the same architecture with its own weights. `tokenizer_kind` is one of
    tokenizer_kinds.TOKENIZER_KINDS; the text encoder's vocabulary fits it. `num_layers`: the
    transformers' blocks.
    """
    from diffusers import AutoencoderKLWan, UniPCMultistepScheduler, WanPipeline, WanTransformer3DModel
    from transformers import AutoTokenizer, UMT5EncoderModel

    with tempfile.TemporaryDirectory() as scratch:
        write_tokenizer(Path(scratch) / "tokenizer", tokenizer_kind)
        tokenizer = AutoTokenizer.from_pretrained(Path(scratch) / "tokenizer")
        write_random_text_encoder(Path(scratch) / "text_encoder", demo_umt5_sizes(len(tokenizer), TEXT_DIM), seed=seed)
        text_encoder = UMT5EncoderModel.from_pretrained(Path(scratch) / "text_encoder")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        shape = dict(TINY_TRANSFORMER, num_layers=num_layers)
        transformer = WanTransformer3DModel(**shape)
        vae = AutoencoderKLWan(**TINY_VAE)
        experts = {"transformer_2": WanTransformer3DModel(**shape)} if boundary_ratio else {}
    scheduler = UniPCMultistepScheduler(prediction_type="flow_prediction", use_flow_sigmas=True, flow_shift=FLOW_SHIFT)
    pipe = WanPipeline(
        tokenizer=tokenizer, text_encoder=text_encoder, transformer=transformer, vae=vae, scheduler=scheduler,
        boundary_ratio=boundary_ratio, **experts,
    )  # fmt: skip
    pipe.set_progress_bar_config(disable=True)
    return pipe


def tiny_wan_i2v_pipeline(seed: int = 0, *, boundary_ratio: float | None = None, last_frame: bool = False):
    """A diffusers WanImageToVideoPipeline with seeded random weights.

    Without `boundary_ratio`: Wan 2.1 I2V (a CLIP image encoder, image cross-attention);
    with `last_frame`, Wan 2.1 FLF2V: a position embedding (random here, zeros in diffusers'
    init) over two images' CLIP tokens. With `boundary_ratio`: Wan 2.2 I2V A14B (two
    experts, image latents only, no image encoder).
    """
    from diffusers import WanImageToVideoPipeline, WanTransformer3DModel
    from transformers import CLIPImageProcessor, CLIPVisionModel

    from wanjax.adapters.torch.demo_clip import write_demo_image_encoder, write_demo_image_processor

    text = tiny_wan_pipeline(seed)
    i2v = dict(TINY_TRANSFORMER, in_channels=36)
    image_parts = {}
    if boundary_ratio is None:
        with tempfile.TemporaryDirectory() as scratch:
            write_demo_image_encoder(Path(scratch) / "image_encoder", seed=seed, hidden_size=IMAGE_DIM)
            write_demo_image_processor(Path(scratch) / "image_processor")
            image_parts = dict(
                image_encoder=CLIPVisionModel.from_pretrained(Path(scratch) / "image_encoder"),
                image_processor=CLIPImageProcessor.from_pretrained(Path(scratch) / "image_processor"),
            )
        inner = TINY_TRANSFORMER["num_attention_heads"] * TINY_TRANSFORMER["attention_head_dim"]
        i2v.update(image_dim=IMAGE_DIM, added_kv_proj_dim=inner)
        if last_frame:
            vision = image_parts["image_encoder"].config
            i2v.update(pos_embed_seq_len=2 * ((vision.image_size // vision.patch_size) ** 2 + 1))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 1)
        experts = {"transformer": WanTransformer3DModel(**i2v)}
        if boundary_ratio is not None:
            experts["transformer_2"] = WanTransformer3DModel(**i2v)
        if last_frame:
            with torch.no_grad():
                experts["transformer"].condition_embedder.image_embedder.pos_embed.normal_(std=0.5)
    pipe = WanImageToVideoPipeline(
        tokenizer=text.tokenizer, text_encoder=text.text_encoder, vae=text.vae, scheduler=text.scheduler,
        boundary_ratio=boundary_ratio, **experts, **image_parts,
    )  # fmt: skip
    pipe.set_progress_bar_config(disable=True)
    return pipe


def tiny_wan_ti2v_pipeline(seed: int = 0):
    """A diffusers WanPipeline shaped like Wan 2.2 TI2V-5B: the Wan 2.2 VAE (z_dim 48, 2x2 patchify,
    residual blocks) and per-token timesteps (`expand_timesteps`)."""
    from diffusers import AutoencoderKLWan, WanPipeline, WanTransformer3DModel

    text = tiny_wan_pipeline(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 2)
        transformer = WanTransformer3DModel(**dict(TINY_TRANSFORMER, in_channels=48, out_channels=48))
        vae = AutoencoderKLWan(**TINY_VAE22)
    pipe = WanPipeline(
        tokenizer=text.tokenizer, text_encoder=text.text_encoder, vae=vae, scheduler=text.scheduler,
        transformer=transformer, expand_timesteps=True,
    )  # fmt: skip
    pipe.set_progress_bar_config(disable=True)
    return pipe


def write_tiny_wan_checkpoint(folder: Path, seed: int = 0, *, boundary_ratio: float | None = None) -> Path:
    tiny_wan_pipeline(seed, boundary_ratio=boundary_ratio).save_pretrained(folder)
    return folder


def tiny_wan_vace_pipeline(seed: int = 0):
    """A diffusers WanVACEPipeline (Wan 2.1 VACE): the T2V parts and a VACE transformer whose
    VACE blocks add hints after blocks 0 and 1 from 96 control channels."""
    from diffusers import WanVACEPipeline, WanVACETransformer3DModel

    text = tiny_wan_pipeline(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 3)
        transformer = WanVACETransformer3DModel(**TINY_TRANSFORMER, vace_layers=[0, 1], vace_in_channels=96)
    pipe = WanVACEPipeline(
        tokenizer=text.tokenizer, text_encoder=text.text_encoder, vae=text.vae, scheduler=text.scheduler,
        transformer=transformer,
    )  # fmt: skip
    pipe.set_progress_bar_config(disable=True)
    return pipe


def tiny_wan_v2v_pipeline(seed: int = 0):
    """A diffusers WanVideoToVideoPipeline: the T2V parts (a text-to-video model) under its class."""
    from diffusers import WanVideoToVideoPipeline

    text = tiny_wan_pipeline(seed)
    pipe = WanVideoToVideoPipeline(
        tokenizer=text.tokenizer, text_encoder=text.text_encoder, vae=text.vae, scheduler=text.scheduler,
        transformer=text.transformer,
    )  # fmt: skip
    pipe.set_progress_bar_config(disable=True)
    return pipe


def tiny_wan_animate_pipeline(seed: int = 0):
    """A diffusers WanAnimatePipeline (Wan-Animate: pose and face videos drive a character), shrunk."""
    from diffusers import WanAnimatePipeline, WanAnimateTransformer3DModel

    i2v = tiny_wan_i2v_pipeline(seed)
    inner = TINY_TRANSFORMER["num_attention_heads"] * TINY_TRANSFORMER["attention_head_dim"]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 4)
        transformer = WanAnimateTransformer3DModel(
            **dict(TINY_TRANSFORMER, in_channels=36), image_dim=IMAGE_DIM, added_kv_proj_dim=inner,
            motion_encoder_channel_sizes={"4": 8, "8": 8, "16": 8}, motion_encoder_size=16, motion_style_dim=8,
            motion_dim=4, motion_encoder_dim=8, face_encoder_hidden_dim=8, face_encoder_num_heads=2,
            inject_face_latents_blocks=1,
        )  # fmt: skip
    pipe = WanAnimatePipeline(
        tokenizer=i2v.tokenizer, text_encoder=i2v.text_encoder, vae=i2v.vae, scheduler=i2v.scheduler,
        image_processor=i2v.image_processor, image_encoder=i2v.image_encoder, transformer=transformer,
    )  # fmt: skip
    pipe.set_progress_bar_config(disable=True)
    return pipe


def with_tokenizer(pipe, tokenizer_kind: str):
    """`pipe` (any Wan pipeline) of the same class and components, but with a tokenizer of
    `tokenizer_kind` and a text encoder whose vocabulary fits it."""
    text = tiny_wan_pipeline(tokenizer_kind=tokenizer_kind)
    swapped = type(pipe)(**{**pipe.components, "tokenizer": text.tokenizer, "text_encoder": text.text_encoder})
    swapped.set_progress_bar_config(disable=True)
    return swapped
