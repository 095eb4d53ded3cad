"""Per-token timesteps (Wan 2.2 TI2V, diffusers' `expand_timesteps`) against diffusers'
WanTransformer3DModel, on tiny random TI2V-shaped models written by `save_pretrained`.

TI2V denoises every frame but the first, which holds the clean image latent: the
timestep is [B, S], 0 on the first latent frame's tokens and t on the rest, so the time
embedding and every modulation (blocks and output norm) differ per token.

Tolerance as in test_transformer_parity.py: max|ours - ref| <= 1e-5 * max|ref|, fp32.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from diffusers import WanTransformer3DModel
from flax import nnx

from transformer_models import SavedReference, assert_close, runtime

from wanjax.adapters.jax.transformer.model import WanTransformer
from wanjax.adapters.jax.transformer.weights import load_transformer
from wanjax.domain.specs import TransformerSpec

RELATIVE_TOLERANCE = 1e-5
TI2V = dict(  # TI2V-5B's shape at toy size: in = out = 48-like, freq_dim 256
    num_attention_heads=2, attention_head_dim=8, in_channels=12, out_channels=12, text_dim=16,
    freq_dim=256, ffn_dim=32, num_layers=2,
)  # fmt: skip

# name -> (diffusers config, latent (F, H, W))
CONFIGS = {
    "ti2v-f3": (TI2V, (3, 4, 6)),
    "ti2v-f2-patch222": ({**TI2V, "patch_size": (2, 2, 2), "freq_dim": 32}, (4, 4, 4)),
}


@dataclasses.dataclass(frozen=True)
class Case:
    spec: TransformerSpec
    tensors: dict[str, np.ndarray]
    latents: np.ndarray  # [B, F, H, W, C_in]
    timestep: np.ndarray  # [B, S]
    context: np.ndarray  # [B, L, text_dim]
    reference: np.ndarray  # [B, F, H, W, C_out]


def first_frame_clean(t: np.ndarray, grid: tuple[int, int, int]) -> np.ndarray:
    """[B] -> [B, S]: 0 on the first token frame, t elsewhere (the TI2V pipeline's timesteps)."""
    f, h, w = grid
    mask = np.ones((f, h * w), np.float32)
    mask[0] = 0
    return t[:, None] * mask.reshape(1, -1)


@pytest.fixture(scope="module", params=list(CONFIGS))
def case(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Case:
    config, (frames, height, width) = CONFIGS[request.param]
    saved = SavedReference(config, tmp_path_factory.mktemp(request.param))
    spec = saved.spec

    rng = np.random.default_rng(0)
    latents = rng.standard_normal((2, frames, height, width, spec.in_channels), dtype=np.float32)
    pt, ph, pw = spec.patch_size
    timestep = first_frame_clean(np.array([999.0, 500.5], np.float32), (frames // pt, height // ph, width // pw))
    context = rng.standard_normal((2, 7, spec.text_dim), dtype=np.float32)
    return Case(
        spec=spec,
        tensors=saved.tensors,
        latents=latents,
        timestep=timestep,
        context=context,
        reference=saved.forward(latents, timestep, context),
    )


@pytest.mark.parametrize("scan_layers", [True, False], ids=["scan", "loop"])
def test_per_token_timesteps_match_diffusers(case: Case, scan_layers: bool) -> None:
    model = load_transformer(case.spec, runtime(scan_layers), case.tensors)
    out = np.asarray(nnx.jit(lambda m, x, t, ctx: m(x, t, ctx))(model, case.latents, case.timestep, case.context))

    assert_close(out, case.reference, RELATIVE_TOLERANCE)


@pytest.mark.parametrize("case", ["ti2v-f3"], indirect=True)
def test_uniform_per_token_timesteps_equal_per_sample(case: Case) -> None:
    model = load_transformer(case.spec, runtime(True), case.tensors)
    t = np.array([999.0, 500.5], np.float32)
    per_sample = np.asarray(model(case.latents, t, case.context))
    per_token = np.asarray(model(case.latents, np.repeat(t[:, None], case.timestep.shape[1], axis=1), case.context))

    np.testing.assert_allclose(per_token, per_sample, rtol=0, atol=1e-6 * np.abs(per_sample).max())


@pytest.mark.parametrize("shape", [(2, 17), (1, 36), (2, 36, 1), ()])
def test_bad_timestep_shape_is_rejected(shape: tuple[int, ...]) -> None:
    spec = TransformerSpec.from_diffusers_config(TI2V)
    model = WanTransformer(spec, runtime(True), rngs=nnx.Rngs(0))
    latents = np.zeros((2, 3, 4, 6, spec.in_channels), np.float32)  # S = 3 * 2 * 3 = 18
    with pytest.raises(ValueError, match=r"timestep must be \[B=2\] or per token \[B=2, S=18\]"):
        model(latents, np.zeros(shape, np.float32), np.zeros((2, 7, spec.text_dim), np.float32))
