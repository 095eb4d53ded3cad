"""An official-format Wan checkpoint folder: the Wan-AI repos without "-Diffusers".

    config.json + diffusion_pytorch_model*.safetensors    the transformer (WanModel; Wan 2.2 Animate's WanAnimateModel,
                                                          Wan 2.2 S2V's WanModel_S2V),
                                                          original names; Wan 2.2 A14B: in high_noise_model/ and
                                                          low_noise_model/
    Wan2.1_VAE.pth or Wan2.2_VAE.pth                      the VAE, original names
    models_t5_umt5-xxl-enc-bf16.pth + google/umt5-xxl/    the T5 encoder's state dict and its tokenizer
    models_clip_open-clip-xlm-roberta-large-vit-huge-14.pth   Wan 2.1 I2V, Wan 2.2 Animate: open-clip, its vision
                                                          tower is read
    wav2vec2-large-xlsr-53-english/                       Wan 2.2 S2V: the speech encoder (a transformers folder)

File names and the Wan 2.2 A14B expert boundaries are those of the official `wan/configs`.
WanModel's config.json leaves out the arguments it ignores (`patch_size`, `text_dim`,
`qk_norm`, `cross_attn_norm`, `window_size`): those, and whether the cross-attention
also reads CLIP image tokens (Wan 2.1 I2V: an `img_emb`), are read from the tensor shapes.
WanAnimateModel's config has no `model_type` (it is "animate" here) and says nothing of its
motion and face encoders: their sizes come from the shapes too (`original_animate.py`).
The VAE's architecture is read from its shapes too (`original_vae.py`). WanModel_S2V's config
holds its S2V keys (`S2VSpec`); its own tensors keep their official names.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from wanjax.adapters.checkpoints.checkpoint import (
    EncoderFiles,
    ReplacedFiles,
    component_weights,
    conditioning_of,
    shared_architecture,
)
from wanjax.adapters.checkpoints.diffusers_folder import read_json
from wanjax.adapters.checkpoints.original_animate import MODEL_CLASS as ANIMATE_CLASS
from wanjax.adapters.checkpoints.original_animate import animate_spec_of
from wanjax.adapters.checkpoints.original_vae import vae_spec_of
from wanjax.adapters.checkpoints.pth_file import PthWeights
from wanjax.adapters.checkpoints.weights import Weights, open_weights
from wanjax.domain.architectures import ARCHITECTURES, without_diffusers_suffix
from wanjax.domain.conditioning import ImageConditioning
from wanjax.domain.errors import CheckpointError, UnsupportedModelError
from wanjax.domain.s2v_spec import S2VSpec
from wanjax.domain.specs import TransformerSpec, VaeSpec

TRANSFORMER_CLASS = "WanModel"
EXPERT_FOLDERS = {"transformer": "high_noise_model", "transformer_2": "low_noise_model"}  # Wan 2.2 A14B
MODEL_TYPES = ("t2v", "i2v", "ti2v", "animate", "s2v")
S2V_CLASS = "WanModel_S2V"
SPEECH_ENCODER_FOLDER = "wav2vec2-large-xlsr-53-english"  # wan/configs/wan_s2v_14B.py: wav2vec
VAE_FILES = {16: "Wan2.1_VAE.pth", 48: "Wan2.2_VAE.pth"}  # by the transformer's latent channels (out_dim)
T5_FILE = "models_t5_umt5-xxl-enc-bf16.pth"
TOKENIZER_FOLDER = "google/umt5-xxl"
CLIP_FILE = "models_clip_open-clip-xlm-roberta-large-vit-huge-14.pth"
BOUNDARY_RATIO = {"t2v": 0.875, "i2v": 0.9}  # wan/configs: t2v_A14B.boundary, i2v_A14B.boundary
WAN_MODEL_DEFAULTS = dict(
    in_dim=16, dim=2048, ffn_dim=8192, freq_dim=256, out_dim=16, num_heads=16, num_layers=32, eps=1e-6
)  # WanModel.__init__'s, for a config.json that leaves a key out
ANIMATE_MODEL_DEFAULTS = dict(
    WAN_MODEL_DEFAULTS, in_dim=36, dim=5120, ffn_dim=13824, num_heads=40, num_layers=40, model_type="animate"
)  # WanAnimateModel.__init__'s
S2V_MODEL_DEFAULTS = dict(WAN_MODEL_DEFAULTS, model_type="s2v")  # WanModel_S2V.__init__'s base keys
ROPE_POSITIONS = 1024  # WanModel's rope_params(1024, ...)


def is_official_folder(root: Path) -> bool:
    return any((root / folder / "config.json").is_file() for folder in ("", EXPERT_FOLDERS["transformer"]))


class OfficialCheckpoint:
    """Validated view of an official-format folder; nothing heavy is read until asked for.

    Opening checks that every file the model needs is there (or replaced by `replaced`),
    naming any that is missing, and reads the transformer configs.
    """

    def __init__(self, root: Path, replaced: ReplacedFiles = ReplacedFiles()) -> None:
        self.root = Path(root)
        self.replaced = replaced
        self._metadata_lock = threading.Lock()
        two_experts = (self.root / EXPERT_FOLDERS["transformer_2"]).is_dir()
        self.experts: tuple[str, ...] = tuple(EXPERT_FOLDERS) if two_experts else ("transformer",)
        replaced.check_experts(self.experts, self.root)
        self._configs = {expert: self._transformer_config(expert) for expert in self.experts}
        types = {_defaults(config).get("model_type", "t2v") for config in self._configs.values()}
        if len(types) != 1 or not types <= set(MODEL_TYPES):
            raise UnsupportedModelError(
                f"{self.root}: WanModel model_type {sorted(types)}; wanjax runs one of {', '.join(MODEL_TYPES)}"
            )
        self.model_type = types.pop()
        self.boundary_ratio: float | None = BOUNDARY_RATIO.get(self.model_type) if two_experts else None
        out_dim = self._configs["transformer"].get("out_dim", WAN_MODEL_DEFAULTS["out_dim"])
        if out_dim not in VAE_FILES:
            raise UnsupportedModelError(f"{self.root}: a transformer with out_dim={out_dim}; Wan's have 16 or 48")
        self._own_files = {"vae": self.root / VAE_FILES[out_dim], "text_encoder": self.root / T5_FILE}
        for component, path in self._own_files.items():
            if replaced.get(component) is None:
                _require(self.root, path.name, f"--set {component}_file=PATH")
        _require(self.root, TOKENIZER_FOLDER)

    def folder(self, expert: str) -> Path:
        return self.root / EXPERT_FOLDERS[expert] if len(self.experts) == 2 else self.root

    def weights(self, component: str) -> Weights:
        if component == "speech_encoder":
            return _speech_encoder_weights(self.speech_encoder_folder())
        location = self.replaced.get(component) or self._own_files.get(component) or self.folder(component)
        with self._metadata_lock:
            return component_weights(component, location)

    @cached_property
    def transformer_spec(self) -> TransformerSpec:
        """The architecture every expert shares (one compiled step serves them all)."""
        return shared_architecture(
            {str(self.folder(e)): transformer_spec_of(self._configs[e], self.weights(e), self.folder(e)) for e in self.experts}
        )

    @cached_property
    def vae_spec(self) -> VaeSpec:
        location = self.replaced.get("vae") or self._own_files["vae"]
        return vae_spec_of(self.weights("vae"), str(location))

    @cached_property
    def image_conditioning(self) -> ImageConditioning:
        if self.transformer_spec.uses_image_embeddings and self.replaced.get("image_encoder") is None:
            _require(self.root, CLIP_FILE, "--set image_encoder_file=PATH")
        return conditioning_of(
            self.transformer_spec, self.vae_spec, expand_timesteps=self.model_type == "ti2v",
            has_image_encoder=True, root=self.root,
        )  # fmt: skip

    def text_encoder_files(self) -> EncoderFiles:
        weights = self.replaced.get("text_encoder") or self._own_files["text_encoder"]
        return EncoderFiles(weights, self.root / TOKENIZER_FOLDER)

    def speech_encoder_folder(self) -> Path | None:
        """Wan 2.2 S2V's wav2vec2 folder; None for a model that reads no speech."""
        if not self.transformer_spec.is_s2v:
            return None
        _require(self.root, SPEECH_ENCODER_FOLDER)
        return self.root / SPEECH_ENCODER_FOLDER

    def image_encoder_files(self) -> EncoderFiles | None:
        return EncoderFiles(self._clip_file(), None) if self.transformer_spec.uses_image_embeddings else None

    def verify(self) -> None:
        _ = self.image_conditioning
        components = (*self.experts, "vae", "text_encoder")
        components += ("image_encoder",) if self.image_encoder_files() else ()
        components += ("speech_encoder",) if self.transformer_spec.is_s2v else ()
        for component in components:
            self.weights(component)

    @cached_property
    def repo_id(self) -> str | None:
        """The Wan-AI repo this folder holds, e.g. "Wan-AI/Wan2.2-T2V-A14B" (`published_repo_id`)."""
        return published_repo_id(self.transformer_spec, self.vae_spec, len(self.experts), self.root)

    def _clip_file(self) -> Path:
        return self.replaced.get("image_encoder") or self.root / CLIP_FILE

    def _transformer_config(self, expert: str) -> dict[str, Any]:
        path = self.folder(expert) / "config.json"
        config = read_json(path, what="an official Wan transformer folder")
        if config.get("_class_name") not in (TRANSFORMER_CLASS, ANIMATE_CLASS, S2V_CLASS):
            raise UnsupportedModelError(
                f"{path}: _class_name {config.get('_class_name')!r}; an official Wan transformer is a "
                f"{TRANSFORMER_CLASS} (Wan 2.2 Animate: a {ANIMATE_CLASS}, Wan 2.2 S2V: a {S2V_CLASS})"
            )
        return config


