"""Wan 2.2 S2V's own modules against the official code (PyPI `wan22`: wan/modules/s2v/), on a tiny
random `WanModel_S2V`: the audio encoder after wav2vec2 (`CausalAudioEncoder`, as `forward` makes a
clip's tokens), the audio injectors (`after_transformer_block`, including which block runs which
injector), the frame-pack motioner's tokens and RoPE (`FramePackMotioner`, both drop modes and
every `add_last_motion`), the RoPE of a whole clip's tokens (`forward`'s `pre_compute_freqs`), the
pose encoder and the token-kind vectors. The weights go into our branch under their official
names. Tolerance: max|ours - official| <= 1e-5 * max|official| in fp32.
"""

from __future__ import annotations

import importlib

import attrs
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx

from official_wan import official_s2v
from transformer_models import assert_close

from wanjax.adapters.checkpoints.original_names import diffusers_name, diffusers_named
from wanjax.adapters.jax.transformer.blocks import WanBlock
from wanjax.adapters.jax.transformer.rope import position_tables
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.adapters.jax.transformer.s2v.audio_encoder import AudioTokens
from wanjax.adapters.jax.transformer.s2v.audio_injector import injector_slots
from wanjax.adapters.jax.transformer.s2v.branch import S2VBranch
from wanjax.adapters.jax.transformer.s2v.frame_pack import FramePackMotioner
from wanjax.adapters.jax.transformer.s2v.positions import reference_positions, video_positions
from wanjax.adapters.jax.transformer.s2v.weight_names import s2v_slots
from wanjax.adapters.jax.transformer.weight_names import block_entries
from wanjax.domain.s2v_spec import AUDIO_LAYERS, S2VSpec, s2v_parameters
from wanjax.domain.specs import TransformerSpec

RELATIVE_TOLERANCE = 1e-5
HEADS, HEAD_DIM, LAYERS, AUDIO_DIM = 2, 8, 12, 8
INJECT = (0, 1)  # with 12 blocks, blocks 1, 10 and 11 each take an injector for layer 1 (the official rule)
MOTION_FRAMES, LATENT_MOTION_FRAMES = 73, 19  # the release's; 8 frames a clip -> 2 latent frames
SPEC = TransformerSpec(
    num_attention_heads=HEADS, attention_head_dim=HEAD_DIM, text_dim=8, freq_dim=16, ffn_dim=16, num_layers=LAYERS
)
RUNTIME = TransformerRuntime(dtype=jnp.float32, param_dtype=jnp.float32, scan_layers=False)
BASE_MODULES = ("patch_embedding", "text_embedding", "time_embedding", "time_projection", "blocks", "head")


def s2v_spec(*, adain: bool, drop_mode: str = "padd") -> S2VSpec:
    return S2VSpec(
        cond_dim=16, audio_dim=AUDIO_DIM, num_audio_token=2, enable_adain=adain, audio_inject_layers=INJECT,
        zero_timestep=True, enable_motioner=False, enable_framepack=True, framepack_drop_mode=drop_mode,
    )  # fmt: skip


def official_model(s2v: S2VSpec) -> torch.nn.Module:
    model_s2v = importlib.import_module("wan.modules.s2v.model_s2v")
    torch.manual_seed(0)
    model = model_s2v.WanModel_S2V(
        **{k: getattr(s2v, k) for k in ("cond_dim", "audio_dim", "num_audio_token", "enable_adain", "zero_timestep",
                                       "enable_motioner", "enable_framepack", "framepack_drop_mode")},
        audio_inject_layers=list(INJECT), in_dim=16, out_dim=16, dim=SPEC.inner_dim, ffn_dim=16, freq_dim=16,
        text_dim=8, num_heads=HEADS, num_layers=LAYERS,
    ).eval()  # fmt: skip
    with torch.no_grad():  # away from the initial ones and zeros, so a misplaced tensor shows
        for param in model.parameters():
            param.add_(0.1 * torch.randn_like(param))
    return model


