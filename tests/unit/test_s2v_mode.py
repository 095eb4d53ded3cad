"""Wan 2.2 S2V's mode without running a model: it is the default of an S2V model and refused on
others, its clip count and frame count follow the official counting, its options refuse bad
values naming the fix, and the bench's random inputs (`received`) are what the S2V transformer
takes (a tiny one runs a step's forward on them), whose appended tokens the memory plan counts."""

from __future__ import annotations

import jax.numpy as jnp
import math

import numpy as np
import pytest
from flax import nnx

from wanjax.adapters.jax.transformer.model import WanTransformer
from wanjax.adapters.jax.sharding.rules import transformer_logical_axes
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.adapters.jax.transformer.weights import abstract_transformer, storage_layout
from wanjax.domain.architectures import WAN21_T2V_1_3B, WAN21_VAE, WAN22_S2V_14B
from wanjax.domain.conditioning import ImageConditioning
from wanjax.domain.config import GenerationConfig
from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.extensions.s2v import S2V_EXTENSION
from wanjax.domain.inputs.fields import Entrypoint, InputRefusal
from wanjax.domain.memory import transformer_parameters
from wanjax.domain.modes.base import ModelTraits, ReceivedShapes
from wanjax.domain.modes.registry import default_mode, http_fields, mode_of_inputs
from wanjax.domain.modes.s2v.clips import emitted_frames, speech_clips
from wanjax.domain.modes.s2v.mode import SPEECH_TO_VIDEO
from wanjax.domain.modes.s2v.options import S2VOptions
from wanjax.domain.s2v_spec import S2VSpec
from wanjax.domain.specs import TransformerSpec


def _traits(transformer: TransformerSpec) -> ModelTraits:
    return ModelTraits(transformer=transformer, vae=WAN21_VAE, image_conditioning=ImageConditioning.NONE)


def test_the_mode_of_an_s2v_model_and_only_of_it():
    assert default_mode(_traits(WAN22_S2V_14B)) is SPEECH_TO_VIDEO
    SPEECH_TO_VIDEO.check_model(_traits(WAN22_S2V_14B))
    with pytest.raises(InputRefusal, match="S2V"):
        SPEECH_TO_VIDEO.check_model(_traits(WAN21_T2V_1_3B))


@pytest.mark.parametrize(
    "seconds, infer_frames, num_repeat, clips",
    [(0.7, 8, 0, 2), (0.5, 8, 0, 1), (5.0, 80, 0, 1), (5.1, 80, 0, 2), (20.0, 80, 0, 4), (20.0, 80, 3, 3),
     (20.0, 80, 9, 4)],
)  # fmt: skip
def test_clips_are_counted_as_the_official_code_counts_them(seconds, infer_frames, num_repeat, clips):
    """int(T30 / (infer_frames * 30 / 16)) + 1 with T30 = int(T50 * 0.6), T50 wav2vec2's states."""
    samples = int(seconds * 16_000)
    hidden = (samples - 400) // 320 + 1  # wav2vec2's conv stack: 400-sample window, 320 stride
    expected = int(int(hidden / 50 * 30) / (infer_frames * 30 / 16)) + 1
    expected = expected if num_repeat == 0 else min(expected, num_repeat)
    assert speech_clips(samples, infer_frames, 16, num_repeat) == expected == clips
    assert emitted_frames(clips, infer_frames) == clips * infer_frames - 3


@pytest.mark.parametrize("field, value", [("infer_frames", 10), ("infer_frames", 0), ("num_repeat", -1),
                                          ("infer_frames", True)])  # fmt: skip
def test_bad_options_are_refused_naming_the_setting(field, value):
    with pytest.raises(InvalidRequestError, match=field):
        S2VOptions(**{field: value})


S2V = S2VSpec(
    cond_dim=16, audio_dim=8, num_audio_token=2, enable_adain=True, audio_inject_layers=(0, 1), zero_timestep=True,
    enable_motioner=False, enable_framepack=True, framepack_drop_mode="padd",
)  # fmt: skip
TINY = TransformerSpec(num_attention_heads=2, attention_head_dim=8, text_dim=8, freq_dim=16, ffn_dim=16, num_layers=2,
                       s2v=S2V)  # fmt: skip


