"""Sampling settings from a checkpoint folder, and the order in which a run's config is layered.

Order, lowest first: generic default < checkpoint (scheduler config, model index) < preset
< --model < --set. Each value remembers where it came from.
"""

import json
from pathlib import Path

import pytest

from wanjax.adapters.checkpoints.scheduler_settings import checkpoint_sampling
from wanjax.adapters.demo.random_checkpoint import UNIPC_SCHEDULER
from wanjax.application.presets import preset_for_checkpoint, preset_names, resolve_config
from wanjax.domain.config import SAMPLING_KEYS, GenerationConfig
from wanjax.domain.errors import ConfigError

UNIPC = {**UNIPC_SCHEDULER, "flow_shift": 5.0}
DPM = {
    "_class_name": "DPMSolverMultistepScheduler", "use_flow_sigmas": True, "prediction_type": "flow_prediction",
    "flow_shift": 3.0, "algorithm_type": "dpmsolver++", "solver_order": 2,
}  # fmt: skip
EULER = {"_class_name": "FlowMatchEulerDiscreteScheduler", "num_train_timesteps": 1000, "shift": 7.0}


def _folder(root: Path, scheduler: dict | None, index: dict | None = None) -> Path:
    if scheduler is not None:
        (root / "scheduler").mkdir(parents=True)
        (root / "scheduler" / "scheduler_config.json").write_text(json.dumps(scheduler))
    if index is not None:
        (root / "model_index.json").write_text(json.dumps(index))
    return root


@pytest.fixture
def located(monkeypatch):
    """resolve_config locates every model at the folder this returns (no download, no demo)."""
    where = {}
    monkeypatch.setattr("wanjax.application.builders.locate_model", lambda model: where["folder"])
    return where


def test_unipc_flow_shift_and_boundary_are_read(tmp_path):
    stated = checkpoint_sampling(_folder(tmp_path, UNIPC, {"_class_name": "WanPipeline", "boundary_ratio": 0.9}))
    assert stated.values == {"boundary_ratio": 0.9, "sample_solver": "unipc", "flow_shift": 5.0}
    assert stated.unsupported == ()
    assert "scheduler_config.json" in stated.source and "model_index.json" in stated.source


def test_flow_match_euler_maps_to_euler_with_its_shift(tmp_path):
    stated = checkpoint_sampling(_folder(tmp_path, EULER))
    assert stated.values == {"sample_solver": "euler", "flow_shift": 7.0}
    assert stated.unsupported == ()


def test_dpm_solver_multistep_maps_to_dpm_plus_plus(tmp_path):
    stated = checkpoint_sampling(_folder(tmp_path, DPM))
    assert stated.values == {"sample_solver": "dpm++", "flow_shift": 3.0}
    assert stated.unsupported == ()


def test_a_folder_without_scheduler_or_index_states_nothing(tmp_path):
    assert checkpoint_sampling(tmp_path).values == {}


@pytest.mark.parametrize(
    ("scheduler", "named"),
    [
        ({**UNIPC, "use_karras_sigmas": True}, "use_karras_sigmas=true"),
        ({**UNIPC, "solver_type": "bh1"}, 'solver_type="bh1"'),
        ({k: v for k, v in UNIPC.items() if k != "use_flow_sigmas"}, "use_flow_sigmas=false"),  # diffusers' default
        ({**UNIPC, "final_sigmas_type": "sigma_min"}, 'final_sigmas_type="sigma_min"'),
        ({**EULER, "use_dynamic_shifting": True}, "use_dynamic_shifting=true"),
        ({**DPM, "algorithm_type": "sde-dpmsolver++"}, 'algorithm_type="sde-dpmsolver++"'),
        ({**DPM, "solver_order": 3}, "solver_order=3"),
        ({**EULER, "shift_terminal": 0.1}, "shift_terminal=0.1"),
        ({"_class_name": "EulerDiscreteScheduler"}, "_class_name='EulerDiscreteScheduler'"),
    ],
)
def test_settings_no_solver_implements_are_named(tmp_path, scheduler, named):
    unsupported = checkpoint_sampling(_folder(tmp_path, scheduler)).unsupported
    assert len(unsupported) == 1 and unsupported[0].startswith(named)


def test_checkpoint_values_fill_what_nothing_higher_sets(tmp_path, located):
    located["folder"] = _folder(tmp_path, UNIPC, {"boundary_ratio": 0.875})
    config = resolve_config(str(tmp_path))
    assert (config.sampling.flow_shift, config.sampling.boundary_ratio, config.sampling.sample_solver) == (5.0, 0.875, "unipc")
    assert config.origin("flow_shift").startswith(f"checkpoint {tmp_path}")
    assert config.origin("num_inference_steps") == "default"
    assert config.origin("model") == "--model"


def test_set_beats_checkpoint(tmp_path, located):
    located["folder"] = _folder(tmp_path, UNIPC)
    config = resolve_config(str(tmp_path), {"flow_shift": "2.5"})
    assert config.sampling.flow_shift == 2.5 and config.origin("flow_shift") == "--set"


