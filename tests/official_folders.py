"""Tiny official-format Wan checkpoint folders, written from the official classes' state dicts,
and diffusers-format twins holding the same weights.

The official folder holds what a Wan-AI repo holds (a WanModel `config.json` and safetensors,
`Wan2.x_VAE.pth`, the T5 `.pth` with a `google/umt5-xxl` tokenizer, Wan 2.1 I2V's and Wan 2.2
Animate's open-clip `.pth`), at toy sizes with seeded random weights: every parameter is perturbed from its
initial value, because the official inits leave some layers at zero (WanModel's head, the
VAE's attention projection) where a swapped tensor would go unnoticed. One exception: the
`wan` package (Wan 2.2's code) no longer has Wan 2.1 I2V's image cross-attention, so that
transformer is diffusers' WanTransformer3DModel written under the original names (the
inverse of the renaming table, which tests/unit/test_original_format.py checks against
diffusers' own converter).

The twin (of a Wan 2.1 I2V folder) is a diffusers-format folder written by diffusers' and
transformers' own classes (configs given here, tensors loaded strictly), so `--model TWIN` is
the reference a run of `--model OFFICIAL` must equal.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import torch

from official_wan import official_animate, official_s2v, official_wan
from tiny_wan import IMAGE_DIM, TEXT_DIM

from wanjax.adapters.checkpoints.official_folder import (
    CLIP_FILE,
    SPEECH_ENCODER_FOLDER,
    T5_FILE,
    TOKENIZER_FOLDER,
    VAE_FILES,
)
from wanjax.adapters.checkpoints.wan_names import BLOCK_MODULES, BLOCK_PARAMETERS, TOP_MODULES, TOP_PARAMETERS
from wanjax.adapters.torch.demo_tokenizer import write_demo_tokenizer

TEXT_LEN = 16  # WanModel pads the text to text_len tokens: runs use max_sequence_length=TEXT_LEN
HEADS, HEAD_DIM = 2, 12
TINY_WAN_MODEL = dict(
    patch_size=(1, 2, 2), text_len=TEXT_LEN, dim=HEADS * HEAD_DIM, ffn_dim=32, freq_dim=32, text_dim=TEXT_DIM,
    num_heads=HEADS, num_layers=2,
)  # fmt: skip
TEMPORAL = [False, True, True]  # temperal_downsample of both released VAEs
TINY_VAE21 = dict(dim=8, z_dim=16, dim_mult=[1, 1, 1, 1], num_res_blocks=2, temperal_downsample=TEMPORAL)
TINY_VAE22 = dict(dim=4, dec_dim=8, z_dim=48, dim_mult=[1, 2, 4, 4], num_res_blocks=1, temperal_downsample=TEMPORAL)
TINY_T5 = dict(
    dim=TEXT_DIM, dim_attn=TEXT_DIM, dim_ffn=64, num_heads=2, num_layers=2, num_buckets=8, shared_pos=False, dropout=0.0,
)  # fmt: skip
CLIP_IMAGE_SIZE = 32
TINY_CLIP = dict(
    embed_dim=16, image_size=CLIP_IMAGE_SIZE, patch_size=8, vision_dim=IMAGE_DIM, vision_mlp_ratio=2,
    vision_heads=16, vision_layers=2, vocab_size=16, max_text_len=8, text_dim=8, text_heads=2, text_layers=1,
)  # fmt: skip
# Wan 2.2 Animate. WanAnimateModel hard-codes what the tiny one keeps: CLIP features 1280 wide and
# 257 of them (a 16 x 16 patch grid and the class token), a motion encoder whose widths are fixed
# (512 at 4x4 to 32x32), a face encoder of 4 streams 1024 wide and a face adapter every 5 blocks.
# Its 512x512-face motion encoder takes ~40 s for 9 faces on two loaded cores, so the tiny
# model's is the same class built for 8x8 faces.
ANIMATE_FACE = 8
TINY_ANIMATE_MODEL = dict(TINY_WAN_MODEL, in_dim=36, out_dim=16, num_layers=5)
TINY_ANIMATE_MOTION = dict(size=ANIMATE_FACE, style_dim=8, motion_dim=4)
ANIMATE_CLIP = dict(TINY_CLIP, vision_dim=1280, patch_size=CLIP_IMAGE_SIZE // 16, vision_mlp_ratio=1)
# Wan 2.2 S2V: WanModel_S2V with the release's switches (AdaIN, zero timestep, the frame packer in
# "padd" mode, a 16-channel pose encoder) at toy size; its audio encoder reads a tiny wav2vec2's
# 8-wide hidden states, two audio tokens a frame, injectors after blocks 0 and 1.
S2V_AUDIO_DIM = 8
TINY_S2V_MODEL = dict(
    TINY_WAN_MODEL, cond_dim=16, audio_dim=S2V_AUDIO_DIM, num_audio_token=2, enable_adain=True,
    audio_inject_layers=[0, 1], zero_timestep=True, enable_motioner=False, enable_framepack=True,
    framepack_drop_mode="padd",
)  # fmt: skip


@attrs.frozen
class Kind:
    """One official release's layout at toy size."""

    model_type: str
    in_dim: int
    experts: int = 1
    vae22: bool = False
    clip: bool = False  # Wan 2.1 I2V, Wan 2.2 Animate: CLIP image tokens in the cross-attention
    animate: bool = False  # Wan 2.2 Animate: a WanAnimateModel
    s2v: bool = False  # Wan 2.2 S2V: a WanModel_S2V


