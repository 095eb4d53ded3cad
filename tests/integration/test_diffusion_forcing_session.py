"""A Diffusion Forcing video runs its windows in one denoising session: a window that repeats the
one before (its shape, its given frames) compiles nothing at all (JAX's own compile events, counted
between the progress reports that end each window; the second window is the first given frames,
whose joining compiles once), one denoising step serves every window, and the progress counts the
iterations of every window. A tiny SkyReels-V2 DF model, three windows of 6 latent frames."""

from __future__ import annotations

import pytest

from tiny_skyreels import tiny_skyreels_df_pipeline
from wanjax.application.container import build_container
from wanjax.application.presets import resolve_config

STEPS = 2


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-skyreels-df")
    tiny_skyreels_df_pipeline().save_pretrained(folder)
    config = resolve_config(
        str(folder),
        {"dtype": "float32", "max_sequence_length": "8", "height": "32", "width": "48", "num_frames": "45",
         "num_inference_steps": str(STEPS), "base_num_frames": "21", "overlap_history": "9"},
    )  # fmt: skip
    return build_container(config), config.request("a boat at dawn", seed=2)


def test_windows_of_one_shape_compile_once(run, compile_counter):
    container, request = run
    compiles, progress = {}, []

    def on_step(done, total):
        progress.append((done, total))
        compiles[done] = compile_counter.count

    result = container.service().generate(request, output_type="latent", on_step=on_step)
    assert result.array.shape == (1, 16, 12, 4, 6)  # the whole video's latents: 12 latent frames
    assert progress == [(done, 3 * STEPS) for done in range(1, 3 * STEPS + 1)]  # synchronous: steps per window
    assert compiles[STEPS] > 0  # counted: the first window compiled its step
    assert compiles[3 * STEPS] == compiles[2 * STEPS], "the third window compiled what the second had"
    assert container.denoiser().program.num_compiled == 1  # one denoising step for every window


def test_a_kernel_without_causal_blocks_is_refused_before_loading(run):
    from wanjax.domain.errors import ConfigError

    container, request = run
    config = container.config().with_overrides({"attention": "pallas", "num_frames": "21"})
    service = build_container(config).service()
    service.check([config.request("a boat", ar_step=0)])  # one-frame blocks: no structure to honour
    with pytest.raises(ConfigError, match="attention=pallas does not support frame-block-causal"):
        service.check([config.request("a boat", ar_step=1, causal_block_size=2)])
