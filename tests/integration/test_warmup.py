"""Warm-up: a 2-step run compiles everything the timed run needs, and its output is never written."""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pytest
from fakes import OneRunSessions

from wanjax.application import outputs
from wanjax.application.container import build_container
from wanjax.application.presets import resolve_config
from wanjax.domain.plan import HIGH_NOISE, LOW_NOISE
from wanjax.entrypoints.cli import main

SMALL = dict(height=32, width=48, num_frames=5, num_inference_steps=5)


@pytest.mark.parametrize("checkpoint", ["tiny_checkpoint", "tiny_a14b_checkpoint"])
def test_the_run_after_warmup_compiles_nothing(checkpoint, request, compile_counter):
    config = resolve_config(str(request.getfixturevalue(checkpoint)), {"max_sequence_length": "8"})
    service = build_container(config).service()
    prompt = config.request("a fox", negative_prompt="blurry", seed=1, **SMALL)

    warm = service.warmup([prompt])
    before = compile_counter.count
    result = service.generate(prompt)

    assert compile_counter.count == before, "the timed run compiled something the warm-up missed"
    assert warm.seconds["compile"] > 0 and "load" in warm.seconds and "load" not in result.trace.seconds
    fresh = build_container(config).service().generate(prompt)  # no warm-up: the same video
    np.testing.assert_array_equal(result.array, fresh.array)


def test_a_batch_after_its_warmup_compiles_nothing(tiny_checkpoint, compile_counter):
    config = resolve_config(str(tiny_checkpoint), {"max_sequence_length": "8"})
    service = build_container(config).service()
    batch = [config.request(prompt, seed=seed, **SMALL) for seed, prompt in enumerate(("a fox", "a koi pond"))]
    service.warmup(batch)
    before = compile_counter.count
    service.generate_batch(batch)
    assert compile_counter.count == before


class RecordingDenoiser(OneRunSessions):
    """Records the plans it prepares and runs (a fake of the Denoiser port)."""

    def __init__(self, inner) -> None:
        self.inner, self.prepared, self.ran = inner, [], []

    def noise(self, seed, shape):
        return self.inner.noise(seed, shape)

    def prepare(self, latents, plan, *args, **kwargs):
        self.prepared.append(plan)

    def denoise(self, latents, plan, *args, **kwargs):
        self.ran.append(plan)
        return self.inner.denoise(latents, plan, *args, **kwargs)


def test_warmup_compiles_for_the_full_plan_and_runs_both_experts(tiny_a14b_checkpoint):
    from dependency_injector import providers
    from fakes import FakeAutoencoder, FakeDenoiser, FakeTextEncoder

    config = resolve_config(str(tiny_a14b_checkpoint), {"max_sequence_length": "8"})
    container = build_container(config)
    denoiser = RecordingDenoiser(FakeDenoiser())
    container.denoiser.override(providers.Object(denoiser))
    container.text_encoder.override(providers.Object(FakeTextEncoder(dim=32)))
    container.autoencoder.override(providers.Object(FakeAutoencoder()))
    service = container.service()
    service.warmup([config.request("a fox", **SMALL)])

    (prepared,), (ran,) = denoiser.prepared, denoiser.ran
    assert prepared.num_steps == 5
    assert ran.num_steps == 2 and list(ran.experts) == [HIGH_NOISE, LOW_NOISE]


def test_cli_warmup_output_is_never_written(tiny_checkpoint, tmp_path, monkeypatch, capsys):
    writes = []
    real_output = outputs.streamed_output  # every output is written through it, part after part

    @contextmanager
    def recording_output(path, batch, fps, **options):
        parts = []
        with real_output(path, batch, fps, **options) as append:
            yield lambda part: (parts.append(np.array(part)), append(part))
        writes.append((np.concatenate(parts, axis=1), path))

    monkeypatch.setattr(outputs, "streamed_output", recording_output)
    args = ["generate", "--model", str(tiny_checkpoint), "--prompt", "a fox", "--height", "32", "--width", "48",
            "--num-frames", "5", "--steps", "5", "--set", "max_sequence_length=8"]  # fmt: skip
    assert main([*args, "--set", "warmup=true", "--out", str(tmp_path / "warm.npy")]) == 0
    summary = capsys.readouterr().out
    assert main([*args, "--quiet", "--out", str(tmp_path / "cold.npy")]) == 0

    assert [path.name for _, path in writes] == ["warm.npy", "cold.npy"]  # one write per run
    np.testing.assert_array_equal(writes[0][0], writes[1][0])  # the timed run's 5 steps, not the warm-up's 2
    np.testing.assert_array_equal(np.load(tmp_path / "warm.npy"), np.load(tmp_path / "cold.npy"))
    assert "Warmup" in summary and "Load" in summary
