"""Wan 2.2 S2V's own modules against the official code (PyPI `wan22`: wan/modules/s2v/), on a tiny
random `WanModel_S2V`: the audio encoder after wav2vec2 (`CausalAudioEncoder`, as `forward` makes a
clip's tokens), the audio injectors (`after_transformer_block`, including which block runs which
injector), the frame-pack motioner's tokens and RoPE (`FramePackMotioner`, both drop modes and
every `add_last_motion`), the RoPE of a whole clip's tokens (`forward`'s `pre_compute_freqs`), the
pose encoder and the token-kind vectors; and the whole forward pass, as our transformer with the
S2V extension (both block layouts). The weights go in under their official names. Tolerance: max|ours - official| <= 1e-5 * max|official| in fp32.
"""

from __future__ import annotations

import functools
import importlib

import attrs
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx

from official_wan import official_s2v
from transformer_models import assert_close

from wanjax.adapters.checkpoints.original_names import diffusers_named
from wanjax.adapters.jax.transformer.model import WanTransformer
from wanjax.adapters.jax.transformer.rope import position_tables
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.adapters.jax.transformer.s2v.audio_encoder import AudioTokens
from wanjax.adapters.jax.transformer.s2v.audio_injector import injector_slots
from wanjax.adapters.jax.transformer.s2v.branch import S2VBranch
from wanjax.adapters.jax.transformer.s2v.positions import reference_positions, video_positions
from wanjax.adapters.jax.transformer.s2v.weight_names import s2v_slots
from wanjax.adapters.jax.transformer.weights import export_transformer_weights, load_transformer
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


# Each piece runs as one compiled call, as in a generation: op-by-op (eager) dispatch compiled every
# small op on its own and was most of these tests' time.
@nnx.jit
def clip_tokens(encoder, audio_features) -> AudioTokens:
    return encoder.clip_tokens(audio_features, MOTION_FRAMES, LATENT_MOTION_FRAMES)


@functools.partial(nnx.jit, static_argnums=3)
def inject(injector, x, audio, video_tokens):
    return injector(x, audio, video_tokens)


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
    out = clip_tokens(ours.casual_audio_encoder, features(clip["audio_input"]))
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
        out = np.asarray(inject(ours.audio_injector[slot], jnp.asarray(x), audio, video_tokens))
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
    with torch.no_grad():
        model(**clip)  # with motion tokens, whatever pass ran last
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


@pytest.fixture(scope="module", params=[False, True], ids=["listed", "scanned"])
def s2v_model(request, models) -> WanTransformer:
    """Our transformer with the S2V extension, holding every official tensor (its base's renamed to
    diffusers' names, the S2V ones under their own), in both block layouts."""
    s2v, official, _ = models
    spec = attrs.evolve(SPEC, s2v=s2v)
    runtime = attrs.evolve(RUNTIME, scan_layers=request.param)
    renamed = diffusers_named({k: v.numpy() for k, v in official.state_dict().items()})
    assert set(renamed) == set(export_transformer_weights(WanTransformer(spec, runtime, rngs=nnx.Rngs(0))))
    return load_transformer(spec, runtime, renamed)


@pytest.mark.parametrize("first_clip", [False, True], ids=["with-motion", "first-clip"])
def test_the_official_forward_is_our_transformer_with_the_s2v_extension(models, s2v_model, clip, first_clip):
    """`WanModel_S2V.forward` is our transformer's forward with the S2V extension's inputs: the
    video tokens plus the pose tokens, the reference and motion tokens appended with their own
    RoPE positions at timestep 0, each kind's vector, the audio injectors after their blocks, the
    head over the video tokens. `first_clip`: `drop_motion_frames`, no motion tokens (the
    release's clip 0). Both block layouts: the scanned one picks the injector by a traced slot."""
    _, official, _ = models
    with torch.no_grad():
        expected = official(**clip, drop_motion_frames=first_clip)[0].numpy()  # [C, F, H, W]

    def channels_last(t: torch.Tensor) -> np.ndarray:  # [C, F, H, W] -> [1, F, H, W, C]
        return t.numpy().transpose(1, 2, 3, 0)[None]

    inputs = dict(
        audio=features(clip["audio_input"]), pose=channels_last(clip["cond_states"][0]),
        reference=channels_last(clip["ref_latents"][0]),
    )  # fmt: skip
    if not first_clip:
        inputs["motion"] = channels_last(clip["motion_latents"][0])
    context = np.pad(clip["context"][0].numpy(), ((0, 512 - 5), (0, 0)))[None]  # text_len 512, zeros after
    out = forward(s2v_model, jnp.asarray(channels_last(clip["x"][0])), jnp.asarray(clip["t"].numpy()),
                  jnp.asarray(context), {"s2v": {k: jnp.asarray(v) for k, v in inputs.items()}})  # fmt: skip
    assert_close(np.asarray(out)[0].transpose(3, 0, 1, 2), expected, RELATIVE_TOLERANCE)


@nnx.jit
def forward(model, latents, timestep, context, extensions):
    return model(latents, timestep, context, extensions=extensions)
