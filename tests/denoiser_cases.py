"""Tiny random Wan transformers and inputs for the denoiser tests: one case per model kind
(T2V, two experts, I2V with CLIP tokens, I2V two experts, TI2V first frame, VACE control, Animate's
pose and face), 2 layers each,
latents [1, 3, 4, 6, 16] (18 tokens), 7 text tokens, guidance on."""

from __future__ import annotations

import attrs
import jax.numpy as jnp
import numpy as np
from flax import nnx

from wanjax.adapters.jax.transformer.model import WanTransformer
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.domain.conditioning import Conditioning
from wanjax.domain.extensions.animate import ANIMATE_EXTENSION
from wanjax.domain.extensions.vace import VACE_EXTENSION
from wanjax.domain.plan import SamplingPlan, plan_sampling
from wanjax.domain.requests import GenerationRequest
from wanjax.domain.specs import AnimateSpec, TransformerSpec

SPEC = TransformerSpec(
    num_attention_heads=2, attention_head_dim=12, text_dim=32, freq_dim=32, ffn_dim=32, num_layers=2
)
I2V_SPEC = attrs.evolve(SPEC, in_channels=36, image_dim=20, added_kv_proj_dim=24)
VACE_SPEC = attrs.evolve(SPEC, vace_layers=(0, 1), vace_in_channels=8)
ANIMATE_SPEC = attrs.evolve(I2V_SPEC, animate=AnimateSpec(
    motion_encoder_channel_sizes={"4": 8, "8": 8, "16": 8}, motion_encoder_size=16, motion_style_dim=8, motion_dim=4,
    motion_encoder_dim=8, face_encoder_hidden_dim=8, face_encoder_num_heads=2, inject_face_latents_blocks=1,
))  # fmt: skip
LATENTS, TEXT_TOKENS, IMAGE_TOKENS = (1, 3, 4, 6, 16), 7, 5
TOKENS = 3 * 2 * 3  # F' * H'/2 * W'/2


@attrs.frozen
class Case:
    spec: TransformerSpec
    experts: int
    conditioning: Conditioning


def _cases() -> dict[str, Case]:
    rng = np.random.default_rng(3)
    normal = lambda *shape: rng.standard_normal(shape, dtype=np.float32)  # noqa: E731
    i2v = Conditioning(extra_channels=normal(*LATENTS[:-1], 20), image_context=normal(1, IMAGE_TOKENS, 20))
    return {
        "t2v": Case(SPEC, 1, Conditioning()),
        "two-experts": Case(SPEC, 2, Conditioning()),
        "i2v": Case(I2V_SPEC, 1, i2v),
        "i2v-two-experts": Case(attrs.evolve(SPEC, in_channels=36), 2, i2v._replace(image_context=None)),
        "ti2v": Case(SPEC, 1, Conditioning(first_frame=normal(1, 1, *LATENTS[2:]))),
        "vace": Case(VACE_SPEC, 1, Conditioning(extensions=VACE_EXTENSION.given(
            control=normal(*LATENTS[:-1], 8), scale=np.float32(0.7),
        ))),
        "animate": Case(ANIMATE_SPEC, 1, i2v._replace(extensions=ANIMATE_EXTENSION.given(  # reference, 2 frames
            pose=normal(1, 2, *LATENTS[2:]), face=rng.uniform(-1, 1, (1, 5, 16, 16, 3)).astype(np.float32),
        ))),  # fmt: skip
    }


CASES = _cases()


def case_experts(case: Case) -> list[WanTransformer]:
    """The case's transformers (fp32), expert e from seed e."""
    runtime = TransformerRuntime(dtype=jnp.float32, param_dtype=jnp.float32)
    return [WanTransformer(case.spec, runtime, rngs=nnx.Rngs(seed)) for seed in range(case.experts)]


def case_plan(experts: int, steps: int, sample_solver: str = "unipc") -> SamplingPlan:
    """`sample_solver` (default UniPC) with guidance 5 (2.5 for a second expert), boundary 0.875."""
    request = GenerationRequest(
        prompt="p", height=32, width=48, num_frames=9, num_inference_steps=steps, guidance_scale=5.0,
        guidance_scale_low=2.5 if experts == 2 else None, flow_shift=3.0, sample_solver=sample_solver,
    )  # fmt: skip
    return plan_sampling(request, num_experts=experts, model_boundary_ratio=0.875)


def case_inputs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """latents [1, 3, 4, 6, 16], context and negative context [1, 7, 32]."""
    rng = np.random.default_rng(0)
    latents = rng.standard_normal(LATENTS, dtype=np.float32)
    context, negative = (rng.standard_normal((1, TEXT_TOKENS, 32), dtype=np.float32) for _ in range(2))
    return latents, context, negative


def assert_close(got: np.ndarray, expected: np.ndarray, relative_tolerance: float) -> None:
    """max|got - expected| <= relative_tolerance * max|expected|."""
    error = np.max(np.abs(got - expected)) / np.max(np.abs(expected))
    assert error <= relative_tolerance, f"relative error {error:.2e}"
