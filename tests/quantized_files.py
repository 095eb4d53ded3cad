"""Writing tiny quantized transformers as people download them, for the GGUF and scaled fp8 tests: GGUF
files as the Wan GGUF releases lay them out (original Wan names, 1-D tensors in F32, a 5-D convolution
flattened with its `comfy.gguf.orig_shape.*` field), and ComfyUI "scaled fp8" safetensors.

`gguf.quants.quantize` writes the legacy types (Q8_0, Q5_0, ...); the K-quants Q4_K and Q5_K, which it
only reads, are quantized here: per 32-value sub-block a scale and a minimum, each a 6-bit multiple of
the super-block's float16 `d` and `dmin`, the values rounded to 4 or 5 bits.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import ml_dtypes
import numpy as np
from safetensors.numpy import save_file

from official_folders import original_name
from wanjax.application.container import build_container
from wanjax.application.presets import resolve_config
from wanjax.domain.quantization import PACKED_BLOCKS


def _pack_scales(scale: np.ndarray, low: np.ndarray) -> np.ndarray:
    """The 12 scale bytes of Q4_K / Q5_K blocks from six-bit scales and minimums [n, 8]."""
    d = (scale[:, :4] & 0x3F) | ((scale[:, 4:] >> 4) << 6)
    m = (low[:, :4] & 0x3F) | ((low[:, 4:] >> 4) << 6)
    md = (scale[:, 4:] & 0x0F) | ((low[:, 4:] & 0x0F) << 4)
    return np.concatenate([d, m, md], axis=1).astype(np.uint8)


def quantize_k(weights: np.ndarray, block_type: str) -> np.ndarray:
    """Q4_K or Q5_K blocks of `weights` [..., n * 256]: uint8 [..., n * type_size]."""
    bits = {"Q4_K": 4, "Q5_K": 5}[block_type]
    top = (1 << bits) - 1
    x = weights.astype(np.float32).reshape(-1, 8, 32)
    low = np.minimum(x.min(axis=2), 0.0)
    step = (x.max(axis=2) - low) / top
    d = (step.max(axis=1) / 63).astype(np.float16)
    dmin = (-low.min(axis=1) / 63).astype(np.float16)
    safe = lambda v: np.where(v == 0, 1.0, v)  # noqa: E731
    scale = np.clip(np.rint(step / safe(d.astype(np.float32))[:, None]), 0, 63).astype(np.uint8)
    mins = np.clip(np.rint(-low / safe(dmin.astype(np.float32))[:, None]), 0, 63).astype(np.uint8)
    sub_d = d.astype(np.float32)[:, None] * scale
    sub_m = dmin.astype(np.float32)[:, None] * mins
    q = np.clip(np.rint((x + sub_m[..., None]) / safe(sub_d)[..., None]), 0, top).astype(np.uint8).reshape(-1, 256)
    nibbles = q & 0x0F
    chunks = nibbles.reshape(-1, 4, 2, 32)
    qs = (chunks[:, :, 0] | (chunks[:, :, 1] << 4)).reshape(-1, 128)
    parts = [d.view(np.uint8).reshape(-1, 2), dmin.view(np.uint8).reshape(-1, 2), _pack_scales(scale, mins)]
    if bits == 5:
        high = (q >> 4).reshape(-1, 8, 32)
        parts.append(np.bitwise_or.reduce(high << np.arange(8, dtype=np.uint8)[None, :, None], axis=1))
    blocks = np.concatenate([*parts, qs], axis=1)
    return blocks.reshape(*weights.shape[:-1], -1)


def quantize(weights: np.ndarray, block_type: str) -> np.ndarray:
    """`weights` [..., in] as `block_type` blocks, uint8 [..., in / block_size * type_size]."""
    if block_type in ("Q4_K", "Q5_K"):
        return quantize_k(weights, block_type)
    return gguf.quants.quantize(weights.astype(np.float32), gguf.GGMLQuantizationType[block_type])


def stored(tensor: np.ndarray, block_type: str) -> tuple[np.ndarray, gguf.GGMLQuantizationType]:
    """A tensor as a Wan GGUF release stores it: 1-D and rows no block divides in F32, the rest in
    `block_type` (F16, BF16 or a packed type)."""
    kind = gguf.GGMLQuantizationType[block_type]
    if tensor.ndim == 1 or (block_type in PACKED_BLOCKS and tensor.shape[-1] % PACKED_BLOCKS[block_type][0]):
        return tensor.astype(np.float32), gguf.GGMLQuantizationType.F32
    if block_type == "F16":
        return tensor.astype(np.float16), kind
    if block_type == "BF16":
        return gguf.quants.quantize(tensor.astype(np.float32), kind), kind
    return quantize(tensor, block_type), kind


def _flat(tensor: np.ndarray) -> np.ndarray:
    """GGUF holds at most four dimensions: a 5-D convolution as [out, rest] (its shape in a field)."""
    tensor = np.asarray(tensor, np.float32)
    return tensor.reshape(tensor.shape[0], -1) if tensor.ndim > 4 else tensor


def write_stored(tensors: dict[str, tuple[np.ndarray, gguf.GGMLQuantizationType]], path: Path,
                 shapes: dict[str, tuple[int, ...]] | None = None) -> Path:
    """A GGUF file of `tensors` as stored (data, type), with the torch `shapes` of those flattened."""
    writer = gguf.GGUFWriter(path, "wan")
    for name, shape in (shapes or {}).items():
        writer.add_array(f"comfy.gguf.orig_shape.{name}", list(shape))
    for name, (data, kind) in tensors.items():
        writer.add_tensor(name, data, raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def write_gguf(
    tensors: dict[str, np.ndarray], path: Path, block_type: str, types: dict[str, str] | None = None
) -> Path:
    """Diffusers-named torch-layout `tensors` written under their original Wan names to `path`, in
    `block_type` except those `types` gives another."""
    stored_tensors = {
        original_name(name): stored(_flat(tensor), (types or {}).get(name, block_type)) for name, tensor in tensors.items()
    }
    shapes = {original_name(name): tensor.shape for name, tensor in tensors.items() if tensor.ndim > 4}
    return write_stored(stored_tensors, path, shapes)


def dequantized(tensors: dict[str, np.ndarray], block_type: str) -> dict[str, np.ndarray]:
    """What a file `write_gguf` wrote holds, dequantized by the gguf package (float32)."""
    return {
        name: gguf.quants.dequantize(*stored(_flat(tensor), block_type)).reshape(tensor.shape)
        for name, tensor in tensors.items()
    }


E4M3_MAX = 448.0


def scaled_fp8(tensor: np.ndarray) -> tuple[np.ndarray, np.float32]:
    """A 2-D weight as a scaled fp8 file stores it: e4m3 values and the float32 scale (absmax / 448)."""
    scale = np.float32(np.abs(tensor).max() / E4M3_MAX)
    return (tensor.astype(np.float32) / scale).astype(ml_dtypes.float8_e4m3fn), scale


def write_scaled_fp8(tensors: dict[str, np.ndarray], path: Path) -> dict[str, np.ndarray]:
    """Diffusers-named `tensors` as a ComfyUI scaled fp8 file (original names under `model.diffusion_model.`,
    every 2-D weight in e4m3 with its `scale_weight`, the `scaled_fp8` marker); returns the weights the
    file holds, dequantized (float32), under the diffusers names."""
    stored_tensors, held = {"scaled_fp8": np.zeros(2, ml_dtypes.float8_e4m3fn)}, {}
    for name, tensor in tensors.items():
        original = "model.diffusion_model." + original_name(name)
        if tensor.ndim == 2 and name.endswith(".weight"):
            values, scale = scaled_fp8(tensor)
            stored_tensors[original] = values
            stored_tensors[original.removesuffix("weight") + "scale_weight"] = np.array(scale, np.float32)
            held[name] = values.astype(np.float32) * scale
        else:
            stored_tensors[original] = tensor
            held[name] = tensor.astype(np.float32)
    save_file(stored_tensors, path)
    return held


def generate(folder: Path, **overrides: str) -> np.ndarray:
    """The latents of a short tiny generation from the checkpoint at `folder` with `overrides` (--set)."""
    config = resolve_config(str(folder), {"max_sequence_length": "8", **overrides})
    request = config.request("a fox", height=32, width=48, num_frames=5, num_inference_steps=3)
    return build_container(config).service().generate(request, output_type="latent").array


def relative_rms(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.sqrt(np.mean((a - b) ** 2)) / np.sqrt(np.mean(b**2)))
