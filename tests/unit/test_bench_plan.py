"""`wanjax bench` planning: what it will run, and every bad input refused before any work."""

from __future__ import annotations

import pytest

from wanjax.application.bench import BenchOptions, plan_bench
from wanjax.domain.architectures import WAN22_TI2V_5B
from wanjax.domain.errors import WanjaxError
from wanjax.domain.flops import transformer_flops_per_step


def test_preset_size_guidance_and_layers() -> None:
    bench = plan_bench(BenchOptions(model="wan2.1-t2v-1.3b", layers=2, steps=4))
    assert bench.architecture.transformer.num_layers == 2
    assert (bench.request.height, bench.request.width, bench.request.num_frames) == (480, 832, 81)
    assert bench.geometry.shape == (1, 21, 60, 104, 16)
    assert bench.copies == 2  # guidance_scale 5
    assert bench.plan.num_steps == 5  # one more than timed: the first also builds the KV cache
    expected = transformer_flops_per_step(bench.architecture.transformer, 21, 60, 104, 512, 2, kv_cached=True)
    assert bench.flops_per_step == expected


def test_few_step_two_expert_preset_runs_the_given_steps_without_guidance() -> None:
    bench = plan_bench(BenchOptions(model="wan2.2-t2v-a14b-lightning-4step", layers=1, steps=6, height=64, width=64,
                                    num_frames=5))  # fmt: skip
    assert bench.copies == 1 and bench.plan.num_steps == 7
    assert set(bench.plan.experts.tolist()) == {0, 1}  # the published boundary 0.875 splits them


def test_image_to_video_inputs() -> None:
    bench = plan_bench(BenchOptions(model="wan2.1-i2v-14b-480p", layers=1, height=64, width=64, num_frames=5))
    assert bench.architecture.extra_channels == 20 and bench.architecture.image_tokens == 257


def test_ti2v_uses_the_wan22_vae() -> None:
    bench = plan_bench(BenchOptions(model="wan2.2-ti2v-5b", layers=1, height=64, width=64, num_frames=5))
    assert bench.architecture.transformer.in_channels == WAN22_TI2V_5B.in_channels
    assert bench.geometry.shape == (1, 2, 4, 4, 48)


@pytest.mark.parametrize("model, hints", [("wan2.1-vace-1.3b", (0, 2)), ("wan2.1-vace-14b", (0,))])
def test_vace_cut_to_layers_keeps_the_hint_points_below_the_cut(model: str, hints: tuple[int, ...]) -> None:
    bench = plan_bench(BenchOptions(model=model, layers=4, height=64, width=64, num_frames=5))
    assert bench.architecture.transformer.vace_layers == hints


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(model="wan9"), "give a preset"),
        (dict(layers=0), "--layers 0: must be between 1 and 2"),
        (dict(model="wan2.1-t2v-1.3b", layers=31), "between 1 and 30"),
        (dict(steps=0), "--steps 0"),
        (dict(height=100), "height=100: must be a multiple of 16; use 96 or 112"),
        (dict(num_frames=6), "num_frames=6: must be 4k\\+1"),
        (dict(attention="flash"), "attention='flash'"),
        (dict(model="wan2.2-ti2v-5b", height=48, width=64), "multiple of 32"),
    ],
)
def test_bad_input_is_refused(options: dict, message: str) -> None:
    with pytest.raises(WanjaxError, match=message):
        plan_bench(BenchOptions(**options))
