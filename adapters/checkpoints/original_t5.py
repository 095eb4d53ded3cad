"""The official Wan T5 encoder file (`models_t5_umt5-xxl-enc-bf16.pth`) under the names of
transformers' `UMT5EncoderModel`, and that model's config read from the tensor shapes.

The official `T5Encoder` (wan/modules/t5.py, umt5-xxl with `shared_pos=False`) is the same
network as transformers' UMT5 encoder: per block a pre-norm self-attention without
scaling, with its own relative-position buckets (`pos_embedding`, max distance 128),
then a pre-norm gated tanh-GELU feed-forward (`gate` is `wi_0`, `fc1` is `wi_1`); a
final norm. The names differ only; the mapping is ours, from the two modules' code.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

import numpy as np

from wanjax.adapters.checkpoints.gguf_file import PackedTensors
from wanjax.adapters.checkpoints.scaled_fp8 import ScaledFp8Weights, is_scaled_fp8
from wanjax.adapters.checkpoints.weights import RenamedWeights
from wanjax.domain.errors import CheckpointError
from wanjax.domain.quantization import SCALED_FP8

BLOCK = {
    "norm1.weight": "layer.0.layer_norm.weight",
    "attn.q.weight": "layer.0.SelfAttention.q.weight",
    "attn.k.weight": "layer.0.SelfAttention.k.weight",
    "attn.v.weight": "layer.0.SelfAttention.v.weight",
    "attn.o.weight": "layer.0.SelfAttention.o.weight",
    "pos_embedding.embedding.weight": "layer.0.SelfAttention.relative_attention_bias.weight",
    "norm2.weight": "layer.1.layer_norm.weight",
    "ffn.gate.0.weight": "layer.1.DenseReluDense.wi_0.weight",
    "ffn.fc1.weight": "layer.1.DenseReluDense.wi_1.weight",
    "ffn.fc2.weight": "layer.1.DenseReluDense.wo.weight",
}
TOP = {"token_embedding.weight": "shared.weight", "norm.weight": "encoder.final_layer_norm.weight"}
EMBEDDINGS = ("shared.weight", "encoder.embed_tokens.weight")  # tied in transformers
MAX_DISTANCE = 128  # T5RelativeEmbedding's max_dist
_BLOCK = re.compile(r"blocks\.(\d+)\.(.+)")
_LINEAR = re.compile(r"encoder\.block\.\d+\.(layer\.0\.SelfAttention\.[qkvo]|layer\.1\.DenseReluDense\.w\w+)\.weight")


def umt5_tensors(weights: Mapping[str, np.ndarray], where: str) -> Mapping[str, np.ndarray]:
    """The encoder's tensors under transformers' names, from the official names or transformers'
    own (a saved `UMT5EncoderModel`); unknown names are kept, for the loader to report. A ComfyUI
    "scaled fp8" file (`umt5_xxl_fp8_e4m3fn_scaled.safetensors`) reads as its dequantized weights,
    each tensor as it is read, and as its fp8 values and scales where `fp8_tensors` says."""
    if is_scaled_fp8(weights):
        return _named(ScaledFp8Weights(weights, where), where)
    if "token_embedding.weight" in weights:
        tensors = {_umt5_name(name): weights[name] for name in weights}
    else:
        tensors = dict(weights.items())
    embedding = next((tensors[name] for name in EMBEDDINGS if name in tensors), None)
    if embedding is None:
        raise CheckpointError(f"{where}: no token embedding (token_embedding.weight, shared.weight); not a T5 encoder")
    return {**tensors, **dict.fromkeys(EMBEDDINGS, embedding)}


def _named(weights: Mapping[str, np.ndarray], where: str) -> RenamedWeights:
    """`umt5_tensors` of tensors read lazily (dequantized ones), under transformers' names."""
    official = "token_embedding.weight" in weights
    rename = {name: _umt5_name(name) if official else name for name in weights}
    embedding = next((name for name, ours in rename.items() if ours in EMBEDDINGS), None)
    if embedding is None:
        raise CheckpointError(f"{where}: no token embedding (token_embedding.weight, shared.weight); not a T5 encoder")
    tied = {name: (embedding, lambda tensor: tensor) for name in EMBEDDINGS if name not in rename.values()}
    return RenamedWeights(weights, rename, tied)


def fp8_tensors(tensors: Mapping[str, np.ndarray]) -> set[str]:
    """The tensors of `umt5_tensors(...)` the JAX encoder keeps in fp8 with their scales: of a scaled fp8
    file, the token embedding and each Linear kernel whose every layer it stores as scaled e4m3 (a
    layer stack holds one type); empty for other files. The rest is read dequantized."""
    if not isinstance(tensors, PackedTensors):
        return set()
    scaled = {name for name in tensors if tensors.block_type(name) == SCALED_FP8}
    stacks: dict[str, list[str]] = defaultdict(list)
    for name in tensors:
        if linear := _LINEAR.fullmatch(name):
            stacks[linear[1]].append(name)
    kept = {name for layers in stacks.values() if scaled.issuperset(layers) for name in layers}
    return kept | (scaled & {"shared.weight"})


def fp8_values(weights: object, where: str) -> int:
    """How many of the text encoder file `weights`' values the JAX encoder keeps in fp8 (`fp8_tensors`),
    from the headers (nothing dequantized); 0 for weights that are no tensors (a published model's count)."""
    if not isinstance(weights, Mapping) or not is_scaled_fp8(weights):
        return 0
    tensors = umt5_tensors(weights, where)
    assert isinstance(tensors, RenamedWeights)
    return sum(math.prod(tensors.shape(name)) for name in fp8_tensors(tensors))


def _umt5_name(original: str) -> str:
    block = _BLOCK.fullmatch(original)
    if block and block[2] in BLOCK:
        return f"encoder.block.{block[1]}.{BLOCK[block[2]]}"
    return TOP.get(original, original)


def umt5_config(tensors: Mapping[str, np.ndarray], where: str) -> dict[str, Any]:
    """`UMT5Config` arguments of transformers-named encoder tensors, from their shapes."""
    first = "encoder.block.0.layer."
    names = (
        f"{first}0.SelfAttention.q.weight", f"{first}0.SelfAttention.relative_attention_bias.weight",
        f"{first}1.DenseReluDense.wi_0.weight",
    )  # fmt: skip
    missing = [name for name in names if name not in tensors]
    if missing:
        raise CheckpointError(f"{where}: no tensors {missing}; not a UMT5 encoder (Wan's umt5-xxl)")
    shape = tensors.shape if isinstance(tensors, RenamedWeights) else lambda name: tensors[name].shape
    vocab_size, d_model = shape("shared.weight")
    inner, buckets_heads, d_ff = (shape(name) for name in names)
    buckets, heads = buckets_heads
    layers = len({int(m[1]) for name in tensors if (m := re.match(r"encoder\.block\.(\d+)\.", name))})
    return dict(
        vocab_size=vocab_size, d_model=d_model, d_kv=inner[0] // heads, d_ff=d_ff[0], num_layers=layers,
        num_heads=heads, relative_attention_num_buckets=buckets, relative_attention_max_distance=MAX_DISTANCE,
        feed_forward_proj="gated-gelu", layer_norm_epsilon=1e-6, dropout_rate=0.0, is_encoder_decoder=False,
        pad_token_id=0, eos_token_id=1,
    )  # fmt: skip
