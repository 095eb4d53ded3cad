"""MagCache skip decisions for Wan 2.1: our host plan equals diffusers' MagCache hook.

diffusers' real hook (`apply_mag_cache`) is applied to a tiny random WanTransformer3DModel and
driven as WanPipeline drives it: per step one forward in the "cond" cache context and one in
"uncond". After each forward the hook's own state says whether the blocks ran. Our plan
(`plan_sampling` with cache_policy=magcache) must reuse exactly where the hook skipped, given
the same curve (the published one, interpolated by each side to the step count), threshold,
K and retention ratio. Decisions are booleans: compared exactly.
"""

import numpy as np
import pytest
import torch

from tiny_wan import TINY_TRANSFORMER
from wanjax.domain.caching.published import PUBLISHED
from wanjax.domain.config import GenerationConfig
from wanjax.domain.plan import plan_sampling

CASES = [  # (published curve, steps, magcache_thresh, magcache_K, retention_ratio)
    ("wan2.1-t2v-1.3b", 50, 0.12, 2, 0.2),  # the authors' defaults, the curve's own length
    ("wan2.1-t2v-1.3b", 30, 0.12, 4, 0.2),  # interpolated to fewer steps
    ("wan2.1-t2v-14b", 50, 0.24, 6, 0.2),  # the authors' 14B setting (E024K6R02)
    ("wan2.1-i2v-14b-480p", 40, 0.12, 4, 0.25),
    ("wan2.1-i2v-14b-720p", 43, 0.06, 2, 0.1),  # a step count where the nearest index is a tie
    ("wan2.1-t2v-1.3b", 45, 0.12, 2, 0.3),  # retention 13.5 steps: rounds up to 14
]


def _hook_decisions(cond_curve: np.ndarray, steps: int, thresh: float, k: int, retention: float) -> np.ndarray:
    """[S, 2] bool (cond, uncond): True where diffusers' hook skipped the blocks."""
    from diffusers import WanTransformer3DModel
    from diffusers.hooks.mag_cache import MagCacheConfig, apply_mag_cache

    torch.manual_seed(0)
    transformer = WanTransformer3DModel(**TINY_TRANSFORMER).eval()
    config = MagCacheConfig(
        threshold=thresh,
        max_skip_steps=k,
        retention_ratio=retention,
        num_inference_steps=steps,
        mag_ratios=torch.tensor(cond_curve),
    )
    apply_mag_cache(transformer, config)
    head_hook = transformer.blocks[0]._diffusers_hook.get_hook("mag_cache_leader_block_hook")
    latents = torch.randn(1, 16, 1, 4, 4)  # [B, C, F, H, W]
    text = torch.randn(1, 3, TINY_TRANSFORMER["text_dim"])  # [B, L, D]
    skipped = np.zeros((steps, 2), dtype=bool)
    with torch.no_grad():
        for step in range(steps):
            for column, context in enumerate(("cond", "uncond")):
                with transformer.cache_context(context):
                    transformer(latents, torch.tensor([999 - step]), text, return_dict=False)
                    skipped[step, column] = not head_hook.state_manager.get_state().should_compute
    return skipped


@pytest.mark.parametrize("model, steps, thresh, k, retention", CASES)
def test_plan_reuses_where_the_diffusers_hook_skips(model, steps, thresh, k, retention):
    curve = np.asarray(PUBLISHED[model].mag_ratios).reshape(-1, 2)[:, 0]  # the cond half
    hook = _hook_decisions(curve, steps, thresh, k, retention)
    assert (hook[:, 0] == hook[:, 1]).all()  # one curve for both contexts: the passes agree
    assert hook[:, 0].any() and not hook[:, 0].all()  # a case that tests something

    request = GenerationConfig.from_mapping(dict(height=64, width=64, num_frames=5)).request(
        "a cat",
        num_inference_steps=steps,
        cache=GenerationConfig.from_mapping(dict(
            cache_policy="magcache",
            mag_ratios=tuple(np.repeat(curve, 2).tolist()),  # cond curve for both passes, as the hook
            magcache_thresh=thresh,
            magcache_K=k,
            retention_ratio=retention,
        )).cache,
    )
    plan = plan_sampling(request)
    np.testing.assert_array_equal(plan.cache.features["magcache"].reuse_residual, hook[:, 0])
