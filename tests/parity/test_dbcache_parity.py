"""DBCache and TaylorSeer against cache-dit 1.5.3 on diffusers' WanPipeline (Wan 2.1 T2V and the
Wan 2.2 A14B pipeline with both experts), with and without classifier-free guidance.

cache-dit runs the conditional and the unconditional pass as separate transformer calls, each
deciding with its own buffers (one context per expert); wanjax batches both rows and decides per
row. Both sides start from the same noise on the same tiny random checkpoint (3 blocks, so the
first, middle and last ranges are all non-empty), 12 UniPC steps; each case's threshold skips
some steps and computes others after the warm-up. Asserted: the steps each pass reused, as
cache-dit records them (its `cached_steps` and `cfg_cached_steps`, per expert context), and the
final latents within 1e-4 of max|ref| (fp32; measured ~4e-7).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from wanjax.application.container import build_container
from wanjax.application.presets import resolve_config
from wanjax.domain.caching import CacheSettings

PROMPT, NEGATIVE = "a red boat", "blurry"
SIZE = dict(height=32, width=48, num_frames=9)
STEPS, MAX_LEN, GUIDANCE, GUIDANCE_LOW, LAYERS = 12, 16, 5.0, 2.5, 3
FIRST_AND_LAST = dict(Fn_compute_blocks=1, Bn_compute_blocks=1, residual_diff_threshold=0.083, max_warmup_steps=2)
PASSES_DISAGREE = {"dbcache"}  # on step 4 only the conditional pass reuses, on step 6 only the other
CASES = {
    "dbcache": (FIRST_AND_LAST, GUIDANCE),
    "dbcache-limits-no-guidance": (dict(FIRST_AND_LAST, max_continuous_cached_steps=2), 1.0),
    "taylorseer-1": (
        dict(FIRST_AND_LAST, max_warmup_steps=3, warmup_interval=2, max_cached_steps=6, enable_taylorseer=True),
        GUIDANCE,
    ),
    "taylorseer-2": (
        dict(FIRST_AND_LAST, Fn_compute_blocks=2, Bn_compute_blocks=0, residual_diff_threshold=0.1,
             enable_taylorseer=True, taylorseer_order=2),
        GUIDANCE,
    ),  # fmt: skip
}
A14B_CASES = {"a14b-taylorseer-2": (dict(FIRST_AND_LAST, enable_taylorseer=True, taylorseer_order=2), GUIDANCE)}


def _checkpoint(tmp_path_factory, boundary_ratio):
    from tiny_wan import tiny_wan_pipeline

    folder = tmp_path_factory.mktemp("dbcache")
    tiny_wan_pipeline(boundary_ratio=boundary_ratio, num_layers=LAYERS).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def t2v_checkpoint(tmp_path_factory):
    return _checkpoint(tmp_path_factory, None)


@pytest.fixture(scope="module")
def a14b_checkpoint(tmp_path_factory):
    return _checkpoint(tmp_path_factory, 0.875)


def _noise() -> torch.Tensor:
    return torch.randn(1, 16, 3, 4, 6, generator=torch.Generator().manual_seed(3))


def _cache_dit(folder, settings: dict, guidance: float) -> tuple[np.ndarray, list[list[int]]]:
    """diffusers + cache-dit: the final latents and, per pass (conditional first), the steps it
    reused, each expert context's steps counted from that expert's first."""
    import cache_dit
    from cache_dit import DBCacheConfig, TaylorSeerCalibratorConfig
    from diffusers import WanPipeline

    pipe = WanPipeline.from_pretrained(folder)
    pipe.set_progress_bar_config(disable=True)
    taylorseer = {"enable_taylorseer", "taylorseer_order"}
    calibrator = None
    if settings.get("enable_taylorseer"):
        calibrator = TaylorSeerCalibratorConfig(taylorseer_order=settings.get("taylorseer_order", 1))
    # cache-dit's Wan adapter assumes a conditional and an unconditional call per step; without
    # guidance diffusers makes one, which cache-dit's docs ask to declare with enable_separate_cfg
    config = DBCacheConfig(
        **{k: v for k, v in settings.items() if k not in taylorseer}, enable_separate_cfg=guidance > 1
    )
    cache_dit.enable_cache(pipe, cache_config=config, calibrator_config=calibrator)
    experts = {"guidance_scale_2": GUIDANCE_LOW} if pipe.transformer_2 is not None else {}  # as the a14b config
    latents = pipe(
        prompt=PROMPT, negative_prompt=NEGATIVE, **SIZE, num_inference_steps=STEPS, guidance_scale=guidance,
        max_sequence_length=MAX_LEN, latents=_noise(), output_type="latent", **experts,
    ).frames.numpy()  # fmt: skip
    reused, first = [[], []], 0
    for transformer in (pipe.transformer, pipe.transformer_2):
        if transformer is None:
            continue
        context = transformer._context_manager.get_context(transformer._context_names[0])
        reused[0] += [first + step for step in context.cached_steps]
        reused[1] += [first + step for step in context.cfg_cached_steps]
        first += context.executed_steps
        changes = [*context.residual_diffs.values(), *context.cfg_residual_diffs.values()]
        margin = min(abs(change / settings["residual_diff_threshold"] - 1) for change in changes)
        assert margin > 1e-3, "a decision within rounding of the threshold: choose another threshold"
    assert first == STEPS
    cache_dit.disable_cache(pipe)
    return latents, reused[: 2 if guidance > 1 else 1]


def _wanjax(service, config, settings: dict, guidance: float) -> tuple[np.ndarray, list[list[int]]]:
    request = config.request(
        PROMPT, negative_prompt=NEGATIVE, **SIZE, num_inference_steps=STEPS, guidance_scale=guidance,
        cache=CacheSettings(policy="dbcache", **settings),
    )  # fmt: skip
    result = service.generate(request, initial_latents=_noise().numpy(), output_type="latent")
    passes = result.cache_report.pass_blocks_ran  # [S, P]
    return result.array, [np.flatnonzero(~passes[:, p]).tolist() for p in range(passes.shape[1])]


def _assert_parity(folder, service, config, settings, guidance) -> list[list[int]]:
    expected, reference_reused = _cache_dit(folder, settings, guidance)
    got, reused = _wanjax(service, config, settings, guidance)
    assert reused == reference_reused
    computed = set(range(STEPS)) - set(reference_reused[0])
    assert reference_reused[0] and max(computed) > min(reference_reused[0]), "the case must skip and compute"
    error = np.max(np.abs(got - expected)) / np.max(np.abs(expected))
    assert error <= 1e-4, f"relative error {error:.2e}"
    return reused


def _service(folder, **overrides):
    settings = {"dtype": "float32", "sigma_schedule": "diffusers", "max_sequence_length": str(MAX_LEN), **overrides}
    config = resolve_config(str(folder), settings)
    return config, build_container(config).service()


@pytest.fixture(scope="module")
def t2v(t2v_checkpoint):
    return _service(t2v_checkpoint)


@pytest.fixture(scope="module")
def a14b(a14b_checkpoint):
    return _service(a14b_checkpoint, guidance_scale_2=str(GUIDANCE_LOW))


@pytest.mark.parametrize("case", list(CASES))
def test_wan21_reuses_the_steps_cache_dit_reuses_and_ends_within_1e4(case, t2v, t2v_checkpoint):
    config, service = t2v
    settings, guidance = CASES[case]
    reused = _assert_parity(t2v_checkpoint, service, config, settings, guidance)
    if case in PASSES_DISAGREE:
        assert reused[0] != reused[1], "this case must show the passes deciding apart"


@pytest.mark.parametrize("case", list(A14B_CASES))
def test_wan22_a14b_both_experts_reuse_as_cache_dit_and_end_within_1e4(case, a14b, a14b_checkpoint):
    config, service = a14b
    settings, guidance = A14B_CASES[case]
    _assert_parity(a14b_checkpoint, service, config, settings, guidance)
