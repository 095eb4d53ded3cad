"""`--model OFFICIAL_FOLDER` makes the video `--model` of a diffusers-format folder of the same
weights makes: the whole service (layout, architecture read from configs and shapes, the
VAE, T5 and CLIP files) on a tiny folder (tests/official_folders.py).

One layout, to keep the run short: Wan 2.1 I2V, the one with every kind of file (the CLIP
`.pth` too) and the image through the VAE's encoder. The others are run whole against the
Wan code's own pipelines (tests/parity/test_official_pipeline_parity.py: Wan 2.2 A14B T2V and
I2V, TI2V-5B) and component by component (tests/parity/test_official_components.py).
"""

from __future__ import annotations

import numpy as np

from official_folders import TEXT_LEN, official_models, write_diffusers_twin, write_official_folder

from wanjax.application.container import build_container
from wanjax.application.presets import resolve_config

SETTINGS = {"max_sequence_length": str(TEXT_LEN), "flow_shift": "3", "text_embeddings_cache_dir": "none"}


def _generate(folder, image: np.ndarray | None) -> np.ndarray:
    config = resolve_config(str(folder), SETTINGS)
    request = config.request("a fox in the snow", height=32, width=32, num_frames=5, num_inference_steps=3, image=image)
    return build_container(config).service().generate(request).array


def test_an_official_folder_generates_what_its_diffusers_twin_does(tmp_path) -> None:
    official = write_official_folder(tmp_path / "official", official_models("i2v"))
    twin = write_diffusers_twin(tmp_path / "diffusers", official)
    image = np.random.default_rng(0).integers(0, 256, (40, 56, 3), dtype=np.uint8)

    ours, reference = _generate(official, image), _generate(twin, image)

    assert ours.shape == (1, 5, 32, 32, 3) and np.ptp(reference) > 0
    np.testing.assert_array_equal(ours, reference)
