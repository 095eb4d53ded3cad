"""The same seed and config give the same bits at every stage, from two fresh containers:
the text embeddings (torch), the final latents (the JAX denoising loop), the frames (the
JAX VAE) and the mp4 bytes (x264). A failure names the first stage that differs.

(A CI run once found two same-seed videos differing in one macroblock. Probes showed
the frames equal and the bytes not; valgrind then found x264 reading uninitialised memory,
see `X264_OPTIONS` in wanjax.adapters.media.video_files.)"""

from __future__ import annotations

import numpy as np

from wanjax.adapters.media.video_files import Mp4Sink
from wanjax.application.container import build_container
from wanjax.application.presets import resolve_config

STAGES = ("text embeddings", "final latents", "frames", "mp4 bytes")


def _run(config, request, mp4_path) -> tuple[np.ndarray, ...]:
    container = build_container(config)
    embeddings = container.text_encoder().encode([request.prompt, request.negative_prompt], config.max_sequence_length)
    service = container.service()
    latents = service.generate(request, output_type="latent").array
    frames = service.generate(request).array
    Mp4Sink().write(frames[0], mp4_path, config.fps)
    return embeddings, latents, frames, np.frombuffer(mp4_path.read_bytes(), dtype=np.uint8)


def test_two_fresh_containers_agree_bit_for_bit_at_every_stage(demo_cache, monkeypatch, tmp_path):
    monkeypatch.setenv("WANJAX_CACHE", str(demo_cache.parent))
    config = resolve_config("demo", {})
    request = config.request("a fox", seed=3, height=32, width=48, num_frames=5, num_inference_steps=2)
    first, second = (_run(config, request, tmp_path / f"{i}.mp4") for i in range(2))
    for stage, a, b in zip(STAGES, first, second, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype, stage
        differ = np.flatnonzero(a.reshape(-1) != b.reshape(-1))
        assert differ.size == 0, f"{stage} differ in {differ.size} of {a.size} values, first at flat index {differ[0]}"
