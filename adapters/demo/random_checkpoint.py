"""A Wan checkpoint with random weights, in diffusers format, at any text-to-video architecture:
the built-in demo (`checkpoint.py`: a tiny one) and the device check's end-to-end runs (the
published architectures of `domain/architectures.py`, with umt5-xxl's encoder at its real size).

Every file the real loaders read: model_index.json, the scheduler's config, the tokenizer, the UMT5
text encoder, each transformer expert and the VAE, each with its config. Tensor names and shapes
come from the models' own shape-only forms (and transformers' UMT5 names), so they are what the
loaders expect; the values are seeded (`random_tensors.py`). The tokenizer is always the demo's
character-level one (98 ids; umt5-xxl's sentencepiece model would need a download): a text
encoder of umt5-xxl's size keeps its 256384-row embedding, of which the prompts read the first 98.
No torch is imported: the device check's CPU dry run has none.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from wanjax.adapters.demo.random_tensors import write_random_safetensors
from wanjax.domain.architectures import Architecture
from wanjax.domain.errors import UnsupportedModelError

UNIPC_SCHEDULER = {
    "_class_name": "UniPCMultistepScheduler",
    "num_train_timesteps": 1000,
    "prediction_type": "flow_prediction",
    "use_flow_sigmas": True,
    "flow_shift": 3.0,
    "solver_order": 2,
    "solver_type": "bh2",
    "predict_x0": True,
    "lower_order_final": True,
    "final_sigmas_type": "zero",
}
UMT5_ENCODER_CONFIG = {  # transformers' UMT5Config of Wan's text encoder, less its sizes
    "architectures": ["UMT5EncoderModel"],
    "model_type": "umt5",
    "feed_forward_proj": "gated-gelu",
    "dense_act_fn": "gelu_new",
    "is_gated_act": True,
    "layer_norm_epsilon": 1e-6,
    "dropout_rate": 0.0,
    "is_encoder_decoder": False,
    "pad_token_id": 0,
    "eos_token_id": 1,
}
DEMO_UMT5_SIZES = {  # a toy UMT5 of the same family: the demo's and the tests' text encoder
    "d_kv": 16, "num_heads": 2, "num_layers": 2, "relative_attention_num_buckets": 8,
    "relative_attention_max_distance": 32,
}  # fmt: skip
UMT5_BLOCK = (  # per block: the tensors transformers' UMT5EncoderModel saves, after encoder.block.{i}.
    "layer.0.layer_norm.weight", "layer.0.SelfAttention.q.weight", "layer.0.SelfAttention.k.weight",
    "layer.0.SelfAttention.v.weight", "layer.0.SelfAttention.o.weight",
    "layer.0.SelfAttention.relative_attention_bias.weight", "layer.1.layer_norm.weight",
    "layer.1.DenseReluDense.wi_0.weight", "layer.1.DenseReluDense.wi_1.weight", "layer.1.DenseReluDense.wo.weight",
)  # fmt: skip
WEIGHTS_FILE = "diffusion_pytorch_model.safetensors"


def demo_umt5_sizes(vocab_size: int, d_model: int = 32) -> dict[str, int]:
    """The toy UMT5's sizes for a tokenizer of `vocab_size` ids and a model width `d_model`."""
    return {**DEMO_UMT5_SIZES, "vocab_size": vocab_size, "d_model": d_model, "d_ff": 2 * d_model}


def write_random_checkpoint(
    folder: Path,
    architecture: Architecture,
    text_encoder: Mapping[str, int],
    *,
    seed: int = 0,
    dtype: str = "float32",
    text_encoder_folder: Path | None = None,
    linked_experts: bool = False,
) -> None:
    """Writes a random-weight checkpoint of `architecture` into `folder` (created), its UMT5 encoder
    of the `text_encoder` sizes (UMT5Config arguments: `UMT5_XXL_ENCODER`, `demo_umt5_sizes`), every
    tensor in `dtype` ("float32" or "bfloat16").

    `text_encoder_folder`: a text encoder of those sizes already written (`write_random_text_encoder`),
    linked instead of written again. `linked_experts`: Wan 2.2 A14B's second expert is a link to the
    first's folder (identical weights, half the disk) instead of weights of its own.
    """
    from wanjax.adapters.torch.demo_tokenizer import DEMO_VOCAB_SIZE, write_demo_tokenizer

    if text_encoder["vocab_size"] < DEMO_VOCAB_SIZE:
        raise ValueError(f"text encoder vocab_size {text_encoder['vocab_size']}: the tokenizer has {DEMO_VOCAB_SIZE} ids")
    if architecture.image_tokens or architecture.transformer.extensions:
        raise UnsupportedModelError(
            "the random checkpoint writer writes text-to-video architectures (Wan 2.1 T2V, Wan 2.2 T2V "
            "A14B and TI2V-5B): this one needs an image encoder or a model extension's inputs (VACE, Animate)"
        )
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    write_demo_tokenizer(folder / "tokenizer")
    if text_encoder_folder is None:
        write_random_text_encoder(folder / "text_encoder", text_encoder, seed=seed, dtype=dtype)
    else:
        os.symlink(Path(text_encoder_folder).resolve(), folder / "text_encoder", target_is_directory=True)
    experts = ("transformer", "transformer_2")[: architecture.num_experts]
    for index, expert in enumerate(experts):
        if index and linked_experts:
            os.symlink(experts[0], folder / expert, target_is_directory=True)
        else:
            _write_transformer(folder / expert, architecture, seed=seed + index, dtype=dtype)
    _write_vae(folder / "vae", architecture, seed=seed, dtype=dtype)
    (folder / "scheduler").mkdir()
    _write_json(folder / "scheduler" / "scheduler_config.json", UNIPC_SCHEDULER)
    _write_json(folder / "model_index.json", _model_index(architecture))


