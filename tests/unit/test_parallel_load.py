"""Components load in parallel: the small ones behind the transformer, the experts side by side."""

from __future__ import annotations

import shutil
import threading
import time
from types import SimpleNamespace

import jax.numpy as jnp
from dependency_injector import providers
from fakes import FakeAutoencoder, FakeDenoiser, FakeTextEncoder

from wanjax.adapters.checkpoints.diffusers_folder import DiffusersCheckpoint
from wanjax.adapters.jax.transformer.experts import ExpertLoading
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.adapters.jax.transformer.weights import export_transformer_weights
from wanjax.application.container import build_container
from wanjax.domain.conditioning import ImageConditioning
from wanjax.domain.config import GenerationConfig
from wanjax.domain.specs import TransformerSpec, VaeSpec
from wanjax.domain.tracing import TimingTrace


class Timeline:
    """Records (component, thread, start, end) of each build."""

    def __init__(self) -> None:
        self.builds: dict[str, tuple[int, float, float]] = {}

    def builder(self, name: str, seconds: float, fake: object):
        def build() -> object:
            start = time.perf_counter()
            time.sleep(seconds)
            self.builds[name] = (threading.get_ident(), start, time.perf_counter())
            return fake

        return providers.Singleton(build)


def test_the_text_encoder_loads_behind_the_transformer_and_the_span_covers_both():
    container = build_container(GenerationConfig())
    checkpoint = SimpleNamespace(
        transformer_spec=TransformerSpec(), vae_spec=VaeSpec(), experts=("transformer",), boundary_ratio=None,
        image_conditioning=ImageConditioning.NONE, image_encoder_files=lambda: None,
        speech_encoder_folder=lambda: None,
    )  # fmt: skip
    container.checkpoint.override(providers.Object(checkpoint))
    timeline = Timeline()
    container.denoiser.override(timeline.builder("denoiser", 0.5, FakeDenoiser()))
    container.text_encoder.override(timeline.builder("text_encoder", 0.3, FakeTextEncoder()))
    container.tokenizer_check.override(providers.Object(None))  # the fake encoder has no tokenizer
    container.autoencoder.override(timeline.builder("autoencoder", 0.1, FakeAutoencoder()))
    trace = TimingTrace()
    container.service().load(trace)

    denoiser, text, vae = (timeline.builds[n] for n in ("denoiser", "text_encoder", "autoencoder"))
    main = threading.get_ident()
    assert denoiser[0] == vae[0] == main != text[0]  # what places arrays on devices loads on one thread
    assert text[1] < denoiser[2] and denoiser[1] < text[2]  # the text encoder loads behind the transformer
    assert vae[1] >= denoiser[2]  # after it: every process places its arrays in one order
    assert 0.5 + 0.1 <= trace.seconds["load"] < 0.5 + 0.3 + 0.1


class SlowReads(dict):
    """A tensor mapping whose reads take 5 ms each and are timed: (first start, last end)."""

    def __init__(self, tensors) -> None:
        super().__init__((name, tensors[name]) for name in tensors)
        self.span = [float("inf"), 0.0]

    def __getitem__(self, name):
        self.span[0] = min(self.span[0], time.perf_counter())
        time.sleep(0.005)
        self.span[1] = time.perf_counter()
        return super().__getitem__(name)


def test_experts_load_concurrently_from_one_shared_config(tiny_a14b_checkpoint, tmp_path):
    folder = tmp_path / "a14b"
    shutil.copytree(tiny_a14b_checkpoint, folder)
    shared = folder / "transformer_2" / "config.json"  # as in the Hugging Face cache: two names, one blob
    shared.unlink()
    shared.symlink_to(folder / "transformer" / "config.json")
    checkpoint = DiffusersCheckpoint(folder)
    loading = ExpertLoading(runtime=TransformerRuntime(dtype=jnp.float32, param_dtype=jnp.float32))
    sources = [SlowReads(checkpoint.weights(expert)) for expert in checkpoint.experts]

    together = loading.load_all(checkpoint.transformer_spec, sources)
    alone = [loading.load(checkpoint.transformer_spec, checkpoint.weights(e)) for e in checkpoint.experts]

    (start_a, end_a), (start_b, end_b) = (source.span for source in sources)
    assert start_a < end_b and start_b < end_a  # both experts were being read at the same time
    for a, b in zip(together, alone, strict=True):
        a, b = export_transformer_weights(a), export_transformer_weights(b)
        assert all(a[n].tobytes() == b[n].tobytes() for n in a)