KINDS = {
    "t2v": Kind("t2v", in_dim=16),
    "t2v-a14b": Kind("t2v", in_dim=16, experts=2),
    "i2v": Kind("i2v", in_dim=36, clip=True),
    "i2v-a14b": Kind("i2v", in_dim=36, experts=2),
    "ti2v": Kind("ti2v", in_dim=48, vae22=True),
    "animate": Kind("animate", in_dim=36, clip=True, animate=True),
    "s2v": Kind("s2v", in_dim=16, s2v=True),
}
EXPERT_FOLDERS = ("high_noise_model", "low_noise_model")


@attrs.frozen
class OfficialModels:
    """The official modules a tiny official folder was written from (fp32, eval mode)."""

    kind: Kind
    experts: tuple[torch.nn.Module, ...]
    vae: torch.nn.Module  # WanVAE_ of wan/modules/vae2_1.py or vae2_2.py
    t5: torch.nn.Module  # T5Encoder
    clip: torch.nn.Module | None  # XLMRobertaCLIP

    @property
    def vae_file(self) -> str:
        return VAE_FILES[48 if self.kind.vae22 else 16]


def official_text_encoder(models: OfficialModels, folder: Path) -> object:
    """The official T5EncoderModel around the tiny encoder (its __init__ would build umt5-xxl)."""
    from wan.modules.t5 import T5EncoderModel
    from wan.modules.tokenizers import HuggingfaceTokenizer

    encoder = object.__new__(T5EncoderModel)
    encoder.text_len, encoder.dtype, encoder.device = TEXT_LEN, torch.float32, torch.device("cpu")
    encoder.model = models.t5
    encoder.tokenizer = HuggingfaceTokenizer(name=str(folder / TOKENIZER_FOLDER), seq_len=TEXT_LEN, clean="whitespace")
    return encoder


class RecordingVae:
    """The official Wan2_1_VAE / Wan2_2_VAE around the tiny WanVAE_ (their __init__ loads the
    released size), with the released latent statistics; records the latents it decodes."""

    def __init__(self, models: OfficialModels) -> None:
        from wan.modules.vae2_1 import Wan2_1_VAE
        from wan.modules.vae2_2 import Wan2_2_VAE

        from wanjax.adapters.checkpoints.original_vae import LATENT_STATISTICS

        vae = object.__new__(Wan2_2_VAE if models.kind.vae22 else Wan2_1_VAE)
        vae.dtype, vae.device, vae.model = torch.float32, torch.device("cpu"), models.vae
        vae.mean, vae.std = (torch.tensor(values) for values in LATENT_STATISTICS[models.vae.z_dim])
        vae.scale = [vae.mean, 1.0 / vae.std]
        self._vae, self.model, self.decoded = vae, vae.model, []
        self.dtype, self.device = vae.dtype, vae.device  # read by WanS2V.generate

    def encode(self, videos):
        return self._vae.encode(videos)

    def decode(self, zs):
        self.decoded.append(zs[0].numpy().copy())
        return self._vae.decode(zs)


def official_models(kind: str, seed: int = 0) -> OfficialModels:
    official_wan()
    from wan.modules import t5, vae2_1, vae2_2
    from wan.modules.animate import clip
    from wan.modules.model import WanModel

    spec = KINDS[kind]
    out_dim = 48 if spec.vae22 else 16
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if spec.animate:
            experts: tuple[torch.nn.Module, ...] = (_animate_transformer(),)
        elif spec.s2v:
            official_s2v()
            from wan.modules.s2v.model_s2v import WanModel_S2V

            experts = (WanModel_S2V(**TINY_S2V_MODEL),)
        elif spec.clip:
            experts = (_i2v_transformer(),)
        else:
            config = dict(TINY_WAN_MODEL, model_type=spec.model_type, in_dim=spec.in_dim, out_dim=out_dim)
            experts = tuple(WanModel(**config) for _ in range(spec.experts))
        vae = vae2_2.WanVAE_(**TINY_VAE22) if spec.vae22 else vae2_1.WanVAE_(**TINY_VAE21)
        encoder = t5.T5Encoder(vocab=_vocab_size(), **TINY_T5)
        image = clip.XLMRobertaCLIP(**(ANIMATE_CLIP if spec.animate else TINY_CLIP)) if spec.clip else None
        for module in (*experts, vae, encoder, image):
            if module is not None:
                _perturb(module.eval())
    return OfficialModels(spec, experts, vae, encoder, image)


