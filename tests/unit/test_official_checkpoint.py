"""Official-format folders (the Wan-AI repos without -Diffusers): the layout is recognised, a
missing file is named with its fix before anything loads, the original VAE names map onto
diffusers', and the architecture (and so the published repo) is read from configs and shapes."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from diffusers.loaders.single_file_utils import convert_wan_vae_to_diffusers

from official_folders import KINDS, official_models, write_official_folder, write_s2v_folder

from wanjax.adapters.checkpoints.checkpoint import ReplacedFiles
from wanjax.adapters.checkpoints.diffusers_folder import DiffusersCheckpoint
from wanjax.adapters.checkpoints.layout import open_checkpoint_folder
from wanjax.adapters.checkpoints.official_folder import (
    CLIP_FILE,
    SPEECH_ENCODER_FOLDER,
    T5_FILE,
    OfficialCheckpoint,
    official_repo_id,
    published_repo_id,
    transformer_spec_of,
)
from wanjax.adapters.checkpoints.original_vae import diffusers_vae_names, vae_spec_of, vae_weights
from wanjax.domain.architectures import ARCHITECTURES, WAN21_VAE, WAN22_VAE
from wanjax.domain.conditioning import ImageConditioning
from wanjax.domain.errors import CheckpointError, ConfigError


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory):
    """kind -> a tiny official folder of that kind, written on first use."""
    made: dict[str, Path] = {}

    def get(kind: str) -> Path:
        if kind not in made:
            made[kind] = write_official_folder(tmp_path_factory.mktemp(kind), official_models(kind))
        return made[kind]

    return get


@pytest.fixture
def copy_of(folders, tmp_path):
    def copy(kind: str) -> Path:
        return Path(shutil.copytree(folders(kind), tmp_path / kind))

    return copy


@pytest.mark.parametrize(
    "kind, experts, boundary, conditioning",
    [
        ("t2v", 1, None, ImageConditioning.NONE),
        ("t2v-a14b", 2, 0.875, ImageConditioning.NONE),
        ("i2v", 1, None, ImageConditioning.CHANNELS),
        ("i2v-a14b", 2, 0.9, ImageConditioning.CHANNELS),
        ("ti2v", 1, None, ImageConditioning.FIRST_FRAME),
        ("animate", 1, None, ImageConditioning.CHANNELS),
    ],
)
def test_each_layout_opens_with_its_architecture(folders, kind, experts, boundary, conditioning) -> None:
    checkpoint = open_checkpoint_folder(folders(kind))
    checkpoint.verify()

    assert isinstance(checkpoint, OfficialCheckpoint)
    assert len(checkpoint.experts) == experts and checkpoint.boundary_ratio == boundary
    assert checkpoint.image_conditioning is conditioning
    spec = checkpoint.transformer_spec
    assert (spec.num_attention_heads, spec.attention_head_dim, spec.text_dim, spec.patch_size) == (2, 12, 32, (1, 2, 2))
    assert spec.in_channels == KINDS[kind].in_dim and spec.uses_image_embeddings == KINDS[kind].clip
    assert spec.is_animate == KINDS[kind].animate
    assert checkpoint.vae_spec.z_dim == (48 if KINDS[kind].vae22 else 16)
    assert (checkpoint.image_encoder_files() is not None) == KINDS[kind].clip
    assert checkpoint.repo_id is None  # no Wan-AI repo has this toy architecture


def test_a_diffusers_folder_still_opens_as_one(tiny_checkpoint) -> None:
    assert isinstance(open_checkpoint_folder(tiny_checkpoint), DiffusersCheckpoint)


def test_a_folder_of_neither_layout_is_named_as_such(tmp_path) -> None:
    (tmp_path / "Wan2.1_VAE.pth").write_bytes(b"")
    with pytest.raises(CheckpointError, match="model_index.json is missing .* and so is config.json"):
        open_checkpoint_folder(tmp_path)


@pytest.mark.parametrize(
    "kind, removed, fix",
    [
        ("t2v", "Wan2.1_VAE.pth", "--set vae_file=PATH"),
        ("ti2v", "Wan2.2_VAE.pth", "--set vae_file=PATH"),
        ("t2v", T5_FILE, "--set text_encoder_file=PATH"),
        ("t2v", "google", "hf download"),
    ],
)
def test_a_missing_file_is_named_with_its_fix(copy_of, kind, removed, fix) -> None:
    folder = copy_of(kind)
    path = folder / removed
    shutil.rmtree(path) if path.is_dir() else path.unlink()
    with pytest.raises(CheckpointError, match=f"{removed}.* is missing") as raised:
        open_checkpoint_folder(folder)
    assert fix in str(raised.value)


def test_a_missing_clip_file_is_named_before_loading(copy_of) -> None:
    folder = copy_of("i2v")
    (folder / CLIP_FILE).unlink()
    with pytest.raises(CheckpointError, match=f"{CLIP_FILE} is missing.*--set image_encoder_file=PATH"):
        open_checkpoint_folder(folder).verify()


def test_replaced_files_stand_in_for_missing_ones(copy_of, tmp_path) -> None:
    folder = copy_of("t2v")
    moved = tmp_path / "elsewhere.pth"
    shutil.move(folder / "Wan2.1_VAE.pth", moved)
    checkpoint = open_checkpoint_folder(folder, ReplacedFiles(vae=str(moved)))
    checkpoint.verify()
    assert checkpoint.weights("vae").identity()[0].path == str(moved.resolve())


def test_a_second_expert_file_for_one_expert_is_refused(folders) -> None:
    with pytest.raises(ConfigError, match="transformer_2_file is set"):
        open_checkpoint_folder(folders("t2v"), ReplacedFiles(transformer_2="low.safetensors"))


def _released_vae(version: str) -> torch.nn.Module:
    """The released VAE's module at its real size, on the meta device (no memory), as the official
    loaders build it."""
    from official_wan import official_wan

    official_wan()
    from wan.modules import vae2_1, vae2_2

    with torch.device("meta"):
        if version == "2.1":
            return vae2_1.WanVAE_(dim=96, z_dim=16, temperal_downsample=[False, True, True])
        return vae2_2.WanVAE_(dim=160, dec_dim=256, z_dim=48, temperal_downsample=[False, True, True])


def test_wan21_vae_names_are_the_ones_diffusers_converts_to() -> None:
    """diffusers' converter (written for the released Wan 2.1 VAE) is an independent check of the names."""
    names = list(_released_vae("2.1").state_dict())
    assert sorted(diffusers_vae_names(names).values()) == sorted(convert_wan_vae_to_diffusers(dict.fromkeys(names)))


