"""Each component of an official-format folder, loaded by wanjax, against the official module
it was written from (the `wan` package's classes, fp32, on the CPU).

The folders are tiny (tests/official_folders.py). Tolerances are 1e-5 of the reference's
largest value (the VAE decode, whose output is clamped to [-1, 1]: 1e-5 absolute); both
sides run in fp32 and differ by summation order (and, in the transformer, by the official
RoPE's float64 rotation against ours in float32).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx
from PIL import Image

from official_folders import CLIP_IMAGE_SIZE, TEXT_LEN, official_models, write_official_folder
from transformer_models import assert_close, runtime
from vae_models import to_ours, to_torch_layout

from wanjax.adapters.checkpoints.layout import open_checkpoint_folder
from wanjax.adapters.jax.transformer.weights import load_transformer
from wanjax.adapters.jax.vae.runtime import VaeRuntime
from wanjax.adapters.jax.vae.weights import load_vae
from wanjax.adapters.torch.clip_image import ClipImageEncoder, wan_clip_preprocessing
from wanjax.adapters.torch.umt5 import Umt5TextEncoder

pytestmark = pytest.mark.filterwarnings("ignore:.*CUDA is not available:UserWarning")  # the Wan code's autocast
TOLERANCE = 1e-5
UNSCALED = [0.0, 1.0]  # the official VAE's (mean, 1 / std): raw latents, as wanjax's VAE makes them


@pytest.fixture(scope="module")
def official(tmp_path_factory: pytest.TempPathFactory):
    """kind -> (official modules, the folder written from them), made on first use."""
    made = {}

    def get(kind: str):
        if kind not in made:
            models = official_models(kind)
            made[kind] = models, open_checkpoint_folder(write_official_folder(tmp_path_factory.mktemp(kind), models))
        return made[kind]

    return get


@pytest.mark.parametrize("kind, size", [("t2v", 16), ("ti2v", 32)], ids=["wan2.1-vae", "wan2.2-vae"])
def test_vae_encodes_and_decodes_as_the_official_one(official, kind: str, size: int) -> None:
    models, checkpoint = official(kind)
    runtime = VaeRuntime(dtype=jnp.float32, param_dtype=jnp.float32, encode_chunk=4)
    vae = load_vae(checkpoint.vae_spec, runtime, checkpoint.weights("vae"))
    video = torch.from_numpy(np.random.default_rng(0).uniform(-1, 1, (1, 3, 5, size, size)).astype(np.float32))
    with torch.no_grad():
        latents = models.vae.encode(video, UNSCALED)  # [B, z, F', H', W']
        decoded = models.vae.decode(latents, UNSCALED).clamp(-1, 1)

    ours_latents = to_torch_layout(vae.encode(to_ours(video)))
    ours_decoded = to_torch_layout(vae.decode(to_ours(latents)))

    assert_close(ours_latents, latents.numpy(), TOLERANCE)
    assert 0.1 < np.mean(np.abs(decoded.numpy()) < 1) and decoded.shape == ours_decoded.shape
    np.testing.assert_allclose(ours_decoded, decoded.numpy(), rtol=0, atol=TOLERANCE)


def test_t5_embeddings_are_the_official_encoders(official) -> None:
    models, checkpoint = official("t2v")
    files = checkpoint.text_encoder_files()
    encoder = Umt5TextEncoder.from_files(files, dtype="float32")
    prompts = ["a fox", "  two   cats "]  # the tiny tokenizer has a token per character
    ours = encoder.encode(prompts, TEXT_LEN)

    tokens = encoder._tokenizer(  # the official tokenizer call: whitespace-cleaned, padded to text_len
        [" ".join(p.split()) for p in prompts], padding="max_length", max_length=TEXT_LEN, truncation=True,
        add_special_tokens=True, return_tensors="pt",
    )  # fmt: skip
    with torch.no_grad():
        reference = models.t5(tokens.input_ids, tokens.attention_mask).numpy()
    lengths = tokens.attention_mask.sum(dim=1).tolist()
    for row, length in enumerate(lengths):
        assert_close(ours[row, :length], reference[row, :length], TOLERANCE)
        assert not ours[row, length:].any()  # past the prompt: zeros, as the official code trims
    assert lengths[0] != lengths[1]


def test_clip_features_are_the_official_vision_towers(official) -> None:
    models, checkpoint = official("i2v")
    encoder = ClipImageEncoder.from_files(checkpoint.image_encoder_files(), dtype="float32")
    image = np.random.default_rng(0).integers(0, 256, (40, 56, 3), dtype=np.uint8)
    ours = encoder.encode([image])

    from transformers import CLIPImageProcessor

    processor = CLIPImageProcessor(**wan_clip_preprocessing(CLIP_IMAGE_SIZE))
    pixels = processor(images=[Image.fromarray(image)], return_tensors="pt").pixel_values
    with torch.no_grad():  # Wan 2.1 I2V: the vision transformer's output before its last block
        reference = models.clip.visual(pixels, use_31_block=True).numpy()
    assert_close(ours, reference, TOLERANCE)


@pytest.mark.parametrize("kind", ["t2v", "i2v-a14b"])
def test_transformer_output_is_the_official_models(official, kind: str) -> None:
    models, checkpoint = official(kind)
    spec = checkpoint.transformer_spec
    rng = np.random.default_rng(0)
    latents = rng.standard_normal((2, 3, 4, 6, spec.in_channels), dtype=np.float32)  # [B, F, H, W, C]
    timestep = np.array([999.0, 500.5], np.float32)
    context = np.zeros((2, TEXT_LEN, spec.text_dim), np.float32)  # WanModel pads the text to text_len
    for row, tokens in enumerate((7, 11)):
        context[row, :tokens] = rng.standard_normal((tokens, spec.text_dim), dtype=np.float32)
    for expert_index, expert in enumerate(checkpoint.experts):
        model = load_transformer(spec, runtime(True), checkpoint.weights(expert))
        ours = np.asarray(nnx.jit(lambda m, x, t, c: m(x, t, c))(model, latents, timestep, context))

        official_model = models.experts[expert_index]
        reference = np.stack([_official_forward(official_model, *row) for row in zip(latents, timestep, context)])
        assert_close(ours, reference, TOLERANCE)


def _official_forward(model: torch.nn.Module, latents: np.ndarray, timestep: float, context: np.ndarray) -> np.ndarray:
    """WanModel on one sample (its timestep broadcast over the tokens takes a batch of one):
    latents [F, H, W, C] (I2V: 16 noise channels, then the image channels as `y`) -> [F, H, W, C_out]."""
    x = torch.from_numpy(latents.transpose(3, 0, 1, 2).copy())  # [C, F, H, W]
    image = {"y": [x[16:]]} if x.shape[0] == 36 else {}
    tokens = x.shape[1] * (x.shape[2] // 2) * (x.shape[3] // 2)
    with torch.no_grad():
        (out,) = model([x[:16] if image else x], torch.tensor([timestep]), [torch.from_numpy(context)], tokens, **image)
    return out.numpy().transpose(1, 2, 3, 0)