def _i2v_transformer() -> torch.nn.Module:
    from diffusers import WanTransformer3DModel

    config = _diffusers_transformer_config(KINDS["i2v"])
    return WanTransformer3DModel(**config, image_dim=IMAGE_DIM, added_kv_proj_dim=HEADS * HEAD_DIM)


def _animate_transformer() -> torch.nn.Module:
    """WanAnimateModel at toy size, its motion encoder the same class for ANIMATE_FACE faces."""
    official_animate()
    from wan.modules.animate.model_animate import WanAnimateModel
    from wan.modules.animate.motion_encoder import Generator

    model = WanAnimateModel(**TINY_ANIMATE_MODEL)
    model.motion_encoder = Generator(**TINY_ANIMATE_MOTION)
    return model


def _perturb(module: torch.nn.Module) -> None:
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.add_(0.1 * torch.randn_like(parameter))


def _vocab_size() -> int:
    with tempfile.TemporaryDirectory() as scratch:
        return write_demo_tokenizer(Path(scratch))


def write_official_folder(folder: Path, models: OfficialModels) -> Path:
    """The Wan-AI repo layout: transformer(s), VAE, T5 and tokenizer, CLIP for Wan 2.1 I2V."""
    folder.mkdir(parents=True, exist_ok=True)
    homes = [folder / name for name in EXPERT_FOLDERS] if len(models.experts) == 2 else [folder]
    for expert, home in zip(models.experts, homes):
        if models.kind.clip and not models.kind.animate:
            _save_under_original_names(expert, home)
        else:
            expert.save_pretrained(home)
    torch.save(models.vae.state_dict(), folder / models.vae_file)
    torch.save(models.t5.state_dict(), folder / T5_FILE)
    write_demo_tokenizer(folder / TOKENIZER_FOLDER)
    if models.clip is not None:
        torch.save(models.clip.state_dict(), folder / CLIP_FILE)
    return folder


def tiny_wav2vec2() -> tuple[Any, Any]:
    """A tiny random wav2vec2 (the S2V release's 24 layers, S2V_AUDIO_DIM wide) and its feature
    extractor (normalising, as the release's processor): (Wav2Vec2ForCTC, Wav2Vec2FeatureExtractor)."""
    from transformers import Wav2Vec2Config, Wav2Vec2FeatureExtractor, Wav2Vec2ForCTC

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        config = Wav2Vec2Config(
            hidden_size=S2V_AUDIO_DIM, num_hidden_layers=24, num_attention_heads=2, intermediate_size=8,
            conv_dim=(8,) * 7, num_conv_pos_embeddings=4, num_conv_pos_embedding_groups=2, vocab_size=4,
            do_stable_layer_norm=True, feat_extract_norm="layer",
        )  # fmt: skip
        return Wav2Vec2ForCTC(config).eval(), Wav2Vec2FeatureExtractor(do_normalize=True)


def write_s2v_folder(folder: Path) -> tuple[Path, OfficialModels, Any, Any]:
    """A tiny official-format Wan 2.2 S2V folder (`official_models("s2v")` plus `tiny_wav2vec2` as its
    speech encoder folder): (folder, the official models, the wav2vec2 model, its feature extractor)."""
    models = official_models("s2v")
    write_official_folder(folder, models)
    wav2vec2, extractor = tiny_wav2vec2()
    wav2vec2.save_pretrained(folder / SPEECH_ENCODER_FOLDER)
    extractor.save_pretrained(folder / SPEECH_ENCODER_FOLDER)
    return folder, models, wav2vec2, extractor


def _save_under_original_names(transformer: torch.nn.Module, home: Path) -> None:
    """diffusers' Wan 2.1 I2V transformer as a Wan repo has it: original names, WanModel's config
    (without the keys WanModel leaves out of it)."""
    from safetensors.torch import save_file

    home.mkdir(parents=True, exist_ok=True)
    state = {original_name(name): tensor.contiguous() for name, tensor in transformer.state_dict().items()}
    save_file(state, home / "diffusion_pytorch_model.safetensors")
    config = {key: value for key, value in TINY_WAN_MODEL.items() if key not in ("patch_size", "text_dim")}
    config.update(_class_name="WanModel", model_type="i2v", in_dim=36, out_dim=16)
    (home / "config.json").write_text(json.dumps(config))


