"""LoRA-merged transformers against diffusers (the reference), one random LoRA file per key style.

The reference is diffusers' `pipe.load_lora_weights(...)` (`load_into_transformer_2=True`
for Wan 2.2's low-noise expert) with `set_adapters` scales, run by peft.

Tolerance as the plain transformer parity: max|ours - ref| <= 1e-5 * max|ref|, fp32 both
sides. Every LoRA moves the output by far more than that (checked, so no test is vacuous).
"""

from __future__ import annotations

from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
import torch
from diffusers import WanPipeline
from flax import nnx
from lora_files import STYLES, load_in_diffusers, write_lora

from wanjax.adapters.checkpoints.diffusers_folder import DiffusersCheckpoint
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.adapters.jax.transformer.weights import load_transformer
from wanjax.adapters.lora import with_loras
from wanjax.domain.lora import LoraSpec

RELATIVE_TOLERANCE = 1e-5

LATENTS = np.random.default_rng(7).standard_normal((1, 2, 4, 6, 16), dtype=np.float32)  # [B, F, H, W, C]
TIMESTEP = np.array([700.0], np.float32)
CONTEXT = np.random.default_rng(8).standard_normal((1, 7, 32), dtype=np.float32)  # [B, L, text_dim]


def _shapes(folder: Path, component: str) -> dict[str, tuple[int, ...]]:
    weights = DiffusersCheckpoint(folder).weights(component)
    return {name: weights[name].shape for name in weights}


def _ours(folder: Path, component: str, loras: list[tuple[Path, float]]) -> np.ndarray:
    checkpoint = DiffusersCheckpoint(folder)
    runtime = TransformerRuntime(dtype=jnp.float32, param_dtype=jnp.float32, scan_layers=True)
    tensors = with_loras(checkpoint.weights(component), [LoraSpec(str(p), s) for p, s in loras])
    model = load_transformer(checkpoint.transformer_spec, runtime, tensors)
    return np.asarray(nnx.jit(lambda m, x, t, c: m(x, t, c))(model, LATENTS, TIMESTEP, CONTEXT))


def _reference(folder: Path, component: str, loras: list[tuple[Path, float]]) -> np.ndarray:
    pipe = WanPipeline.from_pretrained(folder)
    load_in_diffusers(pipe, component, loras)
    model = getattr(pipe, component).eval()
    with torch.no_grad():
        (out,) = model(
            torch.from_numpy(LATENTS.transpose(0, 4, 1, 2, 3).copy()),  # diffusers: [B, C, F, H, W]
            torch.from_numpy(TIMESTEP),
            torch.from_numpy(CONTEXT),
            return_dict=False,
        )
    return out.numpy().transpose(0, 2, 3, 4, 1)


def _assert_parity(folder: Path, component: str, loras: list[tuple[Path, float]]) -> None:
    ours, reference = _ours(folder, component, loras), _reference(folder, component, loras)
    scale = np.abs(reference).max()
    error = np.abs(ours - reference).max()
    moved = np.abs(reference - _reference(folder, component, [])).max()
    assert moved > 1e3 * RELATIVE_TOLERANCE * scale, f"the LoRA barely changes the output ({moved:.3g})"
    assert error <= RELATIVE_TOLERANCE * scale, f"max abs error {error:.3g} vs max |ref| {scale:.3g}"


@pytest.mark.parametrize("style", STYLES)
def test_each_key_style_matches_diffusers(tiny_checkpoint, tmp_path, style):
    shapes = _shapes(tiny_checkpoint, "transformer")
    path = write_lora(tmp_path / f"{style}.safetensors", style, shapes, np.random.default_rng(1))
    _assert_parity(tiny_checkpoint, "transformer", [(path, 0.8)])


def test_several_loras_with_their_scales_match_diffusers(tiny_checkpoint, tmp_path):
    shapes = _shapes(tiny_checkpoint, "transformer")
    a = write_lora(tmp_path / "a.safetensors", "original", shapes, np.random.default_rng(2))
    b = write_lora(tmp_path / "b.safetensors", "diffusers", shapes, np.random.default_rng(3))
    _assert_parity(tiny_checkpoint, "transformer", [(a, 0.7), (b, -0.4)])


def test_wan22_loras_per_expert_match_diffusers(tiny_a14b_checkpoint, tmp_path):
    shapes = _shapes(tiny_a14b_checkpoint, "transformer")
    high = write_lora(tmp_path / "high.safetensors", "original", shapes, np.random.default_rng(4))
    low = write_lora(tmp_path / "low.safetensors", "lightx2v", shapes, np.random.default_rng(5))
    _assert_parity(tiny_a14b_checkpoint, "transformer", [(high, 1.0)])
    _assert_parity(tiny_a14b_checkpoint, "transformer_2", [(low, 0.6)])
