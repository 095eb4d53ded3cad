"""The warm-up request: two steps of the same request, split between the experts when there are two."""

from wanjax.domain.config import GenerationConfig
from wanjax.domain.plan import HIGH_NOISE, LOW_NOISE, plan_sampling
from wanjax.domain.warmup import warmup_request

CONFIG = GenerationConfig.from_mapping(dict(height=32, width=48, num_frames=5, num_inference_steps=40, flow_shift=12.0))


def test_two_steps_of_the_same_request():
    request = CONFIG.request("a fox", seed=3)
    short = warmup_request(request, num_experts=1)
    assert short.num_inference_steps == 2
    assert (short.prompt, short.seed, short.height, short.guidance_scale) == ("a fox", 3, 32, 5.0)


def test_two_experts_each_run_one_step_whatever_the_boundary():
    request = CONFIG.request("a fox", boundary_ratio=0.5)
    naive = CONFIG.request("a fox", num_inference_steps=2, boundary_ratio=0.5)
    assert set(plan_sampling(naive, num_experts=2).experts) == {HIGH_NOISE}  # shift 12: both steps above t = 500
    plan = plan_sampling(warmup_request(request, num_experts=2), num_experts=2)
    assert list(plan.experts) == [HIGH_NOISE, LOW_NOISE]


def test_a_timestep_list_keeps_its_first_two_and_one_step_stays_one():
    distilled = CONFIG.request("a fox", sample_timesteps=(1000, 750, 500, 250), guidance_scale=1.0)
    assert warmup_request(distilled, num_experts=1).sample_timesteps == (1000.0, 750.0)
    assert warmup_request(CONFIG.request("a fox", num_inference_steps=1), num_experts=2).num_inference_steps == 1
