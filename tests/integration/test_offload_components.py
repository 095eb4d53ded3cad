"""`offload=components` end to end on the demo model: the JAX text encoder, the VAE (its encode of
a source video, its decode) and the denoiser each on the device only while they work, in host
memory between; the video equals `offload=none`'s bit for bit."""

import jax
import numpy as np
import pytest

from wanjax.adapters.jax.platform.residency import HOST_MEMORY
from wanjax.application.container import build_container
from wanjax.application.presets import resolve_config

SIZE = dict(height=32, width=48, num_frames=5, num_inference_steps=2)


@pytest.fixture(autouse=True)
def demo_in_session_cache(demo_cache, monkeypatch):
    monkeypatch.setenv("WANJAX_CACHE", str(demo_cache.parent))


def _video_to_video(offload: str):
    """The container and its frames of a video-to-video run (the VAE encodes, then decodes)."""
    config = resolve_config(None, {"text_encoder_backend": "jax", "offload": offload})
    container = build_container(config)
    source = np.random.default_rng(5).integers(0, 256, (5, 32, 48, 3), dtype=np.uint8)
    request = config.request("a fox", **SIZE, video=source, strength=0.7)
    return container, container.service().generate(request).array


def test_components_make_the_same_video_with_the_weights_in_host_memory():
    _, resident = _video_to_video("none")
    container, moved = _video_to_video("components")
    np.testing.assert_array_equal(moved, resident)
    (params,) = container.denoiser().program.params
    assert {a.sharding.memory_kind for a in jax.tree.leaves(params)} == {HOST_MEMORY}
    assert container.denoiser().program.expert_at_work is None  # nothing left on the device


def test_the_unrounded_decode_brings_the_vae_from_host_memory(tiny_animate_checkpoint):
    """Wan Animate decodes each segment unrounded (`decode_to_unit`, the next segment's
    conditioning): under `offload=components` that decode also puts the VAE on the device first."""
    latents = np.random.default_rng(0).standard_normal((1, 2, 4, 6, 16), dtype=np.float32)
    units = []
    for offload in ("none", "components"):
        config = resolve_config(str(tiny_animate_checkpoint), {"dtype": "float32", "offload": offload})
        units.append(np.asarray(build_container(config).autoencoder().decode_to_unit(latents)))
    np.testing.assert_array_equal(*units)
