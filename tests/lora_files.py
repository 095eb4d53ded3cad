"""Random LoRA files in each key style Wan users have, for a model whose tensor shapes are given.

Each style covers what diffusers' own converter reads for it (so the same file can be
loaded by diffusers as the reference): alphas only on block modules, `.diff_b` bias
deltas in the LightX2V style, every block linear in the kohya (musubi) style.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

from wanjax.adapters.checkpoints.wan_names import BLOCK_MODULES, diffusers_module

RANK = 4
STYLES = ("diffusers", "original", "original-lora_AB", "lightx2v", "kohya")
T2V_BLOCK_LINEARS = [m for m in BLOCK_MODULES if "norm" not in m and "img" not in m]
TOP_LINEARS = ["head.head", "time_projection.1", "text_embedding.0", "time_embedding.2"]


def write_lora(
    path: Path, style: str, shapes: Mapping[str, tuple[int, ...]], rng: np.random.Generator, magnitude: float = 0.1
) -> Path:
    """A random LoRA over every block linear (and, except kohya, a few top-level linears)."""
    num_layers = 1 + max(int(name.split(".")[1]) for name in shapes if name.startswith("blocks."))
    blocks = [f"blocks.{i}.{m}" for i in range(num_layers) for m in T2V_BLOCK_LINEARS]
    tops = [] if style == "kohya" else TOP_LINEARS
    tensors: dict[str, np.ndarray] = {}
    for module in blocks + tops:
        target = diffusers_module(module)
        out, inp = shapes[f"{target}.weight"]
        down = (magnitude * rng.standard_normal((RANK, inp))).astype(np.float32)
        up = (magnitude * rng.standard_normal((out, RANK))).astype(np.float32)
        alpha = np.array(2.0 * RANK if module in blocks else RANK, np.float32)
        if style == "diffusers":
            tensors |= {f"transformer.{target}.lora_A.weight": down, f"transformer.{target}.lora_B.weight": up}
        elif style == "kohya":
            key = f"lora_unet_{module.replace('.', '_')}"
            tensors |= {f"{key}.lora_down.weight": down, f"{key}.lora_up.weight": up, f"{key}.alpha": alpha}
        else:
            key = f"diffusion_model.{module}"
            names = ("lora_A", "lora_B") if style == "original-lora_AB" else ("lora_down", "lora_up")
            tensors |= {f"{key}.{names[0]}.weight": down, f"{key}.{names[1]}.weight": up}
            if style == "lightx2v":  # LightX2V's extractor: no alphas, bias deltas beside the pairs
                tensors[f"{key}.diff_b"] = (magnitude * rng.standard_normal(out)).astype(np.float32)
            elif module in blocks:
                tensors[f"{key}.alpha"] = alpha
    save_file(tensors, path)
    return path


def load_in_diffusers(pipe, component: str, loras: list[tuple[Path, float]]) -> None:
    """The reference: `loras` (path, scale) loaded by diffusers' own `pipe.load_lora_weights`
    (`load_into_transformer_2=True` for `transformer_2`) with `set_adapters` scales (peft runs them)."""
    model = getattr(pipe, component)
    names = [f"{component}_{i}" for i in range(len(loras))]
    for name, (path, _) in zip(names, loras):
        pipe.load_lora_weights(str(path), adapter_name=name, load_into_transformer_2=component == "transformer_2")
    model.set_adapters(names, [scale for _, scale in loras])