def _speech_encoder_weights(folder: Path | None) -> Weights:
    """The wav2vec2 folder's tensors: its safetensors, or a `pytorch_model.bin` (memory-mapped) where it
    holds only that (transformers' older format); for their parameter count."""
    if folder is None:
        raise CheckpointError("this model reads no speech: it has no speech encoder")
    legacy = folder / "pytorch_model.bin"
    if legacy.is_file() and not any(folder.glob("*.safetensors*")):
        return PthWeights(legacy)
    return open_weights(folder)


def published_repo_id(transformer: TransformerSpec, vae: VaeSpec, num_experts: int, root: Path) -> str | None:
    """The official Wan-AI repo of this architecture (transformer, VAE, number of experts): the
    published one's diffusers repo id without "-Diffusers". The 480P and 720P I2V releases
    share one; the folder's path decides between them (the repo name in it, as in the Hugging
    Face cache), else the first. None for an architecture no Wan-AI repo has."""
    found = [
        without_diffusers_suffix(repo)
        for repo, published in ARCHITECTURES.items()
        if (published.transformer, published.vae, published.num_experts) == (transformer, vae, num_experts)
    ]
    path = str(Path(root).resolve()).lower()
    named = [repo for repo in found if repo.rpartition("/")[2].lower() in path]
    return (named or found or [None])[0]


