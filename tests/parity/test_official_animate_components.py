"""Wan Animate's own modules against the official code (PyPI `wan22`: wan/modules/animate/), on
small random weights: the motion encoder (`Generator`, at 16x16 faces with the official fixed
widths), the face encoder (`FaceEncoder`, its fixed 1024-wide streams) and a face adapter block
(`FaceBlock`, whose fused K/V projection is split into diffusers' to_k and to_v). Their weights go
into our model under diffusers' names, as diffusers' converter maps the official checkpoint.

The whole official pipeline (`wan/animate.py`) is not run: docs/sampling.md says what blocks it.
Tolerance: max|ours - official| <= 1e-5 * max|official| in fp32.
"""

from __future__ import annotations

import importlib
import re

import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx

from official_wan import official_wan
from transformer_models import assert_close

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


def _diffusers_name(name: str, blocks: int) -> str | None:
    """An official Animate module tensor's diffusers name (None: a blur kernel, a constant)."""
    rules = [
        (r"motion_encoder\.enc\.net_app\.convs\.0\.0\.weight", "motion_encoder.conv_in.weight"),
        (r"motion_encoder\.enc\.net_app\.convs\.0\.1\.bias", "motion_encoder.conv_in.act_fn.bias"),
        (r"motion_encoder\.enc\.net_app\.convs\.(\d+)\.conv1\.0\.weight", "res.{}.conv1.weight"),
        (r"motion_encoder\.enc\.net_app\.convs\.(\d+)\.conv1\.1\.bias", "res.{}.conv1.act_fn.bias"),
        (r"motion_encoder\.enc\.net_app\.convs\.(\d+)\.conv2\.1\.weight", "res.{}.conv2.weight"),
        (r"motion_encoder\.enc\.net_app\.convs\.(\d+)\.conv2\.2\.bias", "res.{}.conv2.act_fn.bias"),
        (r"motion_encoder\.enc\.net_app\.convs\.(\d+)\.skip\.1\.weight", "res.{}.conv_skip.weight"),
        (rf"motion_encoder\.enc\.net_app\.convs\.{blocks + 1}\.weight", "motion_encoder.conv_out.weight"),
        (r"motion_encoder\.enc\.fc\.(\d+)\.(weight|bias)", "motion_encoder.motion_network.{}.{}"),
        (r"motion_encoder\.dec\.direction\.weight", "motion_encoder.motion_synthesis_weight"),
        (r"face_encoder\.(conv1_local|conv2|conv3)\.conv\.(weight|bias)", "face_encoder.{}.{}"),
        (r"face_encoder\.(out_proj\.weight|out_proj\.bias|padding_tokens)", "face_encoder.{}"),
    ]
    if name.endswith(".kernel"):
        return None
    for pattern, target in rules:
        match = re.fullmatch(pattern, name)
        if match:
            groups = list(match.groups())
            if target.startswith("res."):
                return "motion_encoder.res_blocks." + target[4:].format(int(groups[0]) - 1)
            return target.format(*groups)
    raise AssertionError(f"no diffusers name for {name}")


def _face_block_tensors(block: torch.nn.Module, index: int) -> dict[str, np.ndarray]:
    state = {k: v.numpy() for k, v in block.state_dict().items()}
    k_weight, v_weight = np.split(state["linear1_kv.weight"], 2)
    k_bias, v_bias = np.split(state["linear1_kv.bias"], 2)
    names = {
        "to_q.weight": state["linear1_q.weight"], "to_q.bias": state["linear1_q.bias"],
        "to_k.weight": k_weight, "to_k.bias": k_bias, "to_v.weight": v_weight, "to_v.bias": v_bias,
        "to_out.weight": state["linear2.weight"], "to_out.bias": state["linear2.bias"],
        "norm_q.weight": state["q_norm.weight"], "norm_k.weight": state["k_norm.weight"],
    }  # fmt: skip
    return {f"face_adapter.{index}.{name}": tensor for name, tensor in names.items()}


def _flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """flash-attn's `flash_attn_func` ([B, S, N, H] in and out), by torch's SDPA: the official face
    block calls it (flash-attn is CUDA only; the official "torch" mode skips its own layout change)."""
    out = torch.nn.functional.scaled_dot_product_attention(*(t.transpose(1, 2) for t in (q, k, v)))
    return out.transpose(1, 2)


@pytest.fixture(scope="module")
def official():
    official_wan()
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
    return generator, face_encoder, face_block, face_module


@pytest.fixture(scope="module")
def ours(official):
    generator, face_encoder, face_block, _ = official
    runtime = TransformerRuntime(dtype=jnp.float32, param_dtype=jnp.float32, scan_layers=False)
    tensors = export_transformer_weights(WanTransformer(SPEC, runtime, rngs=nnx.Rngs(0)))
    blocks = int(np.log2(FACE)) - 2
    for prefix, module in (("motion_encoder.", generator), ("face_encoder.", face_encoder)):
        for name, tensor in module.state_dict().items():
            target = _diffusers_name(prefix + name, blocks)
            if target is not None:
                tensors[target] = tensor.numpy().reshape(tensors[target].shape)  # [1, C, 1, 1] biases -> [C]
    tensors.update(_face_block_tensors(face_block, 0))
    return load_transformer(SPEC, runtime, tensors)


def test_motion_and_face_encoders_match_the_official_code(official, ours):
    generator, face_encoder, _, _ = official
    faces = np.random.default_rng(0).uniform(-1, 1, (5, FACE, FACE, 3)).astype(np.float32)
    with torch.no_grad():
        motion = generator.enc.enc_motion(torch.from_numpy(faces.transpose(0, 3, 1, 2).copy()))
        motion = generator.dec.direction(motion)  # [5, 512]
        tokens = face_encoder(motion[None]).numpy()  # [1, 2, 5, D]
    ours_motion = np.asarray(ours.animate.motion_encoder(faces))
    assert_close(ours_motion, motion.numpy(), RELATIVE_TOLERANCE)
    assert_close(np.asarray(ours.animate.face_encoder(ours_motion[None])), tokens, RELATIVE_TOLERANCE)


def test_a_face_adapter_block_matches_the_official_code(official, ours, monkeypatch):
    _, _, face_block, face_module = official
    monkeypatch.setattr(face_module, "flash_attn_func", _flash_attention)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 2 * 6, SPEC.inner_dim)).astype(np.float32)  # 2 frames of 6 tokens
    face = rng.standard_normal((1, 2, 5, SPEC.inner_dim)).astype(np.float32)
    with torch.no_grad():
        expected = face_block(torch.from_numpy(x), torch.from_numpy(face)).numpy()
    assert_close(np.asarray(ours.animate.face_adapter[0](x, face)), expected, RELATIVE_TOLERANCE)