def original_name(name: str) -> str:
    """diffusers transformer name -> original Wan name: the renaming table inverted."""
    prefix, rest = "", name
    modules, parameters = TOP_MODULES, TOP_PARAMETERS
    if name.startswith("blocks."):
        index, rest = name.removeprefix("blocks.").split(".", 1)
        prefix, modules, parameters = f"blocks.{index}.", BLOCK_MODULES, BLOCK_PARAMETERS
    for original, ours in parameters.items():
        if rest == ours:
            return prefix + original
    for original, ours in modules.items():
        for leaf in (".weight", ".bias"):
            if rest == ours + leaf:
                return prefix + original + leaf
    raise AssertionError(f"no original name for {name}")


def _diffusers_transformer_config(kind: Kind) -> dict[str, Any]:
    out_dim = 48 if kind.vae22 else 16
    return dict(
        patch_size=(1, 2, 2), num_attention_heads=HEADS, attention_head_dim=HEAD_DIM, in_channels=kind.in_dim,
        out_channels=out_dim, text_dim=TEXT_DIM, freq_dim=TINY_WAN_MODEL["freq_dim"], ffn_dim=TINY_WAN_MODEL["ffn_dim"],
        num_layers=TINY_WAN_MODEL["num_layers"], rope_max_seq_len=1024,
    )  # fmt: skip


TWIN_VAE21 = dict(base_dim=8, z_dim=16, dim_mult=[1, 1, 1, 1], num_res_blocks=2, temperal_downsample=TEMPORAL)


def write_diffusers_twin(folder: Path, official: Path) -> Path:
    """A diffusers-format Wan 2.1 I2V folder of `official`'s weights (an official "i2v" folder),
    renamed by wanjax's tables, each component a diffusers / transformers class of the known
    tiny config, loaded strictly."""
    from diffusers import AutoencoderKLWan, UniPCMultistepScheduler, WanImageToVideoPipeline, WanTransformer3DModel
    from transformers import (
        AutoTokenizer,
        CLIPImageProcessor,
        CLIPVisionConfig,
        CLIPVisionModel,
        UMT5Config,
        UMT5EncoderModel,
    )

    from wanjax.adapters.checkpoints.original_clip import clip_vision_tensors
    from wanjax.adapters.checkpoints.original_names import transformer_weights
    from wanjax.adapters.checkpoints.original_t5 import umt5_tensors
    from wanjax.adapters.checkpoints.original_vae import vae_weights
    from wanjax.adapters.checkpoints.weights import open_weights
    from wanjax.adapters.torch.clip_image import wan_clip_preprocessing

    config = dict(_diffusers_transformer_config(KINDS["i2v"]), image_dim=IMAGE_DIM, added_kv_proj_dim=HEADS * HEAD_DIM)
    text_config = UMT5Config(
        vocab_size=_vocab_size(), d_model=TEXT_DIM, d_kv=TEXT_DIM // 2, d_ff=64, num_layers=2, num_heads=2,
        relative_attention_num_buckets=8, relative_attention_max_distance=128, feed_forward_proj="gated-gelu",
        dropout_rate=0.0, pad_token_id=0, eos_token_id=1,
    )  # fmt: skip
    vision_config = CLIPVisionConfig(
        hidden_size=IMAGE_DIM, intermediate_size=2 * IMAGE_DIM, num_hidden_layers=2, num_attention_heads=16,
        image_size=CLIP_IMAGE_SIZE, patch_size=8, hidden_act="gelu",
    )  # fmt: skip
    clip = clip_vision_tensors(open_weights(official / CLIP_FILE), "clip")
    pipeline = WanImageToVideoPipeline(
        transformer=_strict(WanTransformer3DModel(**config), transformer_weights(official)),
        vae=_strict(AutoencoderKLWan(**TWIN_VAE21), vae_weights(official / VAE_FILES[16])),
        text_encoder=_strict(UMT5EncoderModel(text_config), umt5_tensors(open_weights(official / T5_FILE), "t5")),
        tokenizer=AutoTokenizer.from_pretrained(official / TOKENIZER_FOLDER),
        image_encoder=_strict(CLIPVisionModel(vision_config), clip),
        image_processor=CLIPImageProcessor(**wan_clip_preprocessing(CLIP_IMAGE_SIZE)),
        scheduler=UniPCMultistepScheduler(prediction_type="flow_prediction", use_flow_sigmas=True, flow_shift=3.0),
    )  # fmt: skip
    pipeline.save_pretrained(folder)
    return folder


def _strict(module: torch.nn.Module, tensors: Any) -> torch.nn.Module:
    """`module` holding `tensors` (numpy, its own names): every name must match, both ways."""
    module.load_state_dict({name: torch.from_numpy(np.array(tensors[name])) for name in tensors}, strict=True)
    return module.eval()
