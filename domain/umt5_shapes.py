"""The tensor shapes a transformers UMT5 encoder config implies, to check a text encoder's
config against its weights' headers before loading (a mismatch otherwise surfaced, seconds
later, as an unclear error from inside transformers)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def umt5_shapes(config: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    """Name -> shape of the embedding and of the first and last blocks' tensors, in the names
    transformers' UMT5EncoderModel saves."""
    d_model, inner, d_ff = config["d_model"], config["num_heads"] * config["d_kv"], config["d_ff"]
    shapes: dict[str, tuple[int, ...]] = {"shared.weight": (config["vocab_size"], d_model)}
    for block in sorted({0, config["num_layers"] - 1}):
        attention = f"encoder.block.{block}.layer.0.SelfAttention"
        feed_forward = f"encoder.block.{block}.layer.1.DenseReluDense"
        shapes |= {
            f"{attention}.q.weight": (inner, d_model),
            f"{attention}.o.weight": (d_model, inner),
            f"{attention}.relative_attention_bias.weight": (config["relative_attention_num_buckets"], config["num_heads"]),
            f"{feed_forward}.wi_0.weight": (d_ff, d_model),
            f"{feed_forward}.wo.weight": (d_model, d_ff),
        }
    return shapes


def umt5_mismatches(config: Mapping[str, Any], shapes: Mapping[str, tuple[int, ...]]) -> list[str]:
    """Where the tensors (`shapes`, from the weights' headers) disagree with `config`: one line
    per tensor that is missing or of another shape, plus any block past `num_layers`."""
    problems = []
    for name, expected in umt5_shapes(config).items():
        found = shapes.get(name)
        if found is None:
            problems.append(f"{name} is missing (expected {expected})")
        elif tuple(found) != expected:
            problems.append(f"{name} is {tuple(found)}, the config implies {expected}")
    extra = f"encoder.block.{config['num_layers']}.layer.0.SelfAttention.q.weight"
    if extra in shapes:
        problems.append(f"the weights have more blocks than num_layers={config['num_layers']} ({extra})")
    return problems
