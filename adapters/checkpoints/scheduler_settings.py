"""The sampling settings a diffusers-format checkpoint folder states, as wanjax config keys.

diffusers reads `scheduler/scheduler_config.json` (which scheduler, its shift and solver
options) and `model_index.json` (Wan 2.2's expert `boundary_ratio`); so does wanjax. Each
scheduler class maps to one `sample_solver` (the grid of noise levels is `sigma_schedule`'s,
which no checkpoint sets: docs/sampling.md). A setting wanjax's solvers do not implement is
reported by name (`unsupported`), never silently dropped: the caller refuses the folder
unless the user chooses the sampler explicitly.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from wanjax.adapters.checkpoints.diffusers_folder import read_json

SCHEDULER_CONFIG = Path("scheduler") / "scheduler_config.json"
MODEL_INDEX = Path("model_index.json")

_FLOW_SIGMAS_ONLY = {
    # Options that replace the shifted flow-sigma grid (value required, diffusers' default).
    "use_karras_sigmas": (False, False),
    "use_exponential_sigmas": (False, False),
    "use_beta_sigmas": (False, False),
    "use_dynamic_shifting": (False, False),
    "shift_terminal": (None, None),
    "num_train_timesteps": (1000, 1000),
}
_MULTISTEP_FLOW = {
    # What diffusers' multistep solvers must say to run Wan's flow-matching order-2 update.
    "use_flow_sigmas": (True, False),
    "prediction_type": ("flow_prediction", "epsilon"),
    "solver_order": (2, 2),
    "lower_order_final": (True, True),
    "final_sigmas_type": ("zero", "zero"),
    "thresholding": (False, False),
    **_FLOW_SIGMAS_ONLY,
}


@attrs.frozen
class _SchedulerClass:
    """How one diffusers scheduler class maps onto wanjax: its solver, shift key and fixed options."""

    solver: str
    shift_key: str
    shift_default: float
    required: Mapping[str, tuple[Any, Any]]
    """option -> (the value wanjax's solver implements, diffusers' default when the file omits it)."""


SCHEDULER_CLASSES = {
    "UniPCMultistepScheduler": _SchedulerClass(
        solver="unipc",
        shift_key="flow_shift",
        shift_default=1.0,
        required={
            "predict_x0": (True, True),
            "solver_type": ("bh2", "bh2"),
            "disable_corrector": ([], []),
            **_MULTISTEP_FLOW,
        },
    ),
    "DPMSolverMultistepScheduler": _SchedulerClass(
        solver="dpm++",
        shift_key="flow_shift",
        shift_default=1.0,
        required={
            "algorithm_type": ("dpmsolver++", "dpmsolver++"),
            "solver_type": ("midpoint", "midpoint"),
            "euler_at_final": (False, False),
            "use_lu_lambdas": (False, False),
            **_MULTISTEP_FLOW,
        },
    ),
    "FlowMatchEulerDiscreteScheduler": _SchedulerClass(
        solver="euler",
        shift_key="shift",
        shift_default=1.0,
        required={"invert_sigmas": (False, False), "stochastic_sampling": (False, False), **_FLOW_SIGMAS_ONLY},
    ),
}


@attrs.frozen
class CheckpointSampling:
    """Config values a checkpoint states, where it states them, and what wanjax cannot honour."""

    values: Mapping[str, Any]
    source: str
    unsupported: tuple[str, ...] = ()
    """`option=value (wanjax runs ...)` for each scheduler option no wanjax solver implements."""


def checkpoint_sampling(folder: Path) -> CheckpointSampling:
    """What `folder`'s scheduler config and model index say; empty for a folder with neither."""
    values: dict[str, Any] = {}
    unsupported: list[str] = []
    read: list[str] = []
    index = _optional_json(folder / MODEL_INDEX, what="a model index")
    if index is not None:
        read.append(str(MODEL_INDEX))
        if index.get("boundary_ratio") is not None:
            values["boundary_ratio"] = index["boundary_ratio"]
    scheduler = _optional_json(folder / SCHEDULER_CONFIG, what="a scheduler config")
    if scheduler is not None:
        read.append(str(SCHEDULER_CONFIG))
        name = scheduler.get("_class_name")
        known = SCHEDULER_CLASSES.get(name)
        if known is None:
            unsupported.append(f"_class_name={name!r} (wanjax runs {', '.join(SCHEDULER_CLASSES)})")
        else:
            values["sample_solver"] = known.solver
            values["flow_shift"] = scheduler.get(known.shift_key, known.shift_default)
            unsupported += _unsupported_options(scheduler, known)
    return CheckpointSampling(
        values=values, source=f"checkpoint {folder} ({', '.join(read)})", unsupported=tuple(unsupported)
    )


def _unsupported_options(scheduler: Mapping[str, Any], known: _SchedulerClass) -> list[str]:
    found = []
    for option, (implemented, default) in known.required.items():
        value = scheduler.get(option, default)
        if not _same(value, implemented):
            found.append(f"{option}={json.dumps(value)} (wanjax runs {json.dumps(implemented)})")
    return found


def _same(value: Any, implemented: Any) -> bool:
    """Equal, with a None-like `shift_terminal` (null, 0, false) read as absent, as diffusers does."""
    if implemented is None:
        return not value
    if isinstance(implemented, bool) or isinstance(value, bool):
        return value is implemented
    return value == implemented


def _optional_json(path: Path, *, what: str) -> dict[str, Any] | None:
    return read_json(path, what=what) if path.is_file() else None