def test_the_short_audio_is_refused_before_loading():
    with pytest.raises(InvalidRequestError, match="audio.*at least 720"):
        GenerationConfig().request("hi", image=np.zeros((8, 8, 3), np.uint8), audio=np.zeros(500, np.float32))


@pytest.mark.parametrize("scan_layers", [True, False], ids=["scanned", "listed"])
def test_fp8_sharding_and_the_memory_plan_cover_its_parameters(scan_layers):
    """The audio injectors' kernels are stored in fp8 as the blocks' are, every S2V parameter has a
    sharding rule, and the memory plan counts what the model holds."""
    runtime = TransformerRuntime(dtype=jnp.bfloat16, param_dtype=jnp.bfloat16, scan_layers=scan_layers)
    abstract = abstract_transformer(TINY, runtime)
    layout = storage_layout(abstract, jnp.float8_e4m3fn)
    fp8 = {path for path, shape in layout.items() if shape.dtype == jnp.float8_e4m3fn}
    assert any(path[:2] == ("s2v", "audio_injector") for path in fp8)
    assert not any(name in path for path in fp8 for name in ("casual_audio_encoder", "frame_packer", "cond_encoder"))
    for path, shape in layout.items():
        transformer_logical_axes(path, len(shape.shape), abstract.parameter_rules)  # raises where none
    total, kernels = transformer_parameters(TINY)
    assert total == sum(math.prod(shape.shape) for shape in layout.values())
    assert kernels == sum(math.prod(layout[path].shape) for path in fp8)


def test_the_bench_inputs_fit_the_transformer():
    spec = TINY
    grid = (2, 8, 16)
    received = SPEECH_TO_VIDEO.received(ReceivedShapes(transformer=spec, vae=WAN21_VAE, latent_grid=grid, image_tokens=0))
    rng = np.random.default_rng(0)
    conditioning = received.map(lambda shape, split: jnp.asarray(rng.standard_normal(shape, dtype=np.float32)))
    model = WanTransformer(spec, TransformerRuntime(dtype=jnp.float32, param_dtype=jnp.float32), rngs=nnx.Rngs(0))
    latents = jnp.asarray(rng.standard_normal((1, *grid, 16), dtype=np.float32))
    out = nnx.jit(lambda m, x, c, e: m(x, jnp.array([500.0]), c, extensions=e))(
        model, latents, jnp.zeros((1, 5, 8)), conditioning.extensions
    )
    assert out.shape == latents.shape and bool(jnp.all(jnp.isfinite(out)))
    without_motion = {"s2v": {k: v for k, v in conditioning.extensions["s2v"].items() if k != "motion"}}
    first_clip = nnx.jit(lambda m, x, c, e: m(x, jnp.array([500.0]), c, extensions=e))(
        model, latents, jnp.zeros((1, 5, 8)), without_motion
    )
    assert not np.allclose(np.asarray(out), np.asarray(first_clip))  # the motion tokens are attended to
    appended = model.prepare_extensions(conditioning.extensions, latents.shape)["s2v"].rope.cos.shape[0]
    assert S2V_EXTENSION.appended_tokens(spec, grid[1:]) == appended == 2.5 * 4 * 8  # what the memory plan counts



@pytest.mark.parametrize(
    "entrypoint, names",
    [(Entrypoint.CLI, ["--image", "--audio"]), (Entrypoint.CLI, ["--image", "--audio", "--pose-video"]),
     (Entrypoint.HTTP, ["input_reference", "audio"]), (Entrypoint.HTTP, ["input_reference", "audio", "pose_video"])],
)  # fmt: skip
def test_the_cli_flags_and_http_fields_select_it(entrypoint, names):
    assert mode_of_inputs(names, None, entrypoint) is SPEECH_TO_VIDEO
    assert http_fields()["audio"] is SPEECH_TO_VIDEO.input_field("audio")