def transformer_spec_of(config: Mapping[str, Any], tensors: Mapping[str, np.ndarray], folder: Path) -> TransformerSpec:
    """The architecture of a WanModel from its config.json (WanModel's defaults where a key is
    absent) and the shapes of its tensors under diffusers names (what the config leaves out)."""
    values = _defaults(config)
    if tuple(values.get("window_size", (-1, -1))) != (-1, -1):
        raise UnsupportedModelError(f"{folder}: window_size={values['window_size']}; wanjax runs global attention only")
    dim, heads = values["dim"], values["num_heads"]
    shape = {name: tuple(tensors[name].shape) for name in _SHAPES_READ if name in tensors}
    if "patch_embedding.weight" not in shape or "condition_embedder.text_embedder.linear_1.weight" not in shape:
        raise CheckpointError(f"{folder}: no patch and text embedding weights; is it a Wan transformer?")
    image = shape.get("condition_embedder.image_embedder.norm1.weight")
    positions = shape.get("condition_embedder.image_embedder.pos_embed")
    animate = animate_spec_of(tensors, str(folder)) if values.get("model_type") == "animate" else None
    spec = TransformerSpec.from_diffusers_config(
        dict(
            patch_size=shape["patch_embedding.weight"][2:], num_attention_heads=heads,
            attention_head_dim=dim // heads, in_channels=values["in_dim"], out_channels=values["out_dim"],
            text_dim=shape["condition_embedder.text_embedder.linear_1.weight"][1], freq_dim=values["freq_dim"],
            ffn_dim=values["ffn_dim"], num_layers=values["num_layers"], eps=values["eps"],
            cross_attn_norm="blocks.0.norm2.weight" in shape, rope_max_seq_len=ROPE_POSITIONS,
            qk_norm="rms_norm_across_heads" if "blocks.0.attn1.norm_q.weight" in shape else None,
            image_dim=image[0] if image else None, added_kv_proj_dim=dim if image else None,
            pos_embed_seq_len=positions[1] if positions else None,
        )  # fmt: skip
    )
    s2v = S2VSpec.from_config(values) if values.get("model_type") == "s2v" else None
    return attrs.evolve(spec, animate=animate, s2v=s2v)


def _defaults(config: Mapping[str, Any]) -> dict[str, Any]:
    """A transformer config.json with its class's defaults for the keys it leaves out."""
    defaults = {ANIMATE_CLASS: ANIMATE_MODEL_DEFAULTS, S2V_CLASS: S2V_MODEL_DEFAULTS}.get(
        config.get("_class_name"), WAN_MODEL_DEFAULTS
    )
    return {**defaults, **config}


_SHAPES_READ = (
    "patch_embedding.weight",
    "condition_embedder.text_embedder.linear_1.weight",
    "condition_embedder.image_embedder.norm1.weight",
    "condition_embedder.image_embedder.pos_embed",
    "blocks.0.norm2.weight",
    "blocks.0.attn1.norm_q.weight",
)


def _require(root: Path, relative: str, replacement: str = "") -> None:
    if (root / relative).exists():
        return
    instead = f", or pass the file with {replacement}" if replacement else ""
    raise CheckpointError(
        f"{root}: {relative} is missing, which an official-format Wan checkpoint holds; download it "
        f"from the model's Wan-AI repo (hf download Wan-AI/<repo> --include '{relative}*' --local-dir {root}){instead}"
    )


def official_repo_id(folder: Path) -> str | None:
    """The Wan-AI repo an official-format folder holds (see `OfficialCheckpoint.repo_id`); None for
    a folder of another layout or of an unpublished architecture. Reads configs and tensor
    headers (the VAE's `.pth` memory-mapped), no tensor data."""
    folder = Path(folder)
    if (folder / "model_index.json").is_file() or not is_official_folder(folder):
        return None
    return OfficialCheckpoint(folder).repo_id