def write_random_text_encoder(folder: Path, sizes: Mapping[str, int], *, seed: int = 0, dtype: str = "float32") -> None:
    """`config.json` and `model.safetensors` of a random UMT5 encoder of `sizes` (UMT5Config
    arguments) into `folder` (created), as transformers' `UMT5EncoderModel.save_pretrained` names them."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    _write_json(folder / "config.json", {**UMT5_ENCODER_CONFIG, **sizes, "torch_dtype": dtype})
    shapes = umt5_tensor_shapes(sizes)
    # T5's own scales where they are not 1 / sqrt(fan-in): its attention does not divide the logits by
    # sqrt(d_kv), its queries carry that factor instead; a unit embedding; position biases of d_model's.
    d_model = sizes["d_model"]
    stds = {"shared.weight": 1.0} | {
        name: (d_model * sizes["d_kv"]) ** -0.5 if name.endswith(".q.weight") else d_model**-0.5
        for name in shapes if name.endswith((".q.weight", "relative_attention_bias.weight"))
    }  # fmt: skip
    write_random_safetensors(folder / "model.safetensors", shapes, seed=seed, dtype=dtype, stds=stds)


def umt5_tensor_shapes(sizes: Mapping[str, int]) -> dict[str, tuple[int, ...]]:
    """Every tensor of a UMT5 encoder of `sizes`, by transformers' name (the tied embedding once)."""
    d, inner, ff = sizes["d_model"], sizes["num_heads"] * sizes["d_kv"], sizes["d_ff"]
    block_shapes = (
        (d,), (inner, d), (inner, d), (inner, d), (d, inner),
        (sizes["relative_attention_num_buckets"], sizes["num_heads"]), (d,), (ff, d), (ff, d), (d, ff),
    )  # fmt: skip
    shapes = {"shared.weight": (sizes["vocab_size"], d)}
    for block in range(sizes["num_layers"]):
        shapes |= {f"encoder.block.{block}.{name}": shape for name, shape in zip(UMT5_BLOCK, block_shapes)}
    shapes["encoder.final_layer_norm.weight"] = (d,)
    return shapes


def _write_transformer(folder: Path, architecture: Architecture, *, seed: int, dtype: str) -> None:
    import jax.numpy as jnp

    from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
    from wanjax.adapters.jax.transformer.weights import abstract_transformer, transformer_weight_shapes

    runtime = TransformerRuntime(dtype=jnp.float32, param_dtype=jnp.float32)
    shapes = transformer_weight_shapes(abstract_transformer(architecture.transformer, runtime))
    folder.mkdir(parents=True)
    _write_json(folder / "config.json", {**attrs.asdict(architecture.transformer), "_class_name": "WanTransformer3DModel"})
    write_random_safetensors(folder / WEIGHTS_FILE, shapes, seed=seed, dtype=dtype)


def _write_vae(folder: Path, architecture: Architecture, *, seed: int, dtype: str) -> None:
    from wanjax.adapters.jax.vae.weights import vae_weight_shapes

    folder.mkdir(parents=True)
    _write_json(folder / "config.json", {**attrs.asdict(architecture.vae), "_class_name": "AutoencoderKLWan", "dropout": 0.0})
    write_random_safetensors(folder / WEIGHTS_FILE, vae_weight_shapes(architecture.vae), seed=seed, dtype=dtype)


def _model_index(architecture: Architecture) -> dict[str, Any]:
    index: dict[str, Any] = {
        "_class_name": "WanPipeline",
        "scheduler": ["diffusers", "UniPCMultistepScheduler"],
        "text_encoder": ["transformers", "UMT5EncoderModel"],
        "tokenizer": ["transformers", "PreTrainedTokenizerFast"],
        "transformer": ["diffusers", "WanTransformer3DModel"],
        "vae": ["diffusers", "AutoencoderKLWan"],
    }
    if architecture.num_experts == 2:
        index |= {"transformer_2": ["diffusers", "WanTransformer3DModel"], "boundary_ratio": architecture.boundary_ratio}
    if architecture.first_frame:
        index["expand_timesteps"] = True  # Wan 2.2 TI2V: a timestep per token
    return index


def _write_json(path: Path, value: Mapping[str, Any]) -> None:
    path.write_text(json.dumps(_jsonable(value), indent=2, sort_keys=True) + "\n")


def _jsonable(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value
