"""A tiny diffusers AutoencoderKLWan (seeded random weights, saved by save_pretrained) and ours
loaded from the very tensors it wrote, for the VAE parity tests."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import torch
from safetensors.numpy import load_file

from wanjax.adapters.jax.vae.model import WanVAE
from wanjax.adapters.jax.vae.runtime import VaeRuntime
from wanjax.adapters.jax.vae.weights import load_vae
from wanjax.domain.specs import VaeSpec


def to_ours(x: torch.Tensor) -> jax.Array:
    return jnp.asarray(x.numpy().transpose(0, 2, 3, 4, 1))  # [B, C, F, H, W] -> [B, F, H, W, C]


def to_torch_layout(x: jax.Array) -> np.ndarray:
    return np.asarray(x).transpose(0, 4, 1, 2, 3)  # [B, F, H, W, C] -> [B, C, F, H, W]


class VaeModels:
    """diffusers' model (`ref`), its spec and on-disk tensors; `load` builds ours under any runtime."""

    def __init__(self, folder: Path, config: dict) -> None:
        from diffusers import AutoencoderKLWan

        torch.manual_seed(0)
        AutoencoderKLWan(**config).save_pretrained(folder)
        self.ref = AutoencoderKLWan.from_pretrained(folder).eval()
        self.spec = VaeSpec.from_diffusers_config(dict(self.ref.config))
        self.tensors = load_file(folder / "diffusion_pytorch_model.safetensors")

    def load(self, **runtime: object) -> WanVAE:
        """The VAE with `runtime`'s settings over an unrolled decode and encode (decode_chunk and
        encode_chunk None: diffusers' own schedule, the reference the chunked ones are compared with)."""
        return load_vae(self.spec, VaeRuntime(**{"decode_chunk": None, "encode_chunk": None, **runtime}), self.tensors)
