"""The Wan code's own pipelines, whole, against `wanjax generate --model OFFICIAL_FOLDER`.

The official `WanT2V` and `WanI2V` (Wan 2.2 A14B: two experts) and `WanTI2V` (TI2V-5B, text
to video and image to video) run on the CPU with the tiny official modules a folder was
written from (tests/official_folders.py): their T5 encoder and tokenizer, their VAE (2.1 or
2.2), their WanModels, their UniPC or DPM++ loop on the official noise grid.
wanjax reads the folder (sigma_schedule=official, its default) and starts from the same
noise (generate's `torch.randn` from its seed). The image of I2V is given at the video size,
where both sides' resizing is the identity.

Frames are compared as uint8, round((x + 1) / 2 * 255), within 1 level: both run in fp32
and differ by summation order (transformer passes ~1e-6 apart, the VAE ~5e-6). The final
latents (what the official pipeline hands its VAE's `decode`; wanjax's `output_type="latent"`)
within 1e-4 of max |latent|.

One folder, official pipeline and wanjax service per model kind serve all its runs
(wanjax compiles once per kind and conditioning; a new solver or step count recompiles only
the loop).
"""

from __future__ import annotations

import attrs
import numpy as np
import pytest
import torch
from PIL import Image

from official_folders import TEXT_LEN, RecordingVae, official_models, official_text_encoder, write_official_folder
from official_wan import official_pipeline

from wanjax.adapters.checkpoints.official_folder import BOUNDARY_RATIO
from wanjax.application.container import build_container
from wanjax.application.presets import resolve_config
from wanjax.domain.plan import HIGH_NOISE, plan_sampling
from wanjax.domain.requests import GenerationRequest

pytestmark = pytest.mark.filterwarnings("ignore:.*CUDA is not available:UserWarning")  # the Wan code's autocast
HEIGHT, WIDTH, FRAMES, SEED = 32, 64, 5, 7  # TI2V: multiples of 32
PROMPT, NEGATIVE = "a lighthouse", "blurry"
GUIDANCE = {"high": 4.0, "low": 3.0}
LATENT_TOLERANCE = 1e-4  # of max |latent|


@attrs.frozen
class _Setup:
    """One kind's official modules and folder, the official pipeline and wanjax's service on them."""

    models: object
    official: object
    vae: RecordingVae
    config: object
    service: object


def _setup(kind: str, folder) -> _Setup:
    models = official_models(kind)
    write_official_folder(folder, models)
    compression = 16 if models.kind.vae22 else 8
    if len(models.experts) == 2:
        experts = dict(high_noise_model=models.experts[0], low_noise_model=models.experts[1])
        experts.update(boundary=BOUNDARY_RATIO[models.kind.model_type])
    else:
        experts = dict(model=models.experts[0])
    vae = RecordingVae(models)
    official = official_pipeline(
        PIPELINES[kind], **experts, num_train_timesteps=1000, param_dtype=torch.float32,
        vae_stride=(4, compression, compression), patch_size=(1, 2, 2), sample_neg_prompt="",
        text_encoder=official_text_encoder(models, folder), vae=vae,
    )  # fmt: skip
    config = resolve_config(str(folder), {"max_sequence_length": str(TEXT_LEN), "text_embeddings_cache_dir": "none"})
    return _Setup(models, official, vae, config, build_container(config).service())


@pytest.fixture(scope="module")
def setups(tmp_path_factory):
    """kind -> its _Setup, built on first use."""
    built: dict[str, _Setup] = {}

    def get(kind: str) -> _Setup:
        if kind not in built:
            built[kind] = _setup(kind, tmp_path_factory.mktemp(kind))
        return built[kind]

    return get


