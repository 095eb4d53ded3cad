"""Batches of different prompts and seeds, and how prompts reach the text encoder (fakes only)."""

from types import SimpleNamespace

import attrs
import numpy as np
import pytest
from dependency_injector import providers
from fakes import FakeAutoencoder, FakeDenoiser, FakeTextEncoder

from wanjax.application.container import build_container
from wanjax.domain.batch import shared_request
from wanjax.domain.conditioning import ImageConditioning
from wanjax.domain.config import GenerationConfig
from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.specs import TransformerSpec, VaeSpec

CONFIG = GenerationConfig.from_mapping(dict(height=64, width=96, num_frames=9, num_inference_steps=3, max_sequence_length=5))


def _container(text: FakeTextEncoder, denoiser: FakeDenoiser, **overrides: str):
    container = build_container(CONFIG.with_overrides(overrides))
    checkpoint = SimpleNamespace(
        transformer_spec=TransformerSpec(), vae_spec=VaeSpec(), experts=("transformer",), boundary_ratio=None,
        image_conditioning=ImageConditioning.NONE, has=lambda component: False, image_encoder_files=lambda: None,
        speech_encoder_folder=lambda: None,
    )  # fmt: skip
    container.checkpoint.override(providers.Object(checkpoint))
    container.text_encoder.override(providers.Object(text))
    container.tokenizer_check.override(providers.Object(None))  # the fake encoder has no tokenizer
    container.denoiser.override(providers.Object(denoiser))
    container.autoencoder.override(providers.Object(FakeAutoencoder()))
    return container


def test_a_batch_gets_its_prompts_seeds_and_one_encoder_call_for_distinct_texts():
    text, denoiser = FakeTextEncoder(), FakeDenoiser()
    service = _container(text, denoiser).service()
    requests = [CONFIG.request(prompt, negative_prompt="dull", seed=seed) for prompt, seed in (("a cat", 1), ("a dog!", 2))]
    result = service.generate_batch(requests, output_type="latent")

    assert text.calls == [["a cat", "a dog!", "dull"]]  # the shared negative prompt is encoded once
    assert denoiser.contexts == [((2, 5, 8), (2, 5, 8))]
    single = [service.generate(r, output_type="latent").array for r in requests]
    np.testing.assert_array_equal(result.array, np.concatenate(single))  # row i: request i's own noise


def test_without_the_batched_encoder_prompts_and_negative_prompts_are_two_calls():
    text = FakeTextEncoder()
    service = _container(text, FakeDenoiser(), use_batched_text_encoder="false").service()
    service.generate(CONFIG.request("a cat", negative_prompt="dull"))
    assert text.calls == [["a cat"], ["dull"]]


@pytest.mark.parametrize(
    "change, field",
    [({"num_inference_steps": 4}, "num_inference_steps"), ({"guidance_scale": 2.0}, "guidance_scale"),
     ({"inputs": {"image": np.zeros((8, 8, 3), np.uint8)}}, "image")],
)  # fmt: skip
def test_batch_requests_may_differ_only_per_video(change, field):
    first = CONFIG.request("a cat")
    with pytest.raises(InvalidRequestError, match=f"request 1 of the batch differs from request 0 in {field};"):
        shared_request([first, attrs.evolve(first, prompt="a dog", seed=5, **change)])


def test_an_empty_batch_is_refused():
    with pytest.raises(InvalidRequestError, match="non-empty list"):
        shared_request([])


@pytest.mark.parametrize("intruder", [None, "a dog", {"prompt": "a dog"}])
def test_a_batch_member_that_is_not_a_request_is_named(intruder):
    with pytest.raises(InvalidRequestError, match=f"request 1 of the batch is {type(intruder).__name__}, not a GenerationRequest"):
        shared_request([CONFIG.request("a fox"), intruder])
