"""The random-checkpoint writer (the demo's, and the device check's end-to-end runs' at the published
architectures): what it writes is read back by the real loaders, names, shapes and dtypes as they
expect, and its sizes at umt5-xxl are the published encoder's."""

from __future__ import annotations

import math
from pathlib import Path

import attrs
import jax.numpy as jnp
import numpy as np
import pytest

from wanjax.adapters.checkpoints.layout import open_checkpoint_folder
from wanjax.adapters.checkpoints.original_t5 import umt5_config
from wanjax.adapters.demo.checkpoint import DEMO_ARCHITECTURE, DEMO_TEXT_DIM
from wanjax.adapters.demo.random_checkpoint import (
    demo_umt5_sizes,
    umt5_tensor_shapes,
    write_random_checkpoint,
    write_random_text_encoder,
)
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.adapters.jax.transformer.weights import abstract_transformer, load_transformer, transformer_weight_shapes
from wanjax.adapters.jax.vae.runtime import VaeRuntime
from wanjax.adapters.jax.vae.weights import load_vae
from wanjax.adapters.torch.demo_tokenizer import DEMO_VOCAB_SIZE
from wanjax.domain.architectures import ARCHITECTURES, UMT5_XXL_ENCODER, UMT5_XXL_ENCODER_PARAMETERS, WAN22_VAE
from wanjax.domain.conditioning import ImageConditioning
from wanjax.domain.errors import UnsupportedModelError

SIZES = demo_umt5_sizes(DEMO_VOCAB_SIZE, DEMO_TEXT_DIM)
TWO_EXPERTS = attrs.evolve(DEMO_ARCHITECTURE, num_experts=2, boundary_ratio=0.875)


@pytest.fixture(scope="module")
def two_experts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Wan 2.2 A14B-style checkpoint as the end-to-end stage writes it: bf16, the second
    expert a link to the first, the text encoder written apart and linked in."""
    root = tmp_path_factory.mktemp("random")
    write_random_text_encoder(root / "encoder", SIZES, seed=3, dtype="bfloat16")
    write_random_checkpoint(root / "model", TWO_EXPERTS, SIZES, dtype="bfloat16", text_encoder_folder=root / "encoder",
                            linked_experts=True)  # fmt: skip
    return root / "model"


def test_the_real_loaders_read_every_component_at_its_shapes(two_experts: Path) -> None:
    checkpoint = open_checkpoint_folder(two_experts)
    checkpoint.verify()  # every config and header, the text encoder's config against its weights
    assert checkpoint.experts == ("transformer", "transformer_2") and checkpoint.boundary_ratio == 0.875
    assert checkpoint.transformer_spec == TWO_EXPERTS.transformer and checkpoint.vae_spec == TWO_EXPERTS.vae
    assert (two_experts / "transformer_2").is_symlink() and (two_experts / "text_encoder").is_symlink()

    runtime = TransformerRuntime(dtype=jnp.float32, param_dtype=jnp.float32)
    weights = checkpoint.weights("transformer_2")
    expected = transformer_weight_shapes(abstract_transformer(TWO_EXPERTS.transformer, runtime))
    assert {name: tuple(weights[name].shape) for name in weights} == expected  # names and shapes, all of them
    assert {weights[name].dtype for name in weights} == {np.dtype(jnp.bfloat16)}
    load_transformer(TWO_EXPERTS.transformer, runtime, weights)  # raises on any name or shape it does not expect
    load_vae(TWO_EXPERTS.vae, VaeRuntime(), checkpoint.weights("vae"))

    encoder = checkpoint.weights("text_encoder")
    read = umt5_config(encoder, "test")  # the sizes, read from the shapes (the bucket distance is no shape)
    assert {key: read[key] for key in SIZES if key != "relative_attention_max_distance"} == {
        key: value for key, value in SIZES.items() if key != "relative_attention_max_distance"}
    assert set(encoder) == set(umt5_tensor_shapes(SIZES))


def test_values_are_scaled_by_fan_in_with_unit_norms_and_zero_biases(two_experts: Path) -> None:
    weights = open_checkpoint_folder(two_experts).weights("transformer")
    ffn = np.asarray(weights["blocks.0.ffn.net.0.proj.weight"], np.float32)  # [ffn_dim, dim]
    assert ffn.std() * math.sqrt(ffn.shape[1]) == pytest.approx(1.0, rel=0.1)
    assert np.all(np.asarray(weights["blocks.0.attn1.norm_q.weight"], np.float32) == 1.0)
    assert np.all(np.asarray(weights["blocks.0.ffn.net.0.proj.bias"], np.float32) == 0.0)


def test_a_first_frame_model_says_so_and_image_models_are_refused(tmp_path: Path) -> None:
    ti2v = attrs.evolve(
        DEMO_ARCHITECTURE, first_frame=True, vae=attrs.evolve(WAN22_VAE, base_dim=8, decoder_base_dim=16, num_res_blocks=1),
        transformer=attrs.evolve(DEMO_ARCHITECTURE.transformer, in_channels=48, out_channels=48),
    )  # fmt: skip
    write_random_checkpoint(tmp_path / "ti2v", ti2v, SIZES)
    assert open_checkpoint_folder(tmp_path / "ti2v").image_conditioning == ImageConditioning.FIRST_FRAME
    with pytest.raises(UnsupportedModelError, match="image encoder"):
        write_random_checkpoint(tmp_path / "i2v", ARCHITECTURES["Wan-AI/Wan2.1-I2V-14B-480P-Diffusers"], SIZES)


def test_umt5_xxl_sizes_make_the_published_encoder() -> None:
    assert sum(math.prod(shape) for shape in umt5_tensor_shapes(UMT5_XXL_ENCODER).values()) == UMT5_XXL_ENCODER_PARAMETERS