def s2v_tensors(model: torch.nn.Module) -> dict[str, np.ndarray]:
    """The official model's S2V tensors (its base transformer's left out)."""
    return {
        name: tensor.numpy()
        for name, tensor in model.state_dict().items()
        if not name.startswith(BASE_MODULES)
    }


def load_branch(s2v: S2VSpec, tensors: dict[str, np.ndarray], prefix: str = "") -> S2VBranch:
    """Our branch (list layout) with `tensors` placed by the name table: those of every slot whose
    name starts with `prefix`."""
    branch = S2VBranch(SPEC, s2v, RUNTIME, rngs=nnx.Rngs(0))
    for slot in (slot for slot in s2v_slots(SPEC, s2v, scan_layers=False, root=()) if slot.name.startswith(prefix)):
        param = branch
        for key in slot.path:
            param = param[key] if isinstance(key, int) else getattr(param, key)
        value = tensors[slot.name] if slot.to_jax is None else tensors[slot.name].transpose(slot.to_jax)
        assert param[...].shape == value.shape, slot.name
        param[...] = jnp.asarray(value)
    return branch


@pytest.fixture(scope="module", params=[True, False], ids=["adain", "no-adain"])
def models(request):
    official_s2v()
    s2v = s2v_spec(adain=request.param)
    model = official_model(s2v)
    return s2v, model, load_branch(s2v, s2v_tensors(model))


@pytest.fixture(scope="module")
def clip(models):
    """One forward pass of the official model over a 2-latent-frame clip; what it leaves on the model."""
    _, model, _ = models
    rng = np.random.default_rng(0)

    def randn(*shape: int) -> torch.Tensor:
        return torch.from_numpy(rng.standard_normal(shape).astype(np.float32))

    h, w = 8, 16  # latent rows and columns: 4 x 8 tokens a frame, 1 x 2 at 4x compression
    inputs = dict(
        x=[randn(16, 2, h, w)], t=torch.tensor([500.0]), context=[randn(5, 8)], seq_len=None,
        ref_latents=[randn(16, 1, h, w)], motion_latents=[randn(16, LATENT_MOTION_FRAMES, h, w)],
        cond_states=[randn(16, 2, h, w)], audio_input=randn(1, AUDIO_LAYERS, AUDIO_DIM, 8),
        motion_frames=[MOTION_FRAMES, LATENT_MOTION_FRAMES],
    )  # fmt: skip
    with torch.no_grad():
        model(**inputs)
    return inputs


def features(audio_input: torch.Tensor) -> np.ndarray:
    """The official audio input [B, 25, C_a, T] as ours [B, T, 25, C_a]."""
    return audio_input.numpy().transpose(0, 3, 1, 2)


def test_every_official_s2v_tensor_has_a_place_and_keeps_its_name(models):
    s2v, model, _ = models
    tensors = s2v_tensors(model)
    names = set(tensors)
    assert s2v_parameters(SPEC, s2v) == sum(tensor.size for tensor in tensors.values())  # the memory plan's count
    assert {slot.name for slot in s2v_slots(SPEC, s2v, scan_layers=True)} == names
    assert set(diffusers_named({name: np.zeros(1) for name in names})) == names  # the official-format loader's view
    for scan_layers in (True, False):
        branch = S2VBranch(SPEC, s2v, attrs.evolve(RUNTIME, scan_layers=scan_layers), rngs=nnx.Rngs(0))
        params = {path for path, _ in nnx.to_flat_state(nnx.state(branch, nnx.Param))}
        assert {slot.path for slot in s2v_slots(SPEC, s2v, scan_layers=scan_layers, root=())} == params


