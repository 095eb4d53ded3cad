"""A tiny diffusers WanTransformer3DModel (or another class of its family, e.g. WanVACETransformer3DModel)
saved by save_pretrained, for the transformer parity tests.

Weights are perturbed before saving: norms start at exactly 1 / 0 (and position
embeddings at 0), so a swapped or dropped tensor would otherwise go unnoticed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jax.numpy as jnp
import numpy as np
import torch
from safetensors.numpy import load_file

from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.domain.specs import TransformerSpec


class SavedReference:
    """diffusers' model (`model`), the spec read from its config.json and its on-disk tensors."""

    def __init__(self, config: dict[str, Any], folder: Path, model_class: str = "WanTransformer3DModel") -> None:
        import diffusers

        torch.manual_seed(0)
        self.model = getattr(diffusers, model_class)(**config).eval()
        with torch.no_grad():
            for param in self.model.parameters():
                param.add_(0.1 * torch.randn_like(param))
        self.model.save_pretrained(folder)
        self.spec = TransformerSpec.from_diffusers_config(json.loads((folder / "config.json").read_text()))
        self.tensors = load_file(folder / "diffusion_pytorch_model.safetensors")

    def forward(self, latents: np.ndarray, timestep: np.ndarray, context: np.ndarray, **kwargs: Any) -> np.ndarray:
        """diffusers' output for latents [B, F, H, W, C] (ours), in our layout [B, F, H, W, C_out]."""
        with torch.no_grad():
            (out,) = self.model(
                torch.from_numpy(latents.transpose(0, 4, 1, 2, 3).copy()),  # diffusers: [B, C, F, H, W]
                torch.from_numpy(timestep),
                torch.from_numpy(context),
                return_dict=False,
                **{k: torch.from_numpy(v) for k, v in kwargs.items()},
            )
        return out.numpy().transpose(0, 2, 3, 4, 1)


def runtime(scan_layers: bool, dtype: Any = jnp.float32) -> TransformerRuntime:
    return TransformerRuntime(dtype=dtype, param_dtype=dtype, scan_layers=scan_layers)


def assert_close(out: np.ndarray, reference: np.ndarray, relative_tolerance: float) -> None:
    """max|out - ref| <= tolerance * max|ref|, fp32 output of the reference's shape."""
    assert out.shape == reference.shape and out.dtype == np.float32
    scale = np.abs(reference).max()
    error = np.abs(out - reference).max()
    assert error <= relative_tolerance * scale, f"max abs error {error:.3g} vs max |ref| {scale:.3g}"