def _shapes_only(shapes: dict[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
    """Arrays of the given shapes that take no memory (every stride 0)."""
    zero = np.zeros(1, np.float32)
    return {name: np.lib.stride_tricks.as_strided(zero, shape, (0,) * len(shape)) for name, shape in shapes.items()}


@pytest.mark.parametrize("version, expected", [("2.1", WAN21_VAE), ("2.2", WAN22_VAE)])
def test_the_released_vaes_read_as_the_published_architectures(version, expected) -> None:
    shapes = {name: tuple(tensor.shape) for name, tensor in _released_vae(version).state_dict().items()}
    renamed = _shapes_only({new: shapes[old] for old, new in diffusers_vae_names(shapes).items()})
    assert vae_spec_of(renamed, "released") == expected


# The Wan-AI repos' config.json (WanModel leaves patch_size, text_dim, qk_norm and
# cross_attn_norm out of it) and the expected published architecture of each.
WAN_14B = dict(dim=5120, ffn_dim=13824, num_heads=40, num_layers=40, out_dim=16)
RELEASED = {  # repo: (config.json, experts)
    "Wan-AI/Wan2.1-T2V-1.3B": (
        dict(model_type="t2v", dim=1536, ffn_dim=8960, num_heads=12, num_layers=30, in_dim=16, out_dim=16), 1,
    ),
    "Wan-AI/Wan2.1-T2V-14B": (dict(WAN_14B, model_type="t2v", in_dim=16), 1),
    "Wan-AI/Wan2.1-I2V-14B-720P": (dict(WAN_14B, model_type="i2v", in_dim=36), 1),
    "Wan-AI/Wan2.2-T2V-A14B": (dict(WAN_14B, model_type="t2v", in_dim=16), 2),
    "Wan-AI/Wan2.2-I2V-A14B": (dict(WAN_14B, model_type="i2v", in_dim=36), 2),
    "Wan-AI/Wan2.2-TI2V-5B": (
        dict(model_type="ti2v", dim=3072, ffn_dim=14336, num_heads=24, num_layers=30, in_dim=48, out_dim=48), 1,
    ),
}  # fmt: skip


@pytest.mark.parametrize("repo", list(RELEASED))
def test_released_configs_name_their_repo(repo, tmp_path) -> None:
    config, experts = RELEASED[repo]
    dim, clip = config["dim"], repo == "Wan-AI/Wan2.1-I2V-14B-720P"
    shapes = {
        "patch_embedding.weight": (dim, config["in_dim"], 1, 2, 2),
        "condition_embedder.text_embedder.linear_1.weight": (dim, 4096),
        "blocks.0.norm2.weight": (dim,),
        "blocks.0.attn1.norm_q.weight": (dim,),
        **({"condition_embedder.image_embedder.norm1.weight": (1280,)} if clip else {}),
    }
    root = tmp_path / f"models--{repo.replace('/', '--')}" / "snapshots" / "0123"
    config = {"_class_name": "WanModel", "freq_dim": 256, "eps": 1e-6, "text_len": 512, **config}
    spec = transformer_spec_of(config, _shapes_only(shapes), root)
    vae = WAN22_VAE if config["out_dim"] == 48 else WAN21_VAE

    assert spec == ARCHITECTURES[f"{repo}-Diffusers"].transformer
    assert published_repo_id(spec, vae, experts, root) == repo


def test_the_480p_release_is_the_default_of_the_two_i2v_resolutions(tmp_path) -> None:
    i2v = ARCHITECTURES["Wan-AI/Wan2.1-I2V-14B-480P-Diffusers"]
    assert published_repo_id(i2v.transformer, i2v.vae, 1, tmp_path / "my-model") == "Wan-AI/Wan2.1-I2V-14B-480P"


def test_official_repo_id_is_none_for_other_folders(folders, tiny_checkpoint, tmp_path) -> None:
    assert official_repo_id(tiny_checkpoint) is None  # diffusers format
    assert official_repo_id(tmp_path) is None  # neither
    assert official_repo_id(folders("t2v")) is None  # official, but no published architecture


def test_config_keys_name_the_replacing_files() -> None:
    from wanjax.application.builders import replaced_files
    from wanjax.domain.config import GenerationConfig

    keys = {"vae_file": "~/Wan2.1_VAE.pth", "text_encoder_file": "t5.pth", "image_encoder_file": "clip.pth"}
    files = replaced_files(GenerationConfig().with_overrides(keys).model)
    assert files.get("vae") == Path.home() / "Wan2.1_VAE.pth"
    assert (files.get("text_encoder"), files.get("image_encoder"), files.get("transformer")) == (
        Path("t5.pth"), Path("clip.pth"), None,
    )  # fmt: skip


def _names_of_transformers_model(model_class, config) -> set[str]:
    with torch.device("meta"):
        return set(model_class(config).state_dict())


def test_the_released_t5_maps_onto_umt5_xxl() -> None:
    """The official umt5-xxl encoder at its real size (meta device): every tensor lands on a
    transformers UMT5EncoderModel name, and the shapes give google/umt5-xxl's config."""
    from transformers import UMT5Config, UMT5EncoderModel

    from official_wan import official_wan
    from wanjax.adapters.checkpoints.original_t5 import umt5_config, umt5_tensors

    official_wan()
    from wan.modules.t5 import umt5_xxl

    released = umt5_xxl(encoder_only=True, device="meta").state_dict()
    tensors = umt5_tensors(_shapes_only({name: tuple(t.shape) for name, t in released.items()}), "t5")
    config = umt5_config(tensors, "t5")

    expected = dict(vocab_size=256384, d_model=4096, d_kv=64, d_ff=10240, num_layers=24, num_heads=64)
    assert {key: config[key] for key in expected} == expected
    assert (config["relative_attention_num_buckets"], config["feed_forward_proj"]) == (32, "gated-gelu")
    assert set(tensors) == _names_of_transformers_model(UMT5EncoderModel, UMT5Config(**config))


def test_the_released_clip_maps_onto_a_vit_h_14_vision_model() -> None:
    from transformers import CLIPVisionConfig, CLIPVisionModel

    from official_wan import official_wan
    from wanjax.adapters.checkpoints.original_clip import clip_vision_config, clip_vision_tensors

    official_wan()
    from wan.modules.animate.clip import clip_xlm_roberta_vit_h_14

    released = clip_xlm_roberta_vit_h_14(device="meta").state_dict()
    tensors = clip_vision_tensors(_shapes_only({name: tuple(t.shape) for name, t in released.items()}), "clip")
    config = clip_vision_config(tensors, "clip")

    expected = dict(hidden_size=1280, intermediate_size=5120, num_hidden_layers=32, image_size=224, patch_size=14)
    assert {key: config[key] for key in expected} == expected
    assert set(tensors) == _names_of_transformers_model(CLIPVisionModel, CLIPVisionConfig(**config))


def test_experts_of_different_architectures_are_refused_by_both_layouts() -> None:
    from wanjax.adapters.checkpoints.checkpoint import shared_architecture
    from wanjax.domain.errors import UnsupportedModelError

    high = ARCHITECTURES["Wan-AI/Wan2.2-T2V-A14B-Diffusers"].transformer
    low = ARCHITECTURES["Wan-AI/Wan2.1-T2V-1.3B-Diffusers"].transformer
    assert shared_architecture({"high/": high, "low/": high}) == high
    with pytest.raises(UnsupportedModelError, match="high/ and low/ have different architectures"):
        shared_architecture({"high/": high, "low/": low})


def test_the_released_animate_model_maps_onto_diffusers_and_its_architecture() -> None:
    """Wan2.2-Animate-14B's WanAnimateModel at its real size (meta device): every official tensor
    (blur kernels aside) lands on a diffusers WanAnimateTransformer3DModel name with its shape,
    and the config and shapes read as the published architecture and repo."""
    from diffusers import WanAnimateTransformer3DModel

    from official_wan import official_animate
    from wanjax.adapters.checkpoints.original_names import diffusers_named

    official_animate()
    from wan.modules.animate.model_animate import WanAnimateModel

    with torch.device("meta"):
        official = WanAnimateModel()
        diffusers = WanAnimateTransformer3DModel(added_kv_proj_dim=5120)  # the published config's
    shapes = {name: tuple(tensor.shape) for name, tensor in official.state_dict().items()}
    renamed = diffusers_named(_shapes_only(shapes))
    expected = {name: tuple(tensor.shape) for name, tensor in diffusers.state_dict().items()}
    assert {name: renamed[name].shape for name in renamed} == expected

    root = Path("/data/Wan2.2-Animate-14B")
    config = {"_class_name": "WanAnimateModel", **official.config}
    spec = transformer_spec_of(config, renamed, root)
    assert spec == ARCHITECTURES["Wan-AI/Wan2.2-Animate-14B-Diffusers"].transformer
    assert published_repo_id(spec, WAN21_VAE, 1, root) == "Wan-AI/Wan2.2-Animate-14B"


def test_an_animate_model_without_its_motion_encoder_is_named(tmp_path) -> None:
    shapes = {
        "patch_embedding.weight": (24, 36, 1, 2, 2), "condition_embedder.text_embedder.linear_1.weight": (24, 32),
        "face_encoder.conv1_local.weight": (4096, 512, 3), "face_encoder.conv2.weight": (1024, 1024, 3),
    }  # fmt: skip
    config = {"_class_name": "WanAnimateModel", "dim": 24, "num_heads": 2, "num_layers": 5}
    with pytest.raises(CheckpointError, match=r"an Animate transformer without \['motion_encoder.conv_in.weight'"):
        transformer_spec_of(config, _shapes_only(shapes), tmp_path)


def test_the_speech_encoder_is_counted_from_its_safetensors_or_its_pytorch_bin(tmp_path) -> None:
    """S2V's wav2vec2 folder as transformers saves it now, and in its older format (a zip-format
    `pytorch_model.bin`, memory-mapped): the same parameters, read without loading the model."""
    folder, _, wav2vec2, _ = write_s2v_folder(tmp_path / "s2v")
    expected = sum(tensor.numel() for tensor in wav2vec2.state_dict().values())
    assert OfficialCheckpoint(folder).weights("speech_encoder").parameter_count() == expected
    speech = folder / SPEECH_ENCODER_FOLDER
    (speech / "model.safetensors").unlink()
    wav2vec2.save_pretrained(speech, safe_serialization=False)
    assert OfficialCheckpoint(folder).weights("speech_encoder").parameter_count() == expected
    OfficialCheckpoint(folder).verify()
