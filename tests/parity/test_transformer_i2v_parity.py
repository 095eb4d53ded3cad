"""The Wan 2.1 I2V / FLF2V transformer (CLIP image tokens in the cross-attention) against
diffusers' WanTransformer3DModel, on tiny random models written by `save_pretrained`.

diffusers' attention processor splits the image tokens off the front of the encoder
sequence assuming exactly 512 text tokens, so the reference always gets 512 text
tokens (a tiny text_dim keeps that cheap); ours takes the image tokens as a separate
`image_context` argument. For FLF2V diffusers takes the first and last frames' tokens
as two batch rows [2B, M, d] and views them as [B, 2M, d]; ours takes [B, 2M, d].

Tolerance as in test_transformer_parity.py: max|ours - ref| <= 1e-5 * max|ref|, fp32.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import attrs
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from diffusers import WanTransformer3DModel
from flax import nnx

from transformer_models import SavedReference, assert_close, runtime

from wanjax.adapters.jax.transformer.model import WanTransformer
from wanjax.adapters.jax.transformer.weights import export_transformer_weights, load_transformer
from wanjax.domain.errors import CheckpointError
from wanjax.domain.specs import TransformerSpec

RELATIVE_TOLERANCE = 1e-5
TEXT_TOKENS = 512  # diffusers' hard-coded text length in WanAttnProcessor
IMAGE_TOKENS = 5  # per frame (257 for the real CLIP ViT-H/14)
BASE = dict(
    num_attention_heads=2, attention_head_dim=8, in_channels=12, out_channels=4, text_dim=4,
    freq_dim=16, ffn_dim=32, num_layers=2, image_dim=12, added_kv_proj_dim=16,
)  # fmt: skip

# name -> (diffusers config, latent (F, H, W))
CONFIGS = {
    "i2v": (BASE, (2, 4, 6)),
    "i2v-no-cross-norm-f3": ({**BASE, "cross_attn_norm": False, "freq_dim": 256}, (3, 4, 4)),
    "flf2v": ({**BASE, "pos_embed_seq_len": 2 * IMAGE_TOKENS}, (3, 4, 4)),
}


@dataclasses.dataclass(frozen=True)
class Case:
    folder: Path
    spec: TransformerSpec
    tensors: dict[str, np.ndarray]
    latents: np.ndarray  # [B, F, H, W, C_in]
    timestep: np.ndarray  # [B]
    context: np.ndarray  # [B, 512, text_dim]
    image_context: np.ndarray  # [B, M, image_dim]
    reference: np.ndarray  # [B, F, H, W, C_out]


@pytest.fixture(scope="module", params=list(CONFIGS))
def case(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Case:
    config, (frames, height, width) = CONFIGS[request.param]
    folder = tmp_path_factory.mktemp(request.param)
    saved = SavedReference(config, folder)
    spec = saved.spec

    rng = np.random.default_rng(0)
    batch, per_sample = 2, 2 if spec.pos_embed_seq_len else 1
    latents = rng.standard_normal((batch, frames, height, width, spec.in_channels), dtype=np.float32)
    timestep = np.array([999.0, 500.5], np.float32)
    context = rng.standard_normal((batch, TEXT_TOKENS, spec.text_dim), dtype=np.float32)
    frame_tokens = rng.standard_normal((batch * per_sample, IMAGE_TOKENS, spec.image_dim), dtype=np.float32)
    return Case(
        folder=folder,
        spec=spec,
        tensors=saved.tensors,
        latents=latents,
        timestep=timestep,
        context=context,
        image_context=frame_tokens.reshape(batch, per_sample * IMAGE_TOKENS, spec.image_dim),
        reference=saved.forward(latents, timestep, context, encoder_hidden_states_image=frame_tokens),
    )


@pytest.mark.parametrize("scan_layers", [True, False], ids=["scan", "loop"])
def test_matches_diffusers(case: Case, scan_layers: bool) -> None:
    model = load_transformer(case.spec, runtime(scan_layers), case.tensors)
    forward = nnx.jit(lambda m, x, t, ctx, img: m(x, t, ctx, image_context=img))
    out = np.asarray(forward(model, case.latents, case.timestep, case.context, case.image_context))

    assert_close(out, case.reference, RELATIVE_TOLERANCE)


@pytest.mark.parametrize("scan_layers", [True, False], ids=["scan", "loop"])
def test_export_inverts_load(case: Case, scan_layers: bool) -> None:
    exported = export_transformer_weights(load_transformer(case.spec, runtime(scan_layers), case.tensors))

    assert set(exported) == set(case.tensors)
    for name, tensor in case.tensors.items():
        assert exported[name].dtype == tensor.dtype, name
        np.testing.assert_array_equal(exported[name], tensor, err_msg=name)


@pytest.mark.parametrize("case", ["flf2v"], indirect=True)
def test_bfloat16_keeps_diffusers_fp32_parameters(case: Case) -> None:
    """diffusers keeps `_keep_in_fp32_modules` in fp32 when loading in bf16 (the image
    embedder's norm1/norm2 among them); our bf16 model keeps exactly the same set."""
    reference = WanTransformer3DModel.from_pretrained(case.folder, torch_dtype=torch.bfloat16)
    expected = {name: str(t.dtype).removeprefix("torch.") for name, t in reference.state_dict().items()}
    exported = export_transformer_weights(load_transformer(case.spec, runtime(True, jnp.bfloat16), case.tensors))

    assert {name: str(t.dtype) for name, t in exported.items()} == expected


@pytest.mark.parametrize("case", ["flf2v"], indirect=True)
@pytest.mark.parametrize(
    "image_shape, message",
    [
        (None, r"needs image_context \[B=2, M=10, image_dim=12\].*got shape None"),
        ((2, IMAGE_TOKENS, 12), r"M=10.*got shape \(2, 5, 12\)"),  # one frame where FLF2V needs two
        ((2, 10, 8), r"image_dim=12.*got shape \(2, 10, 8\)"),
        ((1, 10, 12), r"B=2.*got shape \(1, 10, 12\)"),
    ],
)
def test_bad_image_context_is_rejected(case: Case, image_shape, message: str) -> None:
    model = load_transformer(case.spec, runtime(True), case.tensors)
    image_context = None if image_shape is None else np.zeros(image_shape, np.float32)
    with pytest.raises(ValueError, match=message):
        model(case.latents, case.timestep, case.context, image_context=image_context)


def test_text_only_transformer_rejects_image_context() -> None:
    spec = TransformerSpec(**{**BASE, "image_dim": None, "added_kv_proj_dim": None})
    model = WanTransformer(spec, runtime(True), rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="no image embedder"):
        model(
            np.zeros((1, 1, 2, 2, spec.in_channels), np.float32),
            np.zeros((1,), np.float32),
            np.zeros((1, 3, spec.text_dim), np.float32),
            image_context=np.zeros((1, IMAGE_TOKENS, 12), np.float32),
        )


@pytest.mark.parametrize("case", ["i2v"], indirect=True)
def test_image_weights_with_a_text_only_config_are_named(case: Case) -> None:
    spec = attrs.evolve(case.spec, image_dim=None, added_kv_proj_dim=None)
    with pytest.raises(CheckpointError, match=r"unexpected \d+ tensor\(s\): .*'blocks.0.attn2.add_k_proj.weight'"):
        load_transformer(spec, runtime(True), case.tensors)