def _noise(z_dim: int, compression: int) -> np.ndarray:
    """generate's initial noise: torch.randn of the latent shape from a generator seeded with SEED."""
    shape = (z_dim, (FRAMES - 1) // 4 + 1, HEIGHT // compression, WIDTH // compression)
    return torch.randn(*shape, dtype=torch.float32, generator=torch.Generator().manual_seed(SEED)).numpy()


def _to_uint8(video: torch.Tensor) -> np.ndarray:
    """[3, F, H, W] in [-1, 1] -> [F, H, W, 3] uint8 as wanjax quantises."""
    return np.round(((video.clamp(-1, 1) + 1) / 2 * 255).numpy()).astype(np.uint8).transpose(1, 2, 3, 0)


def _high_noise_steps(request, boundary_ratio: float) -> int:
    plan = plan_sampling(request, num_experts=2, model_boundary_ratio=boundary_ratio)
    return int(np.sum(plan.experts == HIGH_NOISE))


def _relative_error(got: np.ndarray, expected: np.ndarray) -> float:
    return float(np.max(np.abs(got - expected)) / np.max(np.abs(expected)))


PIPELINES = {
    "t2v-a14b": "wan.text2video.WanT2V", "i2v-a14b": "wan.image2video.WanI2V", "ti2v": "wan.textimage2video.WanTI2V",
}  # fmt: skip

# (kind, image, solver, steps, shift). I2V A14B at 14 steps, shift 5 (its released shift):
# the official grid runs the high-noise expert 5 steps, the diffusers grid 6.
CASES = [
    ("t2v-a14b", False, "unipc", 6, 5.0),
    ("i2v-a14b", True, "unipc", 14, 5.0),
    ("i2v-a14b", True, "dpm++", 8, 3.0),
    ("ti2v", False, "unipc", 6, 5.0),
    ("ti2v", True, "unipc", 8, 3.0),
]


@pytest.mark.parametrize("kind, with_image, solver, steps, shift", CASES)
def test_frames_and_latents_are_the_official_pipelines(setups, kind, with_image, solver, steps, shift) -> None:
    s = setups(kind)
    two_experts = len(s.models.experts) == 2
    image = np.random.default_rng(0).integers(0, 256, (HEIGHT, WIDTH, 3), dtype=np.uint8) if with_image else None
    compression = 16 if s.models.kind.vae22 else 8
    if two_experts:
        guidance = dict(guidance_scale=GUIDANCE["high"], guidance_scale_low=GUIDANCE["low"])
        official_guidance = (GUIDANCE["low"], GUIDANCE["high"])
    else:
        guidance, official_guidance = dict(guidance_scale=GUIDANCE["high"]), GUIDANCE["high"]

    high_noise_calls = []
    hook = s.models.experts[0].register_forward_hook(lambda *_: high_noise_calls.append(1))
    size = {"size": (WIDTH, HEIGHT)} if image is None else {"img": Image.fromarray(image), "max_area": HEIGHT * WIDTH}
    try:
        with torch.no_grad():
            video = s.official.generate(
                PROMPT, **size, frame_num=FRAMES, shift=shift, sample_solver=solver, sampling_steps=steps,
                guide_scale=official_guidance, n_prompt=NEGATIVE, seed=SEED, offload_model=False,
            )  # fmt: skip
    finally:
        hook.remove()
    official_latents = s.vae.decoded.pop()

    request = s.config.request(
        PROMPT, negative_prompt=NEGATIVE, height=HEIGHT, width=WIDTH, num_frames=FRAMES, num_inference_steps=steps,
        flow_shift=shift, sample_solver=solver, seed=SEED, image=image, **guidance,
    )  # fmt: skip
    noise = _noise(s.models.vae.z_dim, compression)[None]
    frames = s.service.generate(request, initial_latents=noise).array[0]
    latents = s.service.generate(request, initial_latents=noise, output_type="latent").array[0]

    if two_experts:  # the official loop ran the high-noise expert (cond + uncond) as wanjax's plan
        high_noise_steps = _high_noise_steps(request, BOUNDARY_RATIO[s.models.kind.model_type])
        assert 0 < high_noise_steps < steps and len(high_noise_calls) == 2 * high_noise_steps
    expected = _to_uint8(video)
    assert frames.shape == expected.shape and np.ptp(expected) > 0
    assert np.abs(frames.astype(int) - expected).max() <= 1
    assert latents.shape == official_latents.shape
    assert _relative_error(latents, official_latents) <= LATENT_TOLERANCE


def test_the_i2v_a14b_case_is_one_where_the_grids_split_the_experts_differently() -> None:
    request = GenerationRequest(
        prompt=PROMPT, height=HEIGHT, width=WIDTH, num_frames=FRAMES, num_inference_steps=14, flow_shift=5.0,
        guidance_scale=GUIDANCE["high"], guidance_scale_low=GUIDANCE["low"],
    )  # fmt: skip
    boundary = BOUNDARY_RATIO["i2v"]
    assert boundary == 0.9 and ("i2v-a14b", True, "unipc", 14, 5.0) in CASES
    assert _high_noise_steps(request, boundary) == 5
    assert _high_noise_steps(attrs.evolve(request, sigma_schedule="diffusers"), boundary) == 6
