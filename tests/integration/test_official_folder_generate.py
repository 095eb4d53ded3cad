"""`--model OFFICIAL_FOLDER` makes the video `--model` of a diffusers-format folder of the same
weights makes: the whole service (layout, architecture read from configs and shapes, the
VAE, T5 and CLIP files, the expert boundary) on tiny folders (tests/official_folders.py).

Two layouts, to keep the run short: Wan 2.2 A14B (two experts in their own folders, the
boundary) and Wan 2.1 I2V (the CLIP file, the image through the VAE's encoder). The Wan 2.2
VAE and TI2V's per-token timesteps are covered by tests/parity/test_official_components.py
and tests/unit/test_official_checkpoint.py."""

from __future__ import annotations

import numpy as np
import pytest

from official_folders import KINDS, TEXT_LEN, official_models, write_diffusers_twin, write_official_folder

from wanjax.application.container import build_container
from wanjax.application.presets import resolve_config

SETTINGS = {"max_sequence_length": str(TEXT_LEN), "flow_shift": "3", "text_embeddings_cache_dir": "none"}


def _generate(folder, image: np.ndarray | None) -> np.ndarray:
    config = resolve_config(str(folder), SETTINGS)
    request = config.request("a fox in the snow", height=32, width=32, num_frames=5, num_inference_steps=3, image=image)
    return build_container(config).service().generate(request).array


@pytest.mark.parametrize("kind", ["t2v-a14b", "i2v"])
def test_an_official_folder_generates_what_its_diffusers_twin_does(kind: str, tmp_path) -> None:
    official = write_official_folder(tmp_path / "official", official_models(kind))
    twin = write_diffusers_twin(tmp_path / "diffusers", official, KINDS[kind])
    image = None if kind == "t2v-a14b" else np.random.default_rng(0).integers(0, 256, (40, 56, 3), dtype=np.uint8)

    ours, reference = _generate(official, image), _generate(twin, image)

    assert ours.shape == (1, 5, 32, 32, 3) and np.ptp(reference) > 0
    np.testing.assert_array_equal(ours, reference)