def test_preset_beats_checkpoint(tmp_path, located):
    located["folder"] = _folder(tmp_path, UNIPC)
    config = resolve_config("demo")
    assert config.sampling.flow_shift == 3.0 and config.origin("flow_shift") == "preset 'demo'"


def test_a_repo_id_gets_its_preset_over_the_checkpoint(tmp_path, located):
    located["folder"] = _folder(tmp_path, {**UNIPC, "flow_shift": 5.0})
    config = resolve_config("Wan-AI/Wan2.2-T2V-A14B-Diffusers")
    assert config.model.location == "Wan-AI/Wan2.2-T2V-A14B-Diffusers"
    assert (config.sampling.flow_shift, config.sampling.num_inference_steps, config.sampling.guidance_scale_low) == (12.0, 40, 3.0)
    assert config.origin("flow_shift") == "preset 'wan2.2-t2v-a14b'"


def test_unsupported_settings_refuse_the_folder_until_the_sampler_is_chosen(tmp_path, located):
    located["folder"] = _folder(tmp_path, {**UNIPC, "use_karras_sigmas": True})
    with pytest.raises(ConfigError, match=r"use_karras_sigmas=true.*--set sample_solver="):
        resolve_config(str(tmp_path))
    config = resolve_config(str(tmp_path), {"sample_solver": "unipc"})
    assert config.sampling.sample_solver == "unipc" and config.sampling.flow_shift == 5.0


def test_every_preset_repo_resolves_to_the_preset_named_after_it():
    for name in preset_names():
        model = resolve_config(name, read_checkpoint=False).model.location
        if "/" in model:
            own = preset_for_checkpoint(model)
            assert own is not None and resolve_config(own, read_checkpoint=False).model.location == model
    assert preset_for_checkpoint("Wan-AI/Wan2.1-T2V-14B") == "wan2.1-t2v-14b"  # the official layout's repo
    assert preset_for_checkpoint("someone/Wan2.1-T2V-14B-Diffusers") is None  # a fine-tune, maybe
    assert preset_for_checkpoint("/data/Wan2.1-T2V-14B-Diffusers") is None


def test_describe_names_each_sampling_value_and_its_origin():
    config = GenerationConfig().with_overrides({"flow_shift": "4"}, source="--set")
    lines = config.describe().splitlines()[1:]
    assert [line.split()[0] for line in lines] == list(SAMPLING_KEYS)
    assert "4.0" in lines[SAMPLING_KEYS.index("flow_shift")] and "(--set)" in lines[SAMPLING_KEYS.index("flow_shift")]
    assert lines[SAMPLING_KEYS.index("seed")].endswith("(default)")


def test_an_official_folder_gets_the_preset_of_the_repo_it_holds(tmp_path, located, monkeypatch):
    located["folder"] = tmp_path  # no scheduler config, no model index: the official layout states nothing
    held = {tmp_path: "Wan-AI/Wan2.2-T2V-A14B"}
    monkeypatch.setattr("wanjax.adapters.checkpoints.official_folder.official_repo_id", held.get)
    config = resolve_config(str(tmp_path), {"num_inference_steps": "20"})
    assert config.model.location == str(tmp_path)
    assert (config.sampling.flow_shift, config.sampling.boundary_ratio, config.sampling.guidance_scale_low) == (12.0, 0.875, 3.0)
    assert config.sampling.num_inference_steps == 20  # --set still wins
    origin = config.origin("flow_shift")
    assert origin.startswith(f"checkpoint {tmp_path}") and "preset 'wan2.2-t2v-a14b'" in origin


def test_a_switch_step_above_the_checkpoints_boundary_replaces_it(tmp_path, located):
    located["folder"] = _folder(tmp_path, UNIPC, {"boundary_ratio": 0.875})
    config = resolve_config(str(tmp_path), {"expert_switch_step": "2"})
    assert (config.sampling.expert_switch_step, config.sampling.boundary_ratio) == (2, None)
    assert config.origin("boundary_ratio") == "unset: expert_switch_step comes from --set"
    lightning = resolve_config("wan2.2-t2v-a14b-lightning-4step")  # the preset's step over the checkpoint's ratio
    assert (lightning.sampling.expert_switch_step, lightning.sampling.boundary_ratio) == (2, None)
    both = resolve_config("wan2.2-t2v-a14b", {"boundary_ratio": "0.9", "expert_switch_step": "2"})
    both_values = (both.sampling.boundary_ratio, both.sampling.expert_switch_step)
    assert both_values == (0.9, 2)  # one layer sets both: the request refuses
    replaced = resolve_config("wan2.2-t2v-a14b", {"expert_switch_step": "3"})
    assert (replaced.sampling.boundary_ratio, replaced.sampling.expert_switch_step) == (None, 3)  # --set over the preset's ratio
