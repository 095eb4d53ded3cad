"""Diffusion Forcing's schedule against diffusers' `generate_timestep_matrix` (synchronous,
asynchronous, with given frames, blocks of several frames, given frames that are not whole blocks),
and the noise `addnoise_condition` mixes into the given frames: at that timestep, fresh each
iteration, only there (diffusers draws it from torch's global generator, so no run compares)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from wanjax.adapters.jax.denoising.step import FrameValues
from wanjax.domain.frame_schedule import frame_schedule
from wanjax.domain.scheduling import StepCoefficients

TIMESTEPS = np.array([999, 941, 800, 512], dtype=np.int64)


@pytest.mark.parametrize(
    ("frames", "ar_step", "prefix", "blocks"),
    [(5, 0, 0, 1), (6, 1, 0, 2), (6, 2, 2, 2), (9, 3, 3, 3), (6, 1, 1, 2), (4, 0, 1, 1)],
)
def test_levels_and_updates_are_diffusers(frames, ar_step, prefix, blocks):
    from diffusers import SkyReelsV2DiffusionForcingPipeline

    matrix, index, update, interval = SkyReelsV2DiffusionForcingPipeline.generate_timestep_matrix(
        None, frames, torch.from_numpy(TIMESTEPS), frames, ar_step, prefix, blocks
    )
    schedule = frame_schedule(frames, len(TIMESTEPS), ar_step=ar_step, causal_block_size=blocks, prefix=prefix)
    np.testing.assert_array_equal(schedule.levels, index.numpy())
    np.testing.assert_array_equal(schedule.updated, update.numpy())
    np.testing.assert_array_equal(schedule.timesteps(TIMESTEPS), matrix.numpy().astype(np.float32))
    assert all(tuple(span) == (0, frames) for span in interval)  # the model sees the whole window


def test_the_given_frames_are_seen_noised_at_addnoise_condition():
    schedule = frame_schedule(4, len(TIMESTEPS), ar_step=0, causal_block_size=1, prefix=2, addnoise_condition=20)
    seen = schedule.timesteps(TIMESTEPS)
    assert (seen[:, :2] == 20).all() and (seen[:, 2:] != 20).all()

    x = jnp.asarray(np.random.default_rng(0).standard_normal((1, 4, 2, 3, 16)), jnp.float32)
    rows = StepCoefficients(*(np.zeros(4, np.float32),) * 3, np.zeros((4, 2), np.float32), np.zeros(4, np.float32),
                            np.zeros((4, 2), np.float32))  # fmt: skip

    def values(i: int) -> FrameValues:
        key = np.asarray(jax.random.key_data(jax.random.key(i)))
        noised = np.arange(4) < 2
        return FrameValues(seen[0], rows, schedule.updated[0], schedule.updated[0], noised, np.float32(0.02), key)

    first, second = values(0).model_input(x), values(1).model_input(x)
    noise = jax.random.normal(jax.random.wrap_key_data(values(0).noise_key), x.shape, x.dtype)
    np.testing.assert_allclose(first[:, :2], x[:, :2] * 0.98 + noise[:, :2] * 0.02, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(first[:, 2:], x[:, 2:])  # the frames being made: as they are
    assert not np.allclose(first[:, :2], second[:, :2])  # a fresh draw each iteration
