"""UniPC (B(h) = bh2, data prediction) for flow matching, as a `SolverTable`.

The multistep predictor UniP and corrector UniC (Zhao et al. 2023, "UniPC") in the form
the Wan code's FlowUniPCMultistepScheduler and diffusers' UniPCMultistepScheduler run Wan
with (the two differ only in their sigma grid): prediction_type="flow_prediction",
use_flow_sigmas=True, predict_x0=True, solver_type="bh2", lower_order_final=True,
final_sigmas_type="zero". With alpha = 1 - sigma, updates live in log-SNR
lambda = log(alpha / sigma); a step of size h = lambda_t - lambda_s from node s to t is

    x_t = (sigma_t / sigma_s) x_s - alpha_t (e^-h - 1) (d_s + sum_k rho_k D_k),

with divided differences D_k = (d_k - d_s) / r_k, r_k = (lambda_k - lambda_s) / h, over
older nodes k (the predictor) plus the new node t with r = 1 (the corrector). All but the
d's and x_s are numbers per step: tabulated here in float64 from the float32 sigmas the
reference uses, then expanded into one weight per data prediction.
"""

from __future__ import annotations

import math
from collections.abc import Collection

import numpy as np
from numpy.typing import DTypeLike

from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.scheduling.flow_sigmas import log_snr, unipc_flow_schedule
from wanjax.domain.scheduling.solver import SolverTable, StepCoefficients

SUPPORTED_ORDERS = (1, 2, 3)


def _rhos(r: np.ndarray, hh: float, order: int, corrector: bool) -> np.ndarray:
    """UniPC's rho weights over the divided differences (and, corrector only, the new node).

    The right-hand side b_k = k! g_k / B(h) with B(h) = e^hh - 1 (bh2), hh = -h,
    g_1 = (e^hh - 1) / hh - 1 and g_{k+1} = g_k / hh - 1 / (k + 1)!. The lowest orders
    use the fixed weight 1/2 instead of solving, as the reference does.
    """
    if not corrector and order == 1:
        return np.zeros(0)
    if (not corrector and order == 2) or (corrector and order == 1):
        return np.array([0.5])
    size = order if corrector else order - 1
    phi = np.expm1(hh)
    g = phi / hh - 1.0
    b = np.empty(size)
    for k in range(1, size + 1):
        b[k - 1] = math.factorial(k) * g / phi
        g = g / hh - 1.0 / math.factorial(k + 1)
    nodes = np.append(r, 1.0) if corrector else r
    return np.linalg.solve(np.vander(nodes, increasing=True).T[:size, :size], b)


def _bh_update(
    sigmas: np.ndarray, lam: np.ndarray, src: int, dst: int, order: int, corrector: bool
) -> tuple[float, np.ndarray]:
    """Weights of one UniP (corrector=False) or UniC update from node src to node dst.

    Returns the weight of x_src and weights w over data predictions, where w[0] belongs
    to d_dst (corrector only, else 0) and w[1 + k] to d_{src - k}, k = 0 .. order - 1.
    """
    h = lam[dst] - lam[src]
    alpha = 1.0 - sigmas[dst]
    phi = np.expm1(-h)  # also B(h) for bh2
    r = (lam[src - np.arange(1, order)] - lam[src]) / h
    rho = _rhos(r, -h, order, corrector)
    older = alpha * phi * rho[: order - 1] / r
    w = np.zeros(order + 1)
    w[1] = -alpha * phi + older.sum()
    w[2:] = -older
    if corrector:
        w[0] = -alpha * phi * rho[-1]
        w[1] -= w[0]
    return sigmas[dst] / sigmas[src], w


def _validate(order: int, disable_corrector: Collection[int], num_steps: int) -> None:
    if (
        isinstance(order, bool)
        or not isinstance(order, (int, np.integer))
        or order not in SUPPORTED_ORDERS
    ):
        raise InvalidRequestError(f"order (solver_order) must be one of 1, 2, 3, got {order!r}")
    bad = [j for j in disable_corrector if not 0 <= j < num_steps]
    if bad:
        raise InvalidRequestError(
            f"disable_corrector holds step indices outside 0..{num_steps - 1}: {bad}"
        )


def unipc_table(
    num_steps: int,
    shift: float,
    order: int = 2,
    disable_corrector: Collection[int] = (),
    *,
    sigma_schedule: str = "official",
    first_step: int = 0,
    dtype: DTypeLike = np.float32,
) -> SolverTable:
    """UniPC-`order` for `num_steps` model evaluations on the `sigma_schedule` grid
    (`unipc_flow_schedule`: the Wan code's, or diffusers >= 0.37's) shifted by `shift`.

    Width K = order + 1. Orders warm up over the first steps and drop to 1 over the last
    ones (lower_order_final). `disable_corrector` lists steps j whose predicted sample is
    not corrected (diffusers' meaning: the corrector that would run at step j + 1).
    Weights are computed in float64 and stored as `dtype`, the dtype the loop runs in.

    With `first_step` (video-to-video) the run starts there on the same grid as a fresh
    solver, as diffusers' scheduler does after `get_timesteps`: no history, so order 1 and
    no corrector on its first step; step indices (`disable_corrector`) count from it.
    """
    schedule = unipc_flow_schedule(num_steps, shift, sigma_schedule).from_step(first_step)
    num_steps = schedule.num_steps
    _validate(order, disable_corrector, num_steps)
    sigmas = schedule.sigmas.astype(np.float64)
    lam = log_snr(sigmas)
    width = order + 1
    orders = [min(order, num_steps - i, i + 1) for i in range(num_steps)]

    sample_coef = np.ones(num_steps)
    last_coef = np.zeros(num_steps)
    corrector_coefs = np.zeros((num_steps, width))
    corrected_coef = np.empty(num_steps)
    predictor_coefs = np.zeros((num_steps, width))
    for i, p in enumerate(orders):
        if i > 0 and i - 1 not in disable_corrector:
            q = orders[i - 1]
            last_coef[i], w = _bh_update(sigmas, lam, i - 1, i, q, corrector=True)
            sample_coef[i] = 0.0
            corrector_coefs[i, : q + 1] = w
        corrected_coef[i], w = _bh_update(sigmas, lam, i, i + 1, p, corrector=False)
        predictor_coefs[i, :p] = w[1:]

    return SolverTable(
        schedule=schedule,
        coefficients=StepCoefficients(
            sigma=sigmas[:-1],
            sample_coef=sample_coef,
            last_coef=last_coef,
            corrector_coefs=corrector_coefs,
            corrected_coef=corrected_coef,
            predictor_coefs=predictor_coefs,
        ).astype(dtype),
    )
