"""Solver tables: validation, fixed shapes, exactness on straight flows, the Euler update, grids."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.scheduling import (
    SolverTable,
    dpm_table,
    euler_table,
    sampler_table,
    solver_step,
    unipc_table,
)

TABLES = {
    "unipc1": lambda n, shift, **kw: unipc_table(n, shift, order=1, **kw),
    "unipc2": lambda n, shift, **kw: unipc_table(n, shift, order=2, **kw),
    "unipc3": lambda n, shift, **kw: unipc_table(n, shift, order=3, **kw),
    "unipc3-no-corrector": lambda n, shift, **kw: unipc_table(
        n, shift, order=3, disable_corrector=range(n), **kw
    ),
    "unipc2-diffusers": lambda n, shift, **kw: unipc_table(n, shift, sigma_schedule="diffusers", **kw),
    "dpm++": dpm_table,
    "euler": euler_table,
}


@pytest.mark.parametrize("build", (unipc_table, dpm_table, euler_table))
@pytest.mark.parametrize("num_steps", (0, -3, 2.5, True, "10"))
def test_num_steps_must_be_a_positive_integer(build, num_steps) -> None:
    with pytest.raises(InvalidRequestError, match=r"num_steps must be an integer >= 1"):
        build(num_steps, 3.0)


@pytest.mark.parametrize("build", (unipc_table, dpm_table, euler_table))
@pytest.mark.parametrize("shift", (0.0, -1.0, float("nan"), float("inf"), None))
def test_shift_must_be_finite_and_positive(build, shift) -> None:
    message = r"shift \(flow_shift\) must be a finite number > 0"
    with pytest.raises(InvalidRequestError, match=message):
        build(10, shift)


@pytest.mark.parametrize("order", (0, 4, True, 2.0))
def test_unipc_order_must_be_1_to_3(order) -> None:
    with pytest.raises(InvalidRequestError, match=r"order \(solver_order\) must be one of 1, 2, 3"):
        unipc_table(10, 3.0, order=order)


def test_disable_corrector_must_name_steps() -> None:
    with pytest.raises(InvalidRequestError, match=r"disable_corrector .* 0\.\.9: \[10, -1\]"):
        unipc_table(10, 3.0, disable_corrector=(3, 10, -1))


@pytest.mark.parametrize(
    ("name", "width"), [("unipc1", 2), ("unipc2", 3), ("unipc3", 4), ("dpm++", 2), ("euler", 1)]
)
@pytest.mark.parametrize("num_steps", (1, 2, 7))
def test_shapes_are_fixed_across_steps(name: str, width: int, num_steps: int) -> None:
    table = TABLES[name](num_steps, 5.0)
    assert table.width == width and table.num_steps == num_steps
    assert table.timesteps.shape == (num_steps,) and table.sigmas.shape == (num_steps + 1,)
    for field, array in table.coefficients._asdict().items():
        expected = (num_steps, width) if field.endswith("_coefs") else (num_steps,)
        assert array.shape == expected and array.dtype == np.float32, field
    assert len(table.initial_state(np.zeros(3)).history) == width - 1


def test_row_is_one_slice_of_every_field() -> None:
    table = unipc_table(6, 3.0)
    for got, stacked in zip(table.row(4), table.coefficients, strict=True):
        np.testing.assert_array_equal(got, stacked[4])


def test_tables_are_read_only() -> None:
    table = unipc_table(4, 3.0)
    for array in (table.timesteps, table.sigmas, *table.coefficients):
        with pytest.raises(ValueError, match="read-only"):
            array[0] = 0


@pytest.mark.parametrize(("name", "first"), [("unipc2", 999.0), ("unipc2-diffusers", 999.0), ("dpm++", 1000.0)])
def test_timesteps_are_the_integers_the_model_sees(name: str, first: float) -> None:
    table = TABLES[name](50, 5.0)
    assert table.timesteps[0] == first and table.sigmas[-1] == 0.0
    np.testing.assert_array_equal(table.timesteps, np.floor(table.timesteps))
    assert np.all(np.diff(table.timesteps) < 0) and np.all(np.diff(table.sigmas) < 0)


@pytest.mark.parametrize("shift", (1.0, 5.0, 12.0))
def test_unipc_grids_differ_by_their_unshifted_ends(shift: float) -> None:
    """official: 20 points evenly spaced on [0.999 (float32), 0); diffusers: on [1, 1/1000)."""
    unshift = lambda s: s / (shift - (shift - 1) * s)  # noqa: E731  (the inverse of the shift)
    official = unipc_table(20, shift).sigmas[:-1].astype(np.float64)
    diffusers = unipc_table(20, shift, sigma_schedule="diffusers").sigmas[:-1].astype(np.float64)
    np.testing.assert_allclose(unshift(official), np.linspace(np.float32(0.999), 0, 21)[:-1], rtol=1e-6)
    np.testing.assert_allclose(unshift(diffusers[1:]), np.linspace(1, 1e-3, 21)[1:-1], rtol=1e-6)
    assert diffusers[0] == np.float32(1 - 1e-6)  # sigma 1, nudged down by 1e-6


def test_unknown_sigma_schedule_is_refused() -> None:
    with pytest.raises(InvalidRequestError, match=r"sigma_schedule='karras': must be one of official, diffusers"):
        unipc_table(10, 3.0, sigma_schedule="karras")


@pytest.mark.parametrize(
    ("solver", "schedule", "expected"),
    [
        ("unipc", "official", lambda: unipc_table(9, 5.0)),
        ("unipc", "diffusers", lambda: unipc_table(9, 5.0, sigma_schedule="diffusers")),
        ("dpm++", "official", lambda: dpm_table(9, 5.0)),
        ("euler", "official", lambda: euler_table(9, 5.0)),  # Euler has one grid
        ("euler", "diffusers", lambda: euler_table(9, 5.0)),
    ],
)
def test_sampler_table_is_the_solver_on_its_grid(solver: str, schedule: str, expected) -> None:
    got, want = sampler_table(solver, schedule, 9, 5.0), expected()
    np.testing.assert_array_equal(got.sigmas, want.sigmas)
    for a, b in zip(got.coefficients, want.coefficients, strict=True):
        np.testing.assert_array_equal(a, b)


def test_dpm_first_and_last_steps_are_first_order() -> None:
    """Step 0 has no history and step S - 1 ends at sigma 0; step 1 starts after sigma = 1,
    whose log-SNR is -inf, so its difference term vanishes; the steps between use both."""
    c = dpm_table(6, 5.0).coefficients
    assert not c.predictor_coefs[[0, 1, 5], 1].any() and c.predictor_coefs[2:5, 1].all()
    assert c.predictor_coefs[5, 0] == 1.0 and c.corrected_coef[5] == 0.0


@pytest.mark.parametrize("name", sorted(TABLES))
def test_placeholder_weights_are_zero(name: str) -> None:
    """Weights on d_j, j < 0, and on the previous corrected sample at step 0 vanish."""
    c = TABLES[name](6, 3.0).coefficients
    assert c.last_coef[0] == 0.0
    for i in range(6):
        assert not c.corrector_coefs[i, i + 1 :].any() and not c.predictor_coefs[i, i + 1 :].any()


@pytest.mark.parametrize("name", ("unipc1", "unipc2", "unipc3"))
def test_unipc_last_step_returns_the_data_prediction(name: str) -> None:
    row = TABLES[name](8, 3.0).row(7)
    assert row.corrected_coef == 0.0
    np.testing.assert_array_equal(row.predictor_coefs, np.eye(len(row.predictor_coefs))[0])


@pytest.mark.parametrize("shift", (1.0, 5.0))
@pytest.mark.parametrize("num_steps", (1, 3, 20))
@pytest.mark.parametrize("name", sorted(TABLES))
def test_straight_flows_are_integrated_exactly(name: str, num_steps: int, shift: float) -> None:
    """A constant velocity moves x along (1 - sigma) x0 + sigma noise: every solver is exact."""
    rng = np.random.default_rng(1)
    clean, noise = rng.standard_normal((2, 3, 4))
    table = TABLES[name](num_steps, shift, dtype=np.float64)
    sigmas = table.sigmas.astype(np.float64)
    state = table.initial_state((1 - sigmas[0]) * clean + sigmas[0] * noise)
    for i in range(num_steps):
        state = solver_step(state, noise - clean, table.row(i))
        expected = (1 - sigmas[i + 1]) * clean + sigmas[i + 1] * noise
        np.testing.assert_allclose(state.sample, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("shift", (1.0, 3.0, 12.0))
def test_euler_table_is_the_plain_euler_update(shift: float) -> None:
    rng = np.random.default_rng(2)
    table = euler_table(10, shift, dtype=np.float64)
    sigmas = table.sigmas.astype(np.float64)
    state = table.initial_state(rng.standard_normal((2, 5)))
    for i in range(table.num_steps):
        velocity = rng.standard_normal((2, 5))
        expected = state.sample + (sigmas[i + 1] - sigmas[i]) * velocity
        state = solver_step(state, velocity, table.row(i))
        np.testing.assert_allclose(state.sample, expected, rtol=1e-13, atol=1e-13)


def _velocity(sample, timestep):
    return jnp.tanh(sample) * (timestep / 1000.0) + 0.1 * sample


@pytest.mark.parametrize("name", ("unipc2", "unipc3", "dpm++", "euler"))
def test_step_runs_inside_jit_and_scan(name: str) -> None:
    """Rows gathered by lax.scan from the staged table give the numpy loop's result."""
    table: SolverTable = TABLES[name](7, 5.0)
    latents = np.random.default_rng(3).standard_normal((2, 3, 4)).astype(np.float32)

    @jax.jit
    def denoise(latents, timesteps, coefficients):
        def body(state, step):
            timestep, row = step
            return solver_step(state, _velocity(state.sample, timestep), row), None

        final, _ = jax.lax.scan(body, table.initial_state(latents), (timesteps, coefficients))
        return final.sample

    staged = jax.tree.map(jnp.asarray, table.coefficients)
    on_device = np.asarray(denoise(jnp.asarray(latents), jnp.asarray(table.timesteps), staged))

    state = table.initial_state(latents)
    for i in range(table.num_steps):
        velocity = np.asarray(_velocity(jnp.asarray(state.sample), table.timesteps[i]))
        state = solver_step(state, velocity, table.row(i))
    np.testing.assert_allclose(on_device, state.sample, rtol=0, atol=1e-5)
