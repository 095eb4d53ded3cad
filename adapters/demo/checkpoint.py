"""The built-in demo model: a tiny Wan 2.1 T2V checkpoint with random weights, in diffusers format.

Written once into the local cache, atomically (a temporary folder renamed into place), so
a fresh machine with no network can run the whole pipeline: the real loader reads the
same files and layout as a downloaded checkpoint. The weights are random: the videos it
makes are noise-like.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from wanjax.adapters.processes import owner_ended, owner_tag
from wanjax.domain.specs import TransformerSpec, VaeSpec

DEMO_NAME = "demo-v1"  # bump when the demo's architecture or writer changes
DEMO_SEED = 0
DEMO_TEXT_DIM = 32
DEMO_TRANSFORMER = TransformerSpec(
    num_attention_heads=4,
    attention_head_dim=16,
    ffn_dim=128,
    num_layers=2,
    text_dim=DEMO_TEXT_DIM,
    freq_dim=64,
)
DEMO_VAE = VaeSpec(base_dim=16, dim_mult=(1, 2, 2, 2), num_res_blocks=1)
DEMO_SCHEDULER = {
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
MODEL_INDEX = {
    "_class_name": "WanPipeline",
    "scheduler": ["diffusers", "UniPCMultistepScheduler"],
    "text_encoder": ["transformers", "UMT5EncoderModel"],
    "tokenizer": ["transformers", "PreTrainedTokenizerFast"],
    "transformer": ["diffusers", "WanTransformer3DModel"],
    "vae": ["diffusers", "AutoencoderKLWan"],
}


def default_cache_dir() -> Path:
    """$WANJAX_CACHE, else $XDG_CACHE_HOME/wanjax, else ~/.cache/wanjax."""
    if os.environ.get("WANJAX_CACHE"):
        return Path(os.environ["WANJAX_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "wanjax"


def ensure_demo_checkpoint(cache_dir: Path | None = None) -> Path:
    """The demo checkpoint folder, written on first use (staging folders that killed writers
    left behind are removed first)."""
    target = (cache_dir or default_cache_dir()) / DEMO_NAME
    if (target / "model_index.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(target.parent)
    staging = Path(tempfile.mkdtemp(prefix=f".{DEMO_NAME}-{owner_tag()}-", dir=target.parent))
    try:
        write_demo_checkpoint(staging)
        try:
            os.rename(staging, target)
        except OSError:  # another process finished first; its copy is identical
            if not (target / "model_index.json").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def remove_stale_staging(folder: Path) -> list[Path]:
    """Removes the demo staging folders in `folder` whose writer (a process of this host) has
    ended; returns them."""
    pattern = re.compile(rf"^\.{re.escape(DEMO_NAME)}-(?P<host>.+)-(?P<pid>\d+)-[^-]+$")
    stale = []
    for path in folder.iterdir():
        match = pattern.match(path.name)
        if match and path.is_dir() and owner_ended(match["host"], int(match["pid"])):
            shutil.rmtree(path, ignore_errors=True)
            stale.append(path)
    return stale


def write_demo_checkpoint(folder: Path, seed: int = DEMO_SEED) -> None:
    """Writes every component of the demo model into `folder` (same seed, same bytes)."""
    from safetensors.numpy import save_file

    from wanjax.adapters.torch.demo_tokenizer import write_demo_tokenizer
    from wanjax.adapters.torch.demo_umt5 import write_demo_text_encoder

    folder = Path(folder)
    vocab_size = write_demo_tokenizer(folder / "tokenizer")
    write_demo_text_encoder(folder / "text_encoder", vocab_size=vocab_size, seed=seed, d_model=DEMO_TEXT_DIM)
    for component, config, tensors in (
        ("transformer", _transformer_config(), _random_transformer_weights(seed)),
        ("vae", _vae_config(), _random_vae_weights(seed)),
    ):
        (folder / component).mkdir(parents=True)
        _write_json(folder / component / "config.json", config)
        save_file(tensors, str(folder / component / "diffusion_pytorch_model.safetensors"), metadata={"format": "pt"})
    (folder / "scheduler").mkdir()
    _write_json(folder / "scheduler" / "scheduler_config.json", DEMO_SCHEDULER)
    _write_json(folder / "model_index.json", MODEL_INDEX)


def _transformer_config() -> dict[str, Any]:
    config = attrs.asdict(DEMO_TRANSFORMER)
    config.update(_class_name="WanTransformer3DModel", image_dim=None, added_kv_proj_dim=None, pos_embed_seq_len=None)
    return config


def _vae_config() -> dict[str, Any]:
    config = attrs.asdict(DEMO_VAE)
    config.update(_class_name="AutoencoderKLWan", dropout=0.0)
    return config


def _random_transformer_weights(seed: int) -> dict[str, np.ndarray]:
    import jax.numpy as jnp
    from flax import nnx

    from wanjax.adapters.jax.transformer.model import WanTransformer
    from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
    from wanjax.adapters.jax.transformer.weights import export_transformer_weights

    runtime = TransformerRuntime(dtype=jnp.float32, param_dtype=jnp.float32)
    model = WanTransformer(DEMO_TRANSFORMER, runtime, rngs=nnx.Rngs(seed))
    return export_transformer_weights(model)


def _random_vae_weights(seed: int) -> dict[str, np.ndarray]:
    from flax import nnx

    from wanjax.adapters.jax.vae.model import WanVAE
    from wanjax.adapters.jax.vae.runtime import VaeRuntime
    from wanjax.adapters.jax.vae.weights import export_vae_weights

    model = WanVAE(DEMO_VAE, VaeRuntime(), rngs=nnx.Rngs(seed))
    return export_vae_weights(model)


def _write_json(path: Path, value: dict[str, Any]) -> None:
    path.write_text(json.dumps(_jsonable(value), indent=2, sort_keys=True) + "\n")


def _jsonable(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value
