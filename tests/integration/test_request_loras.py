"""LoRAs per request (`GenerationRequest.loras`): the same latents as the same LoRA merged at load,
switched between runs without compiling or loading anything, and gone again bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from lora_files import write_lora
from safetensors.numpy import save_file

from wanjax.adapters.checkpoints.weights import ComponentWeights
from wanjax.application.container import build_container
from wanjax.application.presets import resolve_config
from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.lora import LoraSpec

SMALL = dict(height=32, width=48, num_frames=5, num_inference_steps=3, seed=4)
PLAIN = {"dtype": "float32"}
SWITCHING = {**PLAIN, "request_loras": "true"}
RELATIVE_TOLERANCE = 1e-5


@pytest.fixture(autouse=True)
def demo_in_session_cache(demo_cache, monkeypatch):
    monkeypatch.setenv("WANJAX_CACHE", str(demo_cache.parent))


def _shapes(folder):
    weights = ComponentWeights(folder)
    return {name: weights[name].shape for name in weights}


@pytest.fixture(scope="module")
def demo_loras(demo_cache, tmp_path_factory):
    """Three rank-4 LoRAs over every block linear of the demo model: diffusers, original, kohya names."""
    folder, shapes = tmp_path_factory.mktemp("loras"), _shapes(demo_cache / "transformer")
    return {style: write_lora(folder / f"{style}.safetensors", style, shapes, np.random.default_rng(i), magnitude=0.5)
            for i, style in enumerate(("diffusers", "original", "kohya"))}  # fmt: skip


@pytest.fixture(scope="module")
def switching():
    """One service that takes LoRAs per request, shared by the tests below (as a server's is)."""
    config = resolve_config("demo", SWITCHING)
    return config, build_container(config)


def _latents(service, config, model=None, **fields) -> np.ndarray:
    request = config.request("a fox", negative_prompt="blurry", **SMALL, **fields)
    return service.generate(request, output_type="latent").array


def _merged_at_load(model: str, **loras: tuple[str, ...]) -> np.ndarray:
    config = resolve_config(model, {**PLAIN, **{k: ",".join(v) for k, v in loras.items()}})
    return _latents(build_container(config).service(), config)


def _assert_close(got: np.ndarray, expected: np.ndarray, base: np.ndarray) -> None:
    scale = np.max(np.abs(expected))
    assert np.max(np.abs(got - expected)) <= RELATIVE_TOLERANCE * scale
    assert np.max(np.abs(expected - base)) > 1000 * RELATIVE_TOLERANCE * scale  # the LoRA does change it


@pytest.mark.parametrize("style", ["diffusers", "original", "kohya"])
def test_a_request_lora_equals_the_lora_merged_at_load(switching, demo_loras, style):
    config, container = switching
    service = container.service()
    base = _latents(service, config)
    got = _latents(service, config, loras=[LoraSpec(str(demo_loras[style]), 0.7)])
    _assert_close(got, _merged_at_load("demo", loras=(f"{demo_loras[style]}:0.7",)), base)


def test_switching_reads_loads_and_compiles_nothing_new_and_drifts_nowhere(switching, demo_loras, demo_cache, tmp_path):
    config, container = switching
    service = container.service()
    base = _latents(service, config)
    fresh = write_lora(tmp_path / "fresh.safetensors", "diffusers", _shapes(demo_cache / "transformer"),
                       np.random.default_rng(9), magnitude=0.5)  # fmt: skip
    a = [LoraSpec(str(demo_loras["original"]), 0.8), LoraSpec(str(demo_loras["kohya"]), -0.4)]
    b = [LoraSpec(str(fresh), 1.2), LoraSpec(str(demo_loras["kohya"]), 0.3)]
    first_a = _latents(service, config, loras=a)
    denoiser, switch = container.denoiser(), container.lora_switch()
    compiled, merges, reads = denoiser.num_compiled, switch.merges.num_compiled, switch.factors.files_read
    then_b = _latents(service, config, loras=b)
    again_a = _latents(service, config, loras=a)
    base_again = _latents(service, config)
    assert container.denoiser() is denoiser  # the same loaded model throughout
    assert denoiser.num_compiled == compiled  # no denoising executable compiled for B or A again
    assert switch.merges.num_compiled == merges  # B's merge ran on A's executables (same ranks)
    assert switch.factors.files_read == reads + 1  # B's new file read once; A's came from the cache
    assert np.array_equal(again_a, first_a) and not np.array_equal(then_b, first_a)
    assert np.array_equal(base_again, base)


def test_each_expert_takes_its_own_loras(tiny_a14b_checkpoint, tmp_path):
    shapes = _shapes(tiny_a14b_checkpoint / "transformer")
    high = write_lora(tmp_path / "high.safetensors", "original", shapes, np.random.default_rng(1), magnitude=0.5)
    low = write_lora(tmp_path / "low.safetensors", "diffusers", shapes, np.random.default_rng(2), magnitude=0.5)
    config = resolve_config(str(tiny_a14b_checkpoint), SWITCHING)
    service = build_container(config).service()
    base = _latents(service, config)
    got = _latents(service, config, loras=[f"{high}:0.6"], loras_low=[f"{low}:0.9"])
    expected = _merged_at_load(str(tiny_a14b_checkpoint), loras=(f"{high}:0.6",), loras_low=(f"{low}:0.9",))
    _assert_close(got, expected, base)


def test_loras_that_cannot_run_are_refused_naming_the_field(switching, demo_loras, tmp_path):
    config, container = switching
    service = container.service()
    bad = tmp_path / "bad.safetensors"
    save_file({"diffusion_model.blocks.0.self_attn.qq.lora_down.weight": np.zeros((2, 4), np.float32),
               "diffusion_model.blocks.0.self_attn.qq.lora_up.weight": np.zeros((4, 2), np.float32)}, bad)  # fmt: skip
    cases = {
        "loras: LoRA .*bad.safetensors.*self_attn.qq": dict(loras=[str(bad)]),
        "loras: LoRA file not found": dict(loras=[str(tmp_path / "gone.safetensors")]),
        "loras_low .*one transformer": dict(loras_low=[str(demo_loras["kohya"])]),
    }
    for message, fields in cases.items():
        with pytest.raises(InvalidRequestError, match=message):
            service.check([config.request("a fox", **SMALL, **fields)])
    plain = resolve_config("demo", PLAIN)
    with pytest.raises(InvalidRequestError, match="loras: this model was loaded without per-request LoRAs"):
        build_container(plain).service().check([plain.request("a fox", loras=[str(demo_loras["kohya"])])])
