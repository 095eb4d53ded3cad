"""Wan Animate's own modules against the official code (PyPI `wan22`: wan/modules/animate/), on
small random weights: the motion encoder (`Generator`, at 16x16 faces with the official fixed
widths), the face encoder (`FaceEncoder`, its fixed 1024-wide streams) and a face adapter block
(`FaceBlock`, whose fused K/V projection is split into diffusers' to_k and to_v). Their weights go
into our model under their official names, read as the official-format checkpoint reads them
(adapters/checkpoints/original_animate.py). The whole official pipeline is run by
test_official_animate_pipeline_parity.py.
Tolerance: max|ours - official| <= 1e-5 * max|official| in fp32.
"""

from __future__ import annotations

import importlib

import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx

from official_wan import official_animate
from transformer_models import assert_close

from wanjax.adapters.checkpoints.original_names import diffusers_named
from wanjax.adapters.jax.transformer.model import WanTransformer
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.adapters.jax.transformer.weights import export_transformer_weights, load_transformer
from wanjax.domain.specs import AnimateSpec, TransformerSpec

RELATIVE_TOLERANCE = 1e-5
FACE, STYLE, MOTION, HEADS = 16, 8, 4, 2
SPEC = TransformerSpec(
    num_attention_heads=HEADS, attention_head_dim=8, in_channels=36, text_dim=8, freq_dim=16, ffn_dim=16, num_layers=1,
    image_dim=8, added_kv_proj_dim=16, animate=AnimateSpec(
        motion_encoder_channel_sizes={"4": 512, "8": 512, "16": 512}, motion_encoder_size=FACE,
        motion_style_dim=STYLE, motion_dim=MOTION, motion_encoder_dim=512, face_encoder_hidden_dim=1024,
        face_encoder_num_heads=4, inject_face_latents_blocks=1,
    ),
)  # fmt: skip


@pytest.fixture(scope="module")
def official():
    official_animate()
    motion_module = importlib.import_module("wan.modules.animate.motion_encoder")
    face_module = importlib.import_module("wan.modules.animate.face_blocks")
    torch.manual_seed(0)
    generator = motion_module.Generator(size=FACE, style_dim=STYLE, motion_dim=MOTION).eval()
    face_encoder = face_module.FaceEncoder(in_dim=512, hidden_dim=SPEC.inner_dim, num_heads=4).eval()
    face_block = face_module.FaceBlock(hidden_size=SPEC.inner_dim, heads_num=HEADS).eval()
    with torch.no_grad():  # away from the initial ones and zeros, so a misplaced tensor shows
        for module in (generator, face_encoder, face_block):
            for param in module.parameters():
                param.add_(0.1 * torch.randn_like(param))
    return generator, face_encoder, face_block


@pytest.fixture(scope="module")
def ours(official):
    generator, face_encoder, face_block = official
    runtime = TransformerRuntime(dtype=jnp.float32, param_dtype=jnp.float32, scan_layers=False)
    tensors = export_transformer_weights(WanTransformer(SPEC, runtime, rngs=nnx.Rngs(0)))
    official_names = {
        f"{prefix}.{name}": tensor.numpy()
        for prefix, module in (
            ("motion_encoder", generator), ("face_encoder", face_encoder), ("face_adapter.fuser_blocks.0", face_block),
        )
        for name, tensor in module.state_dict().items()
    }  # fmt: skip
    renamed = diffusers_named(official_names)
    assert set(renamed) <= set(tensors)  # every official tensor (the blurs' kernels aside) has a place
    tensors.update({name: renamed[name] for name in renamed})
    return load_transformer(SPEC, runtime, tensors)


def test_motion_and_face_encoders_match_the_official_code(official, ours):
    generator, face_encoder, _ = official
    faces = np.random.default_rng(0).uniform(-1, 1, (5, FACE, FACE, 3)).astype(np.float32)
    with torch.no_grad():
        motion = generator.enc.enc_motion(torch.from_numpy(faces.transpose(0, 3, 1, 2).copy()))
        motion = generator.dec.direction(motion)  # [5, 512]
        tokens = face_encoder(motion[None]).numpy()  # [1, 2, 5, D]
    ours_motion = np.asarray(ours.animate.motion_encoder(faces))
    assert_close(ours_motion, motion.numpy(), RELATIVE_TOLERANCE)
    assert_close(np.asarray(ours.animate.face_encoder(ours_motion[None])), tokens, RELATIVE_TOLERANCE)


def test_a_face_adapter_block_matches_the_official_code(official, ours):
    _, _, face_block = official
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 2 * 6, SPEC.inner_dim)).astype(np.float32)  # 2 frames of 6 tokens
    face = rng.standard_normal((1, 2, 5, SPEC.inner_dim)).astype(np.float32)
    with torch.no_grad():
        expected = face_block(torch.from_numpy(x), torch.from_numpy(face)).numpy()
    assert_close(np.asarray(ours.animate.face_adapter[0](x, face)), expected, RELATIVE_TOLERANCE)
