"""Every speed and dtype config key, end to end on the demo model, against the plain float32 run.

Options that reorder nothing must give the same latents as the plain path (Python loop, K/V
recomputed in every step, one encoder call per prompt kind, eager torch): `use_kv_cache`,
`scan_diffusion_loop`, `use_batched_text_encoder` within 1e-5 of max|ref| (measured:
bit-identical), `compile_text_encoder` within 1e-4 (inductor fuses and reorders the encoder's
fp32 reductions; measured 7e-7). Lower-precision dtypes must differ, within bf16's reach
(8 mantissa bits, ~4e-3 per op): 3e-2, for measured errors of 2.4e-3 (bf16 weights), 1.2e-2
(bf16 activations), 3.9e-3 (bf16 text encoder) and 1.1e-2 (bf16 scheduler state).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from wanjax.application.container import build_container
from wanjax.application.presets import resolve_config
from wanjax.domain.plan import plan_sampling

SMALL = dict(height=32, width=48, num_frames=5, num_inference_steps=4)
PLAIN = {"dtype": "float32", "use_kv_cache": "false", "use_batched_text_encoder": "false"}


@pytest.fixture(autouse=True)
def demo_in_session_cache(demo_cache, monkeypatch):
    monkeypatch.setenv("WANJAX_CACHE", str(demo_cache.parent))


def _run(overrides: dict[str, str]):
    config = resolve_config("demo", {**PLAIN, **overrides})
    container = build_container(config)
    request = config.request("a fox", negative_prompt="blurry", **SMALL)
    return container, container.service().generate(request, output_type="latent").array


@pytest.fixture(scope="module")
def reference() -> np.ndarray:
    return _run({})[1]


def _relative_error(got: np.ndarray, expected: np.ndarray) -> float:
    return float(np.max(np.abs(got - expected)) / np.max(np.abs(expected)))


@pytest.mark.parametrize(
    "overrides, tolerance",
    [
        ({"use_kv_cache": "true"}, 1e-5),
        ({"scan_diffusion_loop": "true"}, 1e-5),
        ({"use_kv_cache": "true", "scan_diffusion_loop": "true"}, 1e-5),
        ({"use_batched_text_encoder": "true"}, 1e-5),
        ({"compile_text_encoder": "true"}, 1e-4),
    ],
    ids=["kv-cache", "scan-loop", "kv-cache+scan-loop", "batched-text-encoder", "compiled-text-encoder"],
)
def test_exact_options_give_the_plain_latents(reference, overrides, tolerance):
    _, got = _run(overrides)
    assert _relative_error(got, reference) <= tolerance


def _param_dtypes(container) -> set[str]:
    (params, *_) = container.denoiser().program.params
    return {str(leaf.dtype) for leaf in jax.tree.leaves(params)}


@pytest.mark.parametrize(
    "overrides, params, compute",
    [
        ({"weights_dtype": "bfloat16"}, {"bfloat16", "float32"}, jnp.float32),
        ({"activations_dtype": "bfloat16"}, {"float32"}, jnp.bfloat16),
        ({"dtype": "bfloat16", "activations_dtype": "float32"}, {"bfloat16", "float32"}, jnp.float32),
        ({"text_encoder_dtype": "bfloat16"}, {"float32"}, jnp.float32),
    ],
    ids=["bf16-weights", "bf16-activations", "dtype-shorthand-overridden", "bf16-text-encoder"],
)
def test_lower_precision_dtypes_take_effect_and_track_float32(reference, overrides, params, compute):
    container, got = _run(overrides)
    assert _param_dtypes(container) == params  # fp32 stays where diffusers keeps it (modulation, time embedder)
    assert container.denoiser().program.dtype == compute
    assert 0 < _relative_error(got, reference) <= 3e-2


def test_bfloat16_scheduler_state(reference):
    container, got = _run({"scheduler_dtype": "bfloat16"})
    plan = plan_sampling(container.config().request("x", **SMALL))
    state = container.denoiser().program.initial_state(plan, np.zeros((1, 2, 4, 6, 16), np.float32))
    assert state.sample.dtype == jnp.bfloat16
    assert got.dtype == np.float32  # latents leave the denoiser in fp32 whatever the solver ran in
    assert 0 < _relative_error(got, reference) <= 3e-2


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"weights_dtype": "float8_e4m3fn"},
        {"cache_policy": "teacache", "scan_diffusion_loop": "true"},
        {"cache_policy": "dbcache", "Fn_compute_blocks": "1", "max_warmup_steps": "1", "residual_diff_threshold": "1",
         "enable_taylorseer": "true", "weights_dtype": "float8_e4m3fn", "scan_diffusion_loop": "true"},
    ],
    ids=["fp32", "fp8-kernels", "teacache+scan-loop", "dbcache+taylorseer+fp8+scan-loop"],
)
def test_offload_layers_gives_the_resident_latents_bit_for_bit(overrides):
    """The blocks' weights load straight into host memory and stream in; nothing else changes."""
    container, got = _run({**overrides, "offload": "layers"})
    blocks = jax.tree.leaves(container.denoiser().program.params[0]["blocks"])
    assert {a.sharding.memory_kind for a in blocks} == {"pinned_host"}
    np.testing.assert_array_equal(got, _run(overrides)[1])
