"""GGUF transformer files (original Wan names, as the Wan GGUF releases write them): float types load
bit for bit as the safetensors of the same weights; quantized block kernels stay packed on the device
and compute what their dequantized weights compute, scanned or listed; a whole generation stays within the
quantization's error of the unquantized model, and streamed (offload=layers) or moved (offload=components)
packed kernels compute what resident ones do."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from flax import nnx
from safetensors.numpy import load_file, save_file

from quantized_files import dequantized, generate, relative_rms, stored, write_gguf, write_stored
from official_folders import original_name
from tiny_wan import TINY_TRANSFORMER, write_tiny_wan_checkpoint
from transformer_models import assert_close
from wanjax.adapters.checkpoints.diffusers_folder import DiffusersCheckpoint
from wanjax.adapters.checkpoints.original_names import transformer_weights
from wanjax.adapters.jax.loading.placement import ShardedPlacement
from wanjax.adapters.jax.platform.packed_kernel import PackedKernel
from wanjax.adapters.jax.transformer.experts import ExpertLoading
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.adapters.jax.transformer.weights import export_transformer_weights, load_transformer
from wanjax.domain.errors import CheckpointError, ConfigError

WIDE = {**TINY_TRANSFORMER, "attention_head_dim": 128, "ffn_dim": 256}  # rows of 256: every block type packs


@pytest.fixture(scope="module")
def wide_checkpoint(tmp_path_factory) -> Path:
    """The tiny checkpoint with a transformer wide enough (256) for K-quant rows, random weights."""
    import torch
    from diffusers import WanTransformer3DModel

    folder = write_tiny_wan_checkpoint(tmp_path_factory.mktemp("wide-wan"))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(1)
        model = WanTransformer3DModel(**WIDE)
        with torch.no_grad():
            for param in model.parameters():
                param.add_(0.05 * torch.randn_like(param))
    model.save_pretrained(folder / "transformer")
    return folder


def tensors_of(folder: Path) -> dict[str, np.ndarray]:
    return load_file(folder / "transformer" / "diffusion_pytorch_model.safetensors")


def load(folder: Path, tensors, *, scan_layers: bool = True):
    runtime = TransformerRuntime(dtype=np.float32, param_dtype=np.float32, scan_layers=scan_layers)
    return load_transformer(DiffusersCheckpoint(folder).transformer_spec, runtime, tensors)


def packed_kernels(model) -> dict[tuple, PackedKernel]:
    return {
        path: node.get_value()
        for path, node in nnx.iter_graph(model)
        if isinstance(node, nnx.Param) and isinstance(node.get_value(), PackedKernel)
    }


@pytest.mark.parametrize("block_type", ["F16", "BF16"])
def test_float_gguf_loads_bit_identical_to_the_safetensors_of_the_same_weights(wide_checkpoint, tmp_path, block_type):
    tensors = tensors_of(wide_checkpoint)
    gguf_file = write_gguf(tensors, tmp_path / "wan.gguf", block_type)
    as_stored = {}
    for name, tensor in tensors.items():
        data, kind = stored(tensor, block_type)
        as_stored[f"model.diffusion_model.{original_name(name)}"] = (
            data.view(ml_dtypes.bfloat16) if kind.name == "BF16" else data
        ).reshape(tensor.shape)
    save_file(as_stored, tmp_path / "wan.safetensors")
    ours = load(wide_checkpoint, transformer_weights(gguf_file))
    assert not packed_kernels(ours)
    ours = export_transformer_weights(ours)
    reference = export_transformer_weights(load(wide_checkpoint, transformer_weights(tmp_path / "wan.safetensors")))
    assert ours.keys() == reference.keys()
    for name in reference:
        assert ours[name].tobytes() == reference[name].tobytes(), name


@nnx.jit  # one function for every case: the dequantized references of one layout share a compile
def _step(model, latents, timestep, context):
    return model(latents, timestep, context)


def _forward(model, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    spec = model.spec
    latents = rng.normal(size=(1, 2, 4, 6, spec.in_channels)).astype(np.float32)
    context = rng.normal(size=(1, 8, spec.text_dim)).astype(np.float32)
    return np.asarray(_step(model, latents, np.array([500.0], np.float32), context))


@pytest.mark.parametrize(
    "block_type, scan_layers", [("Q8_0", True), ("Q5_K", True), ("Q4_K", True), ("Q4_K", False)],
    ids=["Q8_0-scan", "Q5_K-scan", "Q4_K-scan", "Q4_K-list"],
)
def test_quantized_kernels_stay_packed_and_compute_their_dequantized_weights(
    wide_checkpoint, tmp_path, block_type, scan_layers
):
    tensors = tensors_of(wide_checkpoint)
    gguf_file = write_gguf(tensors, tmp_path / "wan.gguf", block_type)
    ours = load(wide_checkpoint, transformer_weights(gguf_file), scan_layers=scan_layers)
    packed = packed_kernels(ours)
    layers = 1 if scan_layers else WIDE["num_layers"]
    assert len(packed) == layers * 10  # per block: q, k, v, out of both attentions, the FFN's two
    assert {kernel.block_type for kernel in packed.values()} == {block_type}
    reference = load(wide_checkpoint, dequantized(tensors, block_type), scan_layers=scan_layers)
    assert not packed_kernels(reference)
    weights, want = export_transformer_weights(ours), export_transformer_weights(reference)  # ours dequantized
    for name in want:
        assert weights[name].tobytes() == want[name].tobytes(), name
    # The same values, multiplied in another order: the dequantized kernel is a computed [out, in]
    # operand inside the step, the reference's a stored [in, out] one (rounding of fp32 sums apart).
    assert_close(_forward(ours), _forward(reference), 1e-5)


def test_a_block_type_wanjax_does_not_read_is_refused_naming_it_and_the_types_it_reads(tmp_path):
    import gguf

    blocks = np.zeros((4, 64 // 32 * 18), np.uint8)  # IQ4_NL: 18 bytes per 32 values, as Q4_0
    tensors = {"blocks.0.ffn.0.weight": (blocks, gguf.GGMLQuantizationType.IQ4_NL)}
    path = write_stored(tensors, tmp_path / "iq4.gguf")
    with pytest.raises(CheckpointError, match=r"IQ4_NL are not supported \(e.g. 'blocks.0.ffn.0.weight'\).*Q4_K"):
        transformer_weights(path)


def test_a_quantized_transformer_on_a_mesh_is_refused_naming_the_fix(wide_checkpoint, tmp_path):
    gguf_file = write_gguf(tensors_of(wide_checkpoint), tmp_path / "wan.gguf", "Q8_0")
    runtime = TransformerRuntime(dtype=np.float32, param_dtype=np.float32)
    sharded = ExpertLoading(runtime=runtime, placement=ShardedPlacement({}))
    with pytest.raises(ConfigError, match="run on one device: set the mesh sizes to 1"):
        sharded.load(DiffusersCheckpoint(wide_checkpoint).transformer_spec, transformer_weights(gguf_file))


def test_scanned_layers_in_different_block_types_are_refused_naming_the_fix(wide_checkpoint, tmp_path):
    tensors = tensors_of(wide_checkpoint)
    first_block = {name: "Q8_0" for name in tensors if name.startswith("blocks.0.")}
    mixed = transformer_weights(write_gguf(tensors, tmp_path / "mixed.gguf", "Q4_K", first_block))
    with pytest.raises(CheckpointError, match="scan_layers=false"):
        load(wide_checkpoint, mixed)
    listed = packed_kernels(load(wide_checkpoint, mixed, scan_layers=False))
    assert {kernel.block_type for kernel in listed.values()} == {"Q8_0", "Q4_K"}


# The bound: a generation's latents differ from the unquantized model's, relative (RMS), by at most three
# times the block kernels' own relative quantization error (every tensor the file quantizes adds some).
# Measured here: 1.6-2.0 times (Q8_0 0.5% -> 1.0%, Q5_K 3.8% -> 6.1%, Q4_K 7.7% -> 14%).
@pytest.fixture(scope="module")
def unquantized(wide_checkpoint) -> np.ndarray:
    return generate(wide_checkpoint)


@pytest.fixture(scope="module")
def gguf_generation(wide_checkpoint, tmp_path_factory):
    """`block_type` -> (the checkpoint's transformer as that GGUF file, a resident generation from
    it), each made once: the Q4_K one serves as both a bound case and the streaming reference."""
    made: dict[str, tuple[str, np.ndarray]] = {}

    def make(block_type: str) -> tuple[str, np.ndarray]:
        if block_type not in made:
            folder = tmp_path_factory.mktemp(f"gguf-{block_type}")
            gguf_file = str(write_gguf(tensors_of(wide_checkpoint), folder / "wan.gguf", block_type))
            made[block_type] = gguf_file, generate(wide_checkpoint, transformer_file=gguf_file)
        return made[block_type]

    return make


@pytest.mark.parametrize("block_type", ["Q8_0", "Q4_K", "Q5_K"])
def test_a_gguf_generation_stays_within_the_quantization_error(wide_checkpoint, unquantized, gguf_generation, block_type):
    tensors = tensors_of(wide_checkpoint)
    restored = dequantized(tensors, block_type)
    kernels = [n for n in tensors if n.startswith("blocks.") and n.endswith(".weight") and tensors[n].ndim == 2]
    weight_error = relative_rms(np.concatenate([restored[n].ravel() for n in kernels]),
                                 np.concatenate([tensors[n].ravel() for n in kernels]))  # fmt: skip
    _, quantized = gguf_generation(block_type)
    assert weight_error > 1e-3
    assert relative_rms(quantized, unquantized) <= 3 * weight_error


def test_packed_kernels_stream_and_move_as_resident_ones_compute(wide_checkpoint, gguf_generation):
    """offload=layers streams each block's packed kernels in, offload=components moves the packed
    expert: the same arithmetic on the same bytes as resident packed kernels, bit for bit."""
    gguf_file, resident = gguf_generation("Q4_K")
    for offload in ("layers", "components"):
        np.testing.assert_array_equal(generate(wide_checkpoint, transformer_file=gguf_file, offload=offload), resident)
