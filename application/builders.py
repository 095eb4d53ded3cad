"""Builder functions the container points at. Each imports its backend inside, so building a
container (or a JAX-only run) never imports torch, and nothing heavy loads before it is asked for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from wanjax.adapters.checkpoints.diffusers_folder import DiffusersCheckpoint
from wanjax.domain.ports import Denoiser, ImageEncoder, TextEncoder, VideoAutoencoder

DEMO_MODEL = "demo"


def locate_model(model: str) -> Path:
    """`demo` is the built-in demo (written on first use); anything else is a folder or repo id."""
    if model == DEMO_MODEL:
        from wanjax.adapters.demo.checkpoint import ensure_demo_checkpoint

        return ensure_demo_checkpoint()
    from wanjax.adapters.checkpoints.locate import locate_checkpoint

    return locate_checkpoint(model)


def open_checkpoint(folder: Path) -> DiffusersCheckpoint:
    """Opens and verifies every config and weight-file header: bad files fail here, before loading."""
    checkpoint = DiffusersCheckpoint(folder)
    checkpoint.verify()
    return checkpoint


def resolve_dtype(name: str) -> str:
    """`auto` is bfloat16 on accelerators and float32 on CPU."""
    if name != "auto":
        return name
    import jax

    return "float32" if jax.default_backend() == "cpu" else "bfloat16"


def build_text_encoder(checkpoint: DiffusersCheckpoint, dtype: str) -> TextEncoder:
    from wanjax.adapters.torch.umt5 import Umt5TextEncoder

    return Umt5TextEncoder.from_folders(checkpoint.folder("text_encoder"), checkpoint.folder("tokenizer"), dtype=dtype)


def build_image_encoder(checkpoint: DiffusersCheckpoint, dtype: str) -> ImageEncoder | None:
    """The CLIP image encoder where the checkpoint has one (Wan 2.1 I2V), else None."""
    if not checkpoint.has("image_encoder"):
        return None
    from wanjax.adapters.torch.clip_image import ClipImageEncoder

    return ClipImageEncoder.from_folders(
        checkpoint.folder("image_encoder"), checkpoint.folder("image_processor"), dtype=dtype
    )


def xla_attention() -> Any:
    import jax

    from wanjax.adapters.jax.attention import XlaAttention, key_alignment_for

    return XlaAttention(key_alignment=key_alignment_for(jax.default_backend()))


def pallas_attention() -> Any:
    """Our Pallas flash attention: compiled on GPU (Triton) and TPU (Mosaic), interpreted (slowly) on CPU."""
    from wanjax.adapters.jax.pallas_attention import PallasAttention

    return PallasAttention()


def tokamax_attention() -> Any:
    """tokamax's kernels; a ConfigError naming the fix where tokamax is missing or has no kernels (CPU)."""
    import jax

    from wanjax.adapters.jax.attention import key_alignment_for
    from wanjax.adapters.jax.tokamax_attention import TokamaxAttention

    return TokamaxAttention(key_alignment=key_alignment_for(jax.default_backend()))


def build_denoiser(checkpoint: DiffusersCheckpoint, dtype: str, scan_layers: bool, attention: Any) -> Denoiser:
    from wanjax.adapters.jax.denoising import JaxDenoiser
    from wanjax.adapters.jax.dtypes import jax_dtype
    from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
    from wanjax.adapters.jax.transformer.weights import load_transformer

    runtime = TransformerRuntime(
        dtype=jax_dtype(dtype), param_dtype=jax_dtype(dtype), scan_layers=scan_layers, attention=attention
    )
    spec = checkpoint.transformer_spec
    return JaxDenoiser([load_transformer(spec, runtime, checkpoint.weights(expert)) for expert in checkpoint.experts])


def build_autoencoder(checkpoint: DiffusersCheckpoint, dtype: str) -> VideoAutoencoder:
    from wanjax.adapters.jax.autoencoder import JaxVideoAutoencoder
    from wanjax.adapters.jax.dtypes import jax_dtype
    from wanjax.adapters.jax.vae.runtime import VaeRuntime
    from wanjax.adapters.jax.vae.weights import load_vae

    runtime = VaeRuntime(dtype=jax_dtype(dtype), param_dtype=jax_dtype(dtype))
    return JaxVideoAutoencoder(load_vae(checkpoint.vae_spec, runtime, checkpoint.weights("vae")))
