"""The step callback (the CLI's progress bar) is told of a step only once the device has
finished it: with asynchronous dispatch a loop could otherwise report every step done within
milliseconds and then wait for the device."""

import time

import jax
import numpy as np

from denoiser_cases import CASES, case_experts, case_inputs, case_plan
from wanjax.adapters.jax.denoising.denoiser import JaxDenoiser

STEPS = 3
DEVICE_SECONDS = 0.2  # each step's output is held back this long on the device side


def test_each_step_is_reported_after_the_device_finished_it():
    finished, reported = [], []

    @jax.jit
    def held_back(sample):
        def finish_late(values):
            time.sleep(DEVICE_SECONDS)
            finished.append(time.monotonic())
            return values

        return jax.pure_callback(finish_late, jax.ShapeDtypeStruct(sample.shape, sample.dtype), sample)

    denoiser = JaxDenoiser(case_experts(CASES["t2v"]))
    compiled_step = denoiser.program.step

    def step_finishing_late(*args):
        state, cache, report = compiled_step(*args)
        return state._replace(sample=held_back(state.sample)), cache, report

    denoiser.program.step = step_finishing_late
    latents, context, negative = case_inputs()
    on_step = lambda done, total: reported.append(time.monotonic())  # noqa: E731
    denoiser.session(case_plan(1, STEPS), context, negative).denoise(latents, on_step=on_step)

    assert len(finished) == len(reported) == STEPS
    # Step i is reported after its device work ended (a dispatch-time report would come first).
    assert all(np.greater_equal(reported, finished)), (reported, finished)
