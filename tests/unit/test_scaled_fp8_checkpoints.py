"""ComfyUI / kijai "scaled fp8" transformer files: the blocks' kernels stay fp8 on the device with their
per-tensor scales and read as exactly the dequantized weights; a generation stays within the fp8
quantization's error of the unquantized model."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from flax import nnx
from safetensors.numpy import load_file, save_file

from official_folders import original_name
from quantized_files import generate, relative_rms, write_scaled_fp8
from transformer_models import assert_close
from wanjax.adapters.checkpoints.diffusers_folder import DiffusersCheckpoint
from wanjax.adapters.checkpoints.original_names import transformer_weights
from wanjax.adapters.jax.platform.scaled_kernel import ScaledKernel
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.adapters.jax.transformer.weights import export_transformer_weights, load_transformer
from wanjax.domain.errors import UnsupportedModelError


def _tensors(folder):
    return load_file(folder / "transformer" / "diffusion_pytorch_model.safetensors")


def _load(folder, tensors, *, scan_layers=True):
    runtime = TransformerRuntime(dtype=np.float32, param_dtype=np.float32, scan_layers=scan_layers)
    return load_transformer(DiffusersCheckpoint(folder).transformer_spec, runtime, tensors)


def _forward(model):
    rng = np.random.default_rng(0)
    latents = rng.normal(size=(1, 2, 4, 6, model.spec.in_channels)).astype(np.float32)
    context = rng.normal(size=(1, 8, model.spec.text_dim)).astype(np.float32)
    return np.asarray(nnx.jit(lambda m, x, c: m(x, np.array([500.0], np.float32), c))(model, latents, context))


@pytest.mark.parametrize("scan_layers", [True, False], ids=["scan", "list"])
def test_scaled_fp8_kernels_stay_fp8_with_their_scales_and_equal_the_dequantized_weights(
    tiny_checkpoint, tmp_path, scan_layers
):
    held = write_scaled_fp8(_tensors(tiny_checkpoint), tmp_path / "wan_fp8_scaled.safetensors")
    ours = _load(tiny_checkpoint, transformer_weights(tmp_path / "wan_fp8_scaled.safetensors"), scan_layers=scan_layers)
    kernels = [node.get_value() for _, node in nnx.iter_graph(ours) if isinstance(node, nnx.Param)]
    kernels = [k for k in kernels if isinstance(k, ScaledKernel)]
    assert len(kernels) == 10 * (1 if scan_layers else 2)  # per block: both attentions' four, the FFN's two
    assert all(k.values.dtype == ml_dtypes.float8_e4m3fn for k in kernels)
    reference = _load(tiny_checkpoint, held, scan_layers=scan_layers)
    weights, want = export_transformer_weights(ours), export_transformer_weights(reference)
    for name in want:
        assert weights[name].tobytes() == want[name].tobytes(), name
    assert_close(_forward(ours), _forward(reference), 1e-5)


def test_a_scaled_fp8_generation_stays_within_the_quantization_error(tiny_checkpoint, tmp_path):
    tensors = _tensors(tiny_checkpoint)
    held = write_scaled_fp8(tensors, tmp_path / "wan_fp8_scaled.safetensors")
    kernels = [n for n in tensors if n.startswith("blocks.") and tensors[n].ndim == 2]
    weight_error = relative_rms(np.concatenate([held[n].ravel() for n in kernels]),
                                np.concatenate([tensors[n].ravel() for n in kernels]))  # fmt: skip
    quantized = generate(tiny_checkpoint, transformer_file=str(tmp_path / "wan_fp8_scaled.safetensors"))
    assert 1e-3 < weight_error and relative_rms(quantized, generate(tiny_checkpoint)) <= 3 * weight_error


def test_a_scale_of_several_values_is_refused_naming_the_tensor(tiny_checkpoint, tmp_path):
    tensors = {"model.diffusion_model." + original_name(n): t for n, t in _tensors(tiny_checkpoint).items()}
    name = "model.diffusion_model.blocks.0.self_attn.q.weight"
    tensors[name] = tensors[name].astype(ml_dtypes.float8_e4m3fn)
    tensors[name.removesuffix("weight") + "scale_weight"] = np.ones(3, np.float32)
    save_file(tensors, tmp_path / "odd.safetensors")
    with pytest.raises(UnsupportedModelError, match="blocks.0.self_attn.q.weight"):
        transformer_weights(tmp_path / "odd.safetensors")
