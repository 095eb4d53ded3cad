"""The Wan 2.2 Animate transformer against diffusers' WanAnimateTransformer3DModel, on a tiny
random model written by `save_pretrained`: pose latents, a face video through the motion and
face encoders, face adapters after every second block; scanned layers with the KV cache and
looped ones without, and the Animate weight names (export inverts load; a missing tensor is named).

The reference gets 512 text tokens (diffusers' processor splits the image tokens off assuming
exactly 512). Tolerance: max|ours - ref| <= 1e-5 * max|ref| in fp32, as the other transformers.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from transformer_models import SavedReference, assert_close, runtime

from wanjax.adapters.jax.transformer.weights import export_transformer_weights, load_transformer
from wanjax.domain.errors import CheckpointError
from wanjax.domain.specs import TransformerSpec

RELATIVE_TOLERANCE = 1e-5
FP8_RELATIVE_TOLERANCE = 5e-2
"""tests/integration/test_fp8_weights.py's bound for fp8 storage against fp32: e4m3 keeps 3 mantissa
bits (~6% per weight)."""
TEXT_TOKENS = 512
CONFIG = dict(
    num_attention_heads=2, attention_head_dim=8, in_channels=12, latent_channels=4, out_channels=4, text_dim=4,
    freq_dim=16,
    ffn_dim=32, num_layers=4, image_dim=12, added_kv_proj_dim=16,
    motion_encoder_channel_sizes={"4": 8, "8": 6, "16": 8}, motion_encoder_size=16, motion_style_dim=8,
    motion_dim=4, motion_encoder_dim=8, face_encoder_hidden_dim=6, face_encoder_num_heads=2,
    inject_face_latents_blocks=2,
)  # fmt: skip
SEGMENT_LATENT_FRAMES = 2  # after the reference frame; the face video has 4 * 2 - 3 frames


@dataclasses.dataclass(frozen=True)
class Case:
    saved: SavedReference
    spec: TransformerSpec
    latents: np.ndarray  # [B, 1 + F, H, W, C_in]
    timestep: np.ndarray  # [B]
    context: np.ndarray  # [B, 512, text_dim]
    image_context: np.ndarray  # [B, M, image_dim]
    pose: np.ndarray  # [B, F, H, W, C_out]
    faces: np.ndarray  # [B, T, S, S, 3]
    reference: np.ndarray  # [B, 1 + F, H, W, C_out]


@pytest.fixture(scope="module")
def case(tmp_path_factory: pytest.TempPathFactory) -> Case:
    saved = SavedReference(CONFIG, tmp_path_factory.mktemp("animate"), "WanAnimateTransformer3DModel")
    spec = saved.spec
    rng = np.random.default_rng(0)
    f, h, w, size = SEGMENT_LATENT_FRAMES, 4, 6, spec.animate.motion_encoder_size
    latents = rng.standard_normal((2, 1 + f, h, w, spec.in_channels), dtype=np.float32)
    timestep = np.array([999.0, 500.5], np.float32)
    context = rng.standard_normal((2, TEXT_TOKENS, spec.text_dim), dtype=np.float32)
    image_context = rng.standard_normal((2, 5, spec.image_dim), dtype=np.float32)
    pose = rng.standard_normal((2, f, h, w, spec.out_channels), dtype=np.float32)
    faces = rng.uniform(-1, 1, (2, 4 * f - 3, size, size, 3)).astype(np.float32)
    reference = saved.forward(
        latents, timestep, context, encoder_hidden_states_image=image_context,
        pose_hidden_states=pose.transpose(0, 4, 1, 2, 3).copy(),
        face_pixel_values=faces.transpose(0, 4, 1, 2, 3).copy(),
    )  # fmt: skip
    return Case(saved, spec, latents, timestep, context, image_context, pose, faces, reference)


def test_spec_reads_the_animate_config(case: Case) -> None:
    animate = case.spec.animate
    assert animate is not None and case.spec.face_adapter_count == 2
    assert animate.motion_encoder_channel_sizes == ((4, 8), (8, 6), (16, 8))
    assert (animate.face_encoder_hidden_dim, animate.inject_face_latents_blocks) == (6, 2)


@pytest.mark.parametrize("scan_layers", [True, False], ids=["scan-kv-cache", "loop"])
def test_matches_diffusers(case: Case, scan_layers: bool) -> None:
    """Scanned layers reading the KV cache, looped layers computing their K/V from the context."""
    model = load_transformer(case.spec, runtime(scan_layers), case.saved.tensors)
    assert_close(_forward(model, case, kv_cache=scan_layers), case.reference, RELATIVE_TOLERANCE)


def test_fp8_storage_stays_near_float32(case: Case) -> None:
    """Loaded with fp8 kernels (the blocks' and the face adapters'; the motion and face encoders
    keep the compute dtype) and bf16 compute, against diffusers' fp32 output within
    FP8_RELATIVE_TOLERANCE."""
    model = load_transformer(case.spec, runtime(True, jnp.bfloat16), case.saved.tensors, kernel_dtype=jnp.float8_e4m3fn)
    dtypes = {tuple(path): p.get_value().dtype for path, p in nnx.iter_graph(model) if isinstance(p, nnx.Param)}
    assert dtypes[("animate", "face_adapter", "to_q", "kernel")] == jnp.float8_e4m3fn
    assert dtypes[("animate", "motion_encoder", "conv_in", "kernel")] == jnp.bfloat16
    assert_close(_forward(model, case, kv_cache=True), case.reference, FP8_RELATIVE_TOLERANCE)


def _forward(model, case: Case, *, kv_cache: bool) -> np.ndarray:
    """The model on the case's inputs: from the KV cache, or computing its K/V from the context."""

    @nnx.jit
    def forward(model, latents, timestep, context, image_context, pose, faces):
        animate = {"animate": {"pose": pose, "face": faces}}
        if kv_cache:
            cache = model.cross_attention_kv(context, image_context)
            return model(latents, timestep, cache=cache, extensions=animate)
        return model(latents, timestep, context, image_context=image_context, extensions=animate)

    inputs = (case.latents, case.timestep, case.context, case.image_context, case.pose, case.faces)
    return np.asarray(forward(model, *inputs))


def test_export_inverts_load(case: Case) -> None:
    exported = export_transformer_weights(load_transformer(case.spec, runtime(False), case.saved.tensors))

    assert set(exported) == set(case.saved.tensors)
    for name, tensor in case.saved.tensors.items():
        np.testing.assert_array_equal(exported[name], tensor, err_msg=name)


def test_missing_animate_tensor_is_named(case: Case) -> None:
    tensors = dict(case.saved.tensors)
    del tensors["motion_encoder.res_blocks.1.conv2.act_fn.bias"]
    with pytest.raises(CheckpointError, match=r"'motion_encoder\.res_blocks\.1\.conv2\.act_fn\.bias'"):
        load_transformer(case.spec, runtime(True), tensors)


def test_animate_inputs_must_fit(case: Case) -> None:
    model = load_transformer(case.spec, runtime(True), case.saved.tensors)
    with pytest.raises(ValueError, match="needs its animate inputs"):
        model(case.latents, case.timestep, case.context, image_context=case.image_context)
    with pytest.raises(ValueError, match=r"pose latents \[B=2, F=2, H=4, W=6, C=4\]"):
        model.prepare_extensions({"animate": {"pose": case.pose[:, :1], "face": case.faces}}, case.latents.shape)
    with pytest.raises(ValueError, match="give 4 \\* 2 - 3 face frames"):
        model.prepare_extensions({"animate": {"pose": case.pose, "face": case.faces[:, :1]}}, case.latents.shape)
