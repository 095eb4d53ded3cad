"""Wan 2.2 S2V under the options every model takes, on the tiny official-format S2V folder
(tests/official_folders.py), one 8-frame clip of 64x128, 2 steps, CFG with a negative prompt, the
clip's final latents (`--output-type latent`): `offload=layers` and `offload=components` give the
resident latents bit for bit; a per-request LoRA equals the same LoRA merged at load (within the
bound of tests/integration/test_request_loras.py); the memory plan counts the wav2vec2 speech
encoder from its folder's headers, in host memory."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from lora_files import write_lora
from official_folders import TEXT_LEN, tiny_wav2vec2

from wanjax.adapters.jax.platform.residency import HOST_MEMORY
from wanjax.application.container import build_container
from wanjax.application.memory import DeviceSize, MemoryPlanner
from wanjax.application.presets import resolve_config
from wanjax.domain.lora import LoraSpec

pytestmark = pytest.mark.filterwarnings("ignore:.*CUDA is not available:UserWarning")
PLAIN = {"dtype": "float32", "max_sequence_length": str(TEXT_LEN), "text_embeddings_cache_dir": "none"}
RELATIVE_TOLERANCE = 1e-5  # test_request_loras.py's


@pytest.fixture(scope="module")
def speech() -> dict[str, np.ndarray]:
    """The request's inputs: a 40x100 reference image and 0.3 s of speech (one clip of 8 frames)."""
    rng = np.random.default_rng(8)
    return {"image": rng.integers(0, 256, (40, 100, 3), dtype=np.uint8),
            "audio": (rng.standard_normal(4800) * 0.1).astype(np.float32)}  # fmt: skip


def _run(folder, inputs, settings=None, **fields):
    """(container, the clip's final latents) of a run with `settings` over PLAIN."""
    config = resolve_config(str(folder), {**PLAIN, **(settings or {})})
    container = build_container(config)
    request = config.request(
        "a woman talks", negative_prompt="blurry", height=64, width=128, num_inference_steps=2, guidance_scale=4.5,
        seed=5, infer_frames=8, **inputs, **fields,
    )  # fmt: skip
    return container, np.asarray(container.service().generate(request, output_type="latent").array)


@pytest.fixture(scope="module")
def resident(tiny_s2v_checkpoint, speech) -> np.ndarray:
    return _run(tiny_s2v_checkpoint, speech)[1]


@pytest.mark.parametrize("offload", ["layers", "components"])
def test_offload_gives_the_resident_latents_bit_for_bit(tiny_s2v_checkpoint, speech, resident, offload):
    container, got = _run(tiny_s2v_checkpoint, speech, {"offload": offload})
    (params,) = container.denoiser().program.params
    moved = jax.tree.leaves(params["blocks"] if offload == "layers" else params)
    assert {a.sharding.memory_kind for a in moved} == {HOST_MEMORY}
    np.testing.assert_array_equal(got, resident)


def test_a_request_lora_equals_the_lora_merged_at_load(tiny_s2v_checkpoint, speech, resident, tmp_path):
    """A LoRA over every block linear (and some top-level ones) of the S2V transformer; the S2V
    additions' own weights (audio injectors, encoders) are no LoRA target of any published style."""
    config = resolve_config(str(tiny_s2v_checkpoint), PLAIN)
    weights = build_container(config).checkpoint().weights("transformer")
    shapes = {name: weights[name].shape for name in weights}
    lora = write_lora(tmp_path / "lora.safetensors", "diffusers", shapes, np.random.default_rng(2), magnitude=0.5)
    _, got = _run(tiny_s2v_checkpoint, speech, {"request_loras": "true"}, loras=[LoraSpec(str(lora), 0.7)])
    _, expected = _run(tiny_s2v_checkpoint, speech, {"loras": f"{lora}:0.7"})
    scale = np.max(np.abs(expected))
    assert np.max(np.abs(got - expected)) <= RELATIVE_TOLERANCE * scale
    assert np.max(np.abs(expected - resident)) > 1000 * RELATIVE_TOLERANCE * scale  # the LoRA does change it


def test_the_memory_plan_counts_the_speech_encoder_in_host_memory(tiny_s2v_checkpoint, speech):
    config = resolve_config(str(tiny_s2v_checkpoint), PLAIN)
    request = config.request("a woman talks", height=64, width=128, infer_frames=8, **speech)
    container = build_container(config)
    wav2vec2 = sum(tensor.numel() for tensor in tiny_wav2vec2()[0].state_dict().values())
    for platform in ("gpu", "cpu"):
        size = DeviceSize(device=2**40, host=2**40, platform=platform)
        plan = MemoryPlanner(container.settings(), container.checkpoint(), size).plan(request)
        assert dict(plan.host_parts)["speech encoder weights (torch)"] == 4 * wav2vec2  # float32
