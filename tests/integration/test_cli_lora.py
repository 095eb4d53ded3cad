"""`wanjax generate` with LoRAs and 4-step distilled sampling, end to end on the demo model."""

import numpy as np
import pytest
from lora_files import write_lora
from safetensors.numpy import load_file, save_file

from wanjax.adapters.checkpoints.weights import ComponentWeights
from wanjax.entrypoints.cli import main

SMALL = ["--prompt", "a fox", "--height", "32", "--width", "48", "--num-frames", "5"]
FOUR_STEPS = ["--set", "sample_timesteps=1000,750,500,250", "--guidance-scale", "1"]


@pytest.fixture(autouse=True)
def demo_in_session_cache(demo_cache, monkeypatch):
    monkeypatch.setenv("WANJAX_CACHE", str(demo_cache.parent))


@pytest.fixture
def demo_lora(demo_cache, tmp_path):
    weights = ComponentWeights(demo_cache / "transformer")
    shapes = {name: weights[name].shape for name in weights}
    return write_lora(tmp_path / "style.safetensors", "original", shapes, np.random.default_rng(0), magnitude=0.5)


def test_four_step_run_with_a_lora(tmp_path, capsys, demo_lora):
    plain, styled = tmp_path / "plain.npy", tmp_path / "styled.npy"
    assert main(["generate", *SMALL, *FOUR_STEPS, "--out", str(plain)]) == 0
    assert "4/4" in capsys.readouterr().err  # the progress bar counted 4 denoising steps
    assert main(["generate", *SMALL, *FOUR_STEPS, "--lora", f"{demo_lora}:0.5", "--quiet", "--out", str(styled)]) == 0
    plain_frames, styled_frames = np.load(plain), np.load(styled)
    assert plain_frames.shape == styled_frames.shape == (1, 5, 32, 48, 3)
    assert not np.array_equal(plain_frames, styled_frames)


def test_a_lora_that_does_not_fit_is_refused_with_its_keys(tmp_path, capsys):
    bad = tmp_path / "bad.safetensors"
    save_file({"diffusion_model.blocks.0.self_attn.qq.lora_down.weight": np.zeros((2, 4), np.float32),
               "diffusion_model.blocks.0.self_attn.qq.lora_up.weight": np.zeros((4, 2), np.float32)}, bad)  # fmt: skip
    assert main(["generate", *SMALL, *FOUR_STEPS, "--lora", str(bad), "--out", str(tmp_path / "x.npy")]) == 2
    message = capsys.readouterr().err
    assert "self_attn.qq.lora_down.weight" in message and "self_attn.qq.lora_up.weight" in message
    assert not (tmp_path / "x.npy").exists()


def test_low_noise_loras_on_a_single_expert_model_are_refused(tmp_path, capsys, demo_lora):
    assert main(["generate", *SMALL, "--lora-low", str(demo_lora), "--out", str(tmp_path / "x.npy")]) == 2
    assert "this model has one transformer" in capsys.readouterr().err


def test_a_lora_with_no_tensors_or_a_nan_is_refused_when_listed_before_loading(tmp_path, capsys, demo_lora):
    empty, broken = tmp_path / "empty.safetensors", tmp_path / "broken.safetensors"
    save_file({}, empty)
    tensors = load_file(demo_lora)
    first = next(name for name in tensors if name.endswith("lora_up.weight"))
    save_file({**tensors, first: np.full_like(tensors[first], np.nan)}, broken)
    for lora, message in ((empty, "the file holds no tensors"), (broken, "hold NaN or infinite values")):
        assert main(["generate", *SMALL, *FOUR_STEPS, "--lora", str(lora), "--out", str(tmp_path / "x.npy")]) == 2
        err = capsys.readouterr().err
        assert message in err and lora.name in err and "denoising" not in err, err  # before any step
    assert not (tmp_path / "x.npy").exists()