def test_the_audio_encoder_makes_the_clips_audio_tokens(models, clip):
    s2v, model, ours = models
    out = ours.casual_audio_encoder.clip_tokens(features(clip["audio_input"]), MOTION_FRAMES, LATENT_MOTION_FRAMES)
    assert_close(np.asarray(out.tokens), model.merged_audio_emb.numpy(), RELATIVE_TOLERANCE)
    if s2v.enable_adain:
        assert_close(np.asarray(out.global_token), model.audio_emb_global.numpy(), RELATIVE_TOLERANCE)
    else:
        assert out.global_token is None


def test_the_audio_injectors_act_after_the_official_blocks(models, clip):
    s2v, model, ours = models
    slots = injector_slots(SPEC, s2v)
    official = model.audio_injector.injected_block_id
    assert {i: int(k) for i, k in enumerate(slots) if k >= 0} == official == {0: 0, 1: 3}
    assert len(ours.audio_injector) == len(model.audio_injector.injector) == 4
    audio = AudioTokens(
        jnp.asarray(model.merged_audio_emb.numpy()),
        jnp.asarray(model.audio_emb_global.numpy()) if s2v.enable_adain else None,
    )
    video_tokens = int(model.original_seq_len)
    x = np.random.default_rng(1).standard_normal((1, video_tokens + 40, SPEC.inner_dim)).astype(np.float32)
    for block, slot in official.items():
        with torch.no_grad():
            expected = model.after_transformer_block(block, torch.from_numpy(x.copy())).numpy()
        out = np.asarray(ours.audio_injector[slot](jnp.asarray(x), audio, video_tokens))
        assert_close(out, expected, RELATIVE_TOLERANCE)
        assert not np.allclose(out[:, :video_tokens], x[:, :video_tokens])  # it did act
        np.testing.assert_array_equal(out[:, video_tokens:], x[:, video_tokens:])


