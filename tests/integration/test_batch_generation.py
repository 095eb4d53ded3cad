"""A batch of different prompts and seeds equals the same videos generated one at a time.

Demo model, fp32. Tolerance: 1e-5 of max|single| on the final latents. The rows of a
batch are independent computations, but the matmuls see 4 rows instead of 2 (and the
encoder 3 texts instead of 2), which may change XLA's and torch's blocking, hence
summation order (measured: up to 2e-6 of max|single|; README, "Determinism").
"""

import numpy as np
import pytest

from wanjax.application.container import build_container
from wanjax.application.presets import resolve_config
from wanjax.entrypoints.cli import main

SMALL = dict(height=32, width=48, num_frames=5, num_inference_steps=3)
PROMPTS = (("a fox in the snow", 3), ("a koi pond at dawn", 11))


@pytest.fixture(autouse=True)
def demo_in_session_cache(demo_cache, monkeypatch):
    monkeypatch.setenv("WANJAX_CACHE", str(demo_cache.parent))


def test_a_batch_of_two_equals_two_single_runs_and_compiles_once(compile_counter):
    config = resolve_config("demo", {"dtype": "float32"})
    container = build_container(config)
    service = container.service()
    requests = [config.request(prompt, negative_prompt="blurry", seed=seed, **SMALL) for prompt, seed in PROMPTS]
    single = np.concatenate([service.generate(r, output_type="latent").array for r in requests])
    batch = service.generate_batch(requests, output_type="latent").array

    error = np.max(np.abs(batch - single)) / np.max(np.abs(single))
    assert error <= 1e-5, f"relative error {error:.2e}"
    assert not np.allclose(batch[0], batch[1])

    before = compile_counter.count
    others = [config.request(f"another prompt {i}", seed=20 + i, **SMALL) for i in range(2)]
    service.generate_batch(others, output_type="latent")
    assert compile_counter.count == before  # new prompts and seeds, same batch size: nothing recompiles


def test_cli_repeated_prompt_writes_one_video_per_prompt(tmp_path, capsys):
    args = ["generate", "--prompt", "a fox", "--prompt", "a koi", "--height", "32", "--width", "48",
            "--num-frames", "5", "--steps", "2", "--seed", "4", "--quiet"]  # fmt: skip
    assert main([*args, "--out", str(tmp_path / "clip.mp4")]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clip-0.mp4", "clip-1.mp4"]
    assert main([*args, "--out", str(tmp_path / "frames.npy")]) == 0
    frames = np.load(tmp_path / "frames.npy")
    assert frames.shape == (2, 5, 32, 48, 3)
    assert "wrote" in capsys.readouterr().out