def test_the_rope_of_a_whole_clip_matches_forward(models, clip):
    _, model, ours = models
    _, f, h, w = clip["x"][0].shape
    grid = (f, h // 2, w // 2)
    positions = np.concatenate(
        [video_positions(grid), reference_positions(grid), ours.frame_packer.positions(h, w)]
    )
    tables = position_tables(HEAD_DIM, positions)
    freqs = model.pre_compute_freqs[0, :, 0].numpy()  # [S, H/2] complex
    assert freqs.shape[0] == len(positions)
    np.testing.assert_allclose(tables.cos, freqs.real, atol=1e-6)
    np.testing.assert_allclose(tables.sin, freqs.imag, atol=1e-6)


@pytest.mark.parametrize("add_last_motion", [0, 1, 2])
@pytest.mark.parametrize(
    "drop_mode,frames,h,w", [("padd", 19, 8, 16), ("drop", 5, 12, 10)], ids=["padd-full", "drop-short-odd"]
)
def test_the_frame_packer_matches_the_official_one(drop_mode, frames, h, w, add_last_motion):
    official_s2v()
    motioner = importlib.import_module("wan.modules.s2v.motioner")
    torch.manual_seed(1)
    official = motioner.FramePackMotioner(inner_dim=SPEC.inner_dim, num_heads=HEADS, drop_mode=drop_mode).eval()
    s2v = s2v_spec(adain=False, drop_mode=drop_mode)
    tensors = {f"frame_packer.{name}": t.numpy() for name, t in official.state_dict().items()}
    ours = load_branch(s2v, tensors, prefix="frame_packer.").frame_packer
    latents = np.random.default_rng(2).standard_normal((16, frames, h, w)).astype(np.float32)
    with torch.no_grad():
        tokens, freqs = official([torch.from_numpy(latents)], add_last_motion)
    ours_tokens = np.asarray(ours(jnp.asarray(latents.transpose(1, 2, 3, 0)[None]), add_last_motion))
    assert_close(ours_tokens, tokens[0].numpy(), RELATIVE_TOLERANCE)
    tables = position_tables(HEAD_DIM, ours.positions(h, w, add_last_motion))
    np.testing.assert_allclose(tables.cos, freqs[0][0, :, 0].numpy().real, atol=1e-6)
    np.testing.assert_allclose(tables.sin, freqs[0][0, :, 0].numpy().imag, atol=1e-6)


def test_pose_tokens_and_token_kind_vectors(models, clip):
    _, model, ours = models
    cond = clip["cond_states"][0]
    with torch.no_grad():
        expected = model.cond_encoder(cond[None]).flatten(2).transpose(1, 2).numpy()  # [1, S, D]
        kinds = model.trainable_cond_mask(torch.tensor([0, 0, 1, 2, 2, 2])).numpy()
    pose = np.asarray(ours.cond_encoder(jnp.asarray(cond.numpy().transpose(1, 2, 3, 0)[None])))
    assert_close(pose.reshape(1, -1, SPEC.inner_dim), expected, RELATIVE_TOLERANCE)
    assert_close(np.asarray(ours.kind_vectors(2, 1, 3)), kinds, RELATIVE_TOLERANCE)


def test_a_zero_timestep_block_is_the_base_block_with_per_token_modulation():
    """`WanS2VAttentionBlock` modulates the video tokens by e0(t) and the rest by e0(0): our base
    block with per-token modulation (as Wan 2.2 TI2V's) computes it, with the S2V RoPE tables."""
    official_s2v()
    model_s2v = importlib.import_module("wan.modules.s2v.model_s2v")
    torch.manual_seed(2)
    official = model_s2v.WanS2VAttentionBlock(SPEC.inner_dim, 16, HEADS, cross_attn_norm=True).eval()
    with torch.no_grad():
        for param in official.parameters():
            param.add_(0.1 * torch.randn_like(param))
    block = WanBlock(SPEC, RUNTIME, rngs=nnx.Rngs(0))
    entries = {e.name: e for e in block_entries(SPEC)}
    for name, tensor in official.state_dict().items():
        entry = entries[diffusers_name(f"blocks.0.{name}").removeprefix("blocks.0.")]
        param = block
        for key in entry.path:
            param = getattr(param, key)
        param[...] = jnp.asarray(tensor.numpy() if entry.to_jax is None else tensor.numpy().transpose(entry.to_jax))
    rng = np.random.default_rng(3)
    grid = (2, 2, 4)  # 16 video tokens, 8 reference tokens, 8 + 2 motion tokens
    motion = FramePackMotioner(SPEC, s2v_spec(adain=False), RUNTIME, rngs=nnx.Rngs(0)).positions(4, 8)
    positions = np.concatenate([video_positions(grid), reference_positions(grid), motion])
    video, total, dim = 16, len(positions), SPEC.inner_dim
    x = rng.standard_normal((1, total, dim)).astype(np.float32)
    context = rng.standard_normal((1, 5, dim)).astype(np.float32)
    e0 = rng.standard_normal((1, 6, 2, dim)).astype(np.float32) * 0.1  # [B, 6, (t, 0), D]
    tables = position_tables(HEAD_DIM, positions)
    freqs = torch.from_numpy((tables.cos + 1j * tables.sin).astype(np.complex128))[None, :, None]
    with torch.no_grad():
        expected = official(
            torch.from_numpy(x), e=[torch.from_numpy(e0), torch.tensor(video)], seq_lens=torch.tensor([total]),
            grid_sizes=None, freqs=freqs, context=torch.from_numpy(context), context_lens=None,
        ).numpy()  # fmt: skip
    temb6 = np.concatenate([np.repeat(e0[:, None, :, 0], video, 1), np.repeat(e0[:, None, :, 1], total - video, 1)], 1)
    kv = block.cross_key_values(jnp.asarray(context), None)
    out = block(jnp.asarray(x), kv, jnp.asarray(temb6), tables)
    assert_close(np.asarray(out), expected, RELATIVE_TOLERANCE)